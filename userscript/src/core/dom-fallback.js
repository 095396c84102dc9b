/**
 * Fallback reply capture from the page's DOM, used only when network capture saw nothing for a
 * sent task (an endpoint the adapter does not know yet, a transport we do not intercept). The
 * reply is the newest assistant-looking element that appeared after sending; it is complete when
 * its text has not changed for a few checks and the site shows no stop button.
 */
import { isVisible, siteShowsStop } from './input.js';

/** Reply containers of the supported sites, then generic guesses. */
export const REPLY_SELECTORS = [
  '[data-message-author-role="assistant"]', // ChatGPT
  '.ds-markdown',                           // DeepSeek
  '[data-testid="receive_message"]',        // Doubao
  '.font-claude-message', '[data-is-streaming]', // Claude
  'model-response message-content',         // Gemini
  '.hyc-content-md',                        // Yuanbao
  '.markdown-body', '.markdown',            // Kimi, Qwen, ChatGLM, many others
  '[data-role="assistant"]', '.assistant', '[class*="assistant-message"]',
];

function candidates(doc, selectors) {
  const seen = new Set();
  for (const sel of selectors) {
    let nodes;
    try { nodes = doc.querySelectorAll(sel); } catch { continue; }
    for (const el of nodes) if (!el.closest('[data-aicard-panel]')) seen.add(el);
  }
  // Keep outermost matches only, in document order.
  return [...seen].filter((el) => ![...seen].some((o) => o !== el && o.contains(el)))
    .sort((a, b) => (a.compareDocumentPosition(b) & 4 ? -1 : 1));
}

export class DomReplyWatcher {
  /**
   * Takes the baseline (the reply elements already on the page) at construction: call it just
   * before sending.
   */
  constructor({ doc, adapter, timers, stableChecks = 3, everyMs = 700 }) {
    Object.assign(this, { doc, timers, stableChecks, everyMs });
    this.selectors = [...(adapter?.reply?.selectors || []), ...REPLY_SELECTORS];
    this.baseline = new Set(candidates(doc, this.selectors));
    this.timer = null;
  }

  /** Starts watching; `onReply(text)` is called once with the settled reply text. */
  start(onReply) {
    let last = null;
    let stable = 0;
    const tick = () => {
      const fresh = candidates(this.doc, this.selectors).filter((el) => !this.baseline.has(el) && isVisible(el));
      const el = fresh[fresh.length - 1];
      const text = el ? el.innerText.trim() : '';
      if (text) this.sawSomething = true;
      if (text && text === last && !siteShowsStop(this.doc)) stable += 1;
      else stable = 0;
      last = text;
      if (stable >= this.stableChecks) { onReply(text); return; }
      this.timer = this.timers.setTimeout(tick, this.everyMs);
    };
    tick();
  }

  stop() {
    if (this.timer) this.timers.clearTimeout(this.timer);
  }
}
