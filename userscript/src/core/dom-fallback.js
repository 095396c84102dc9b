/**
 * Reply capture from the page's DOM, used when network capture has no answer: no matching
 * request was seen shortly after a send (the endpoint moved, a transport we do not intercept),
 * or the stream was a parser miss (a renamed text field, plain JSON instead of the stream).
 * The reply is the newest assistant-looking element that appeared (or changed) after sending; it
 * is complete when its text has not changed for a few checks and the site shows no stop button.
 * Its text keeps the structure a person copies: paragraphs, line breaks, numbered and bulleted
 * lists, headings, quotes, tables and fenced code blocks (`replyText`), without the page's own
 * chrome (copy buttons, language banners, hidden parts). An image of the answer is written where it stands
 * as `![alt](url)` (`answerImage`: not an avatar, icon, emoji or a button's picture); `replyImages` lists
 * them for a reply whose text came from the network (docs/files.md "Back / 回传").
 */
import { isVisible, siteShowsStop } from './input.js';
import { imageMarkdown, imageNote, usableUrl } from '../adapters/lib/images.js';

/** Reply containers of the supported sites, then generic guesses. */
export const REPLY_SELECTORS = [
  '[data-message-author-role="assistant"]', // ChatGPT
  '.ds-markdown',                           // DeepSeek
  '[data-testid="receive_message"]',        // Doubao
  '.font-claude-response', '.font-claude-message', '[data-is-streaming]', // Claude
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

// ---- the answer's images ----------------------------------------------------------------------

/** Smaller than this on both sides (px) an image is an icon, an emoji or a source's favicon. */
export const MIN_IMAGE_PX = 48;
const NOT_ANSWER_IMAGE = /avatar|icon|logo|favicon|emoji|sprite|spinner|loading|badge/i;

function px(v) {
  const n = Number.parseFloat(v);
  return Number.isFinite(n) ? n : 0;
}

/**
 * The image an `img` of a reply shows, as `{url, alt}`, or null when it is not part of the answer: hidden,
 * inside a button, an avatar/icon/logo/emoji by its class, alt or address, or small (its size attributes,
 * its natural size once loaded, or its box when laid out: under MIN_IMAGE_PX on both sides). `url` is the
 * address the page loaded (`currentSrc`), absolute; lib/images.js decides whether the hub can use it.
 */
export function answerImage(img) {
  if (!img || img.tagName !== 'IMG') return null;
  if (img.closest('button, [role="button"], [data-aicard-panel]')) return null;
  if (img.getAttribute('aria-hidden') === 'true' || img.getAttribute('role') === 'presentation') return null;
  const cls = typeof img.className === 'string' ? img.className : img.getAttribute('class') || '';
  // A lazy image shows a placeholder until it scrolls into view; its real address waits in `data-src`.
  const lazy = img.getAttribute('data-src');
  const shown = img.currentSrc || img.getAttribute('src') || '';
  const placeholder = Boolean(lazy) && (!shown || /^data:/i.test(shown));
  const raw = placeholder ? lazy : shown;
  const alt = img.getAttribute('alt') || '';
  if (!raw || NOT_ANSWER_IMAGE.test(cls) || NOT_ANSWER_IMAGE.test(alt) || /favicon|\/icons?\//i.test(raw)) return null;
  const small = (w, h) => w > 0 && h > 0 && w < MIN_IMAGE_PX && h < MIN_IMAGE_PX;
  if (small(px(img.getAttribute('width')), px(img.getAttribute('height')))) return null;
  if (!placeholder && img.complete && small(img.naturalWidth, img.naturalHeight)) return null;
  const box = img.getBoundingClientRect?.();
  if (box && small(box.width, box.height)) return null;
  if (hidden(img)) return null;
  let url = raw;
  try { url = new URL(raw, img.ownerDocument?.baseURI).href; } catch { /* kept as written */ }
  return { url, alt };
}

/** The Markdown for an answer image: `![alt](url)`, or the note for one the hub cannot open. */
function imageText(found) {
  const url = usableUrl(found.url);
  return url ? imageMarkdown({ url, alt: found.alt }) : imageNote(found.alt);
}

/** The answer images in `el`, in document order: `{url, alt}`. */
export function imagesIn(el) {
  const out = [];
  for (const img of el.querySelectorAll('img')) {
    const found = answerImage(img);
    if (found) out.push(found);
  }
  return out;
}

/** The addresses of the answer images every reply on the page shows now (a turn's baseline). */
export function pageImageUrls(doc, adapter) {
  const selectors = [...(adapter?.reply?.selectors || []), ...REPLY_SELECTORS];
  const urls = new Set();
  for (const reply of candidates(doc, selectors)) for (const img of imagesIn(reply)) urls.add(img.url);
  return urls;
}

/**
 * The images of the newest reply on the page (the last reply element, the page's own selectors first):
 * what a turn read from the network adds when its stream carried none (docs/files.md "Back / 回传").
 */
export function replyImages(doc, adapter) {
  const selectors = [...(adapter?.reply?.selectors || []), ...REPLY_SELECTORS];
  const replies = candidates(doc, selectors);
  const last = replies[replies.length - 1];
  return last ? imagesIn(last) : [];
}

// ---- the text a person copies -------------------------------------------------------------

const SKIP_TAGS = new Set(['BUTTON', 'SVG', 'svg', 'STYLE', 'SCRIPT', 'NOSCRIPT', 'TEMPLATE', 'TEXTAREA', 'INPUT', 'SELECT', 'IMG', 'CANVAS', 'VIDEO', 'AUDIO', 'IFRAME']);
const BLOCK_TAGS = new Set(['P', 'DIV', 'SECTION', 'ARTICLE', 'MAIN', 'HEADER', 'FOOTER', 'FIGURE', 'FIGCAPTION', 'DETAILS', 'SUMMARY',
  'UL', 'OL', 'LI', 'PRE', 'BLOCKQUOTE', 'TABLE', 'HR', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'DL', 'DT', 'DD', 'CODE-BLOCK',
  'MESSAGE-CONTENT', 'MODEL-RESPONSE']);
/** The page's chrome around code blocks and replies: copy buttons, language banners, toolbars. */
const CHROME_CLASS = /(^|[\s_-])(copy|toolbar|code-?block-?(banner|header|decoration|title|toolbar|actions?)|code-header|header-wrapper|segment-code-header|highlighter-header|actions?|sr-only|visually-hidden)([\s_-]|$)/i;
const LANG_WORD = /^[A-Za-z][\w+#.-]{0,19}$/;
const NOT_LANG = /^(copy|copied|copy code|content_copy|复制|复制代码|下载|download|run|运行|edit|编辑|code)$/i;

function hidden(el) {
  if (el.hidden || el.getAttribute('aria-hidden') === 'true') return true;
  const view = el.ownerDocument?.defaultView;
  if (!view?.getComputedStyle) return false;
  const style = view.getComputedStyle(el);
  return style.display === 'none' || style.visibility === 'hidden';
}

function skipped(el) {
  if (SKIP_TAGS.has(el.tagName)) return true;
  if (el.getAttribute('role') === 'button' || el.hasAttribute('data-aicard-panel')) return true;
  const cls = typeof el.className === 'string' ? el.className : el.getAttribute('class') || '';
  if (cls && CHROME_CLASS.test(cls) && !el.querySelector('pre')) return true;
  return hidden(el);
}

/** The language of a code block: a `language-x` class, a data attribute, or its wrapper's banner. */
function codeLanguage(pre) {
  for (const el of [pre.querySelector('code'), pre]) {
    if (!el) continue;
    const m = /(?:^|\s)(?:language|lang)-([\w+#.-]+)/.exec(el.getAttribute('class') || '');
    if (m) return m[1];
    const data = el.getAttribute('data-language') || el.getAttribute('data-lang');
    if (data) return data;
  }
  let wrap = pre.parentElement;
  for (let depth = 0; wrap && depth < 4; depth += 1, wrap = wrap.parentElement) {
    if (wrap.querySelectorAll('pre').length > 1) break;
    for (const el of wrap.querySelectorAll('span, div, p')) {
      if (el.contains(pre) || pre.contains(el) || el.children.length) continue;
      const t = (el.textContent || '').trim();
      if (LANG_WORD.test(t) && !NOT_LANG.test(t)) return t.toLowerCase();
    }
  }
  return '';
}

function codeText(pre) {
  const code = pre.querySelector('code') || pre;
  return (code.textContent || '').replace(/\n$/, '');
}

/** Inline text of an element: whitespace collapsed, `br` kept, inline code and bold marked. */
function inline(node, out) {
  for (const child of node.childNodes) inlineChild(child, out);
  return out;
}

function inlineChild(child, out) {
  if (child.nodeType === 3) { out.push(child.data.replace(/[ \t\r\n]+/g, ' ')); return; }
  if (child.nodeType === 1 && child.tagName === 'IMG') {
    const found = answerImage(child);
    if (found) out.push(imageText(found));
    return;
  }
  if (child.nodeType !== 1 || skipped(child)) return;
  const tag = child.tagName;
  if (tag === 'BR') out.push('\n');
  else if (BLOCK_TAGS.has(tag)) out.push(`\n${blockText(child)}\n`);
  else if (tag === 'CODE') out.push(`\`${child.textContent}\``);
  else if (tag === 'STRONG' || tag === 'B') out.push(`**${inlineText(child)}**`);
  else inline(child, out);
}

function inlineText(node) {
  return inline(node, []).join('').split('\n').map((l) => l.trim()).join('\n').replace(/\n{3,}/g, '\n\n').trim();
}

function listText(list) {
  const ordered = list.tagName === 'OL';
  let n = Number(list.getAttribute('start')) || 1;
  const items = [];
  for (const li of list.children) {
    if (li.tagName !== 'LI' || skipped(li)) continue;
    const marker = ordered ? `${n}. ` : '- ';
    n += 1;
    const body = blockText(li);
    items.push(marker + body.split('\n').map((l, i) => (i === 0 || l === '' ? l : ' '.repeat(marker.length) + l)).join('\n'));
  }
  return items.join('\n');
}

function tableText(table) {
  const rows = [...table.querySelectorAll('tr')].map((tr) => [...tr.children].map((c) => inlineText(c).replace(/\n/g, ' ')));
  if (!rows.length) return '';
  const line = (cells) => `| ${cells.join(' | ')} |`;
  return [line(rows[0]), line(rows[0].map(() => '---')), ...rows.slice(1).map(line)].join('\n');
}

/**
 * The box a site draws around one code block: one `pre` at most four levels down, and outside it
 * only a language name, copy or download labels (no paragraph text). Its text is the fenced code.
 */
function codeWrapperPre(el) {
  if (/^(LI|P|BLOCKQUOTE|TD|TH|H[1-6])$/.test(el.tagName)) return null;
  const pres = [...el.querySelectorAll('pre')].filter((p) => !hidden(p));
  if (pres.length !== 1) return null;
  const pre = pres[0];
  let depth = 0;
  for (let p = pre.parentElement; p && p !== el; p = p.parentElement) depth += 1;
  if (depth > 3) return null;
  const walker = el.ownerDocument.createTreeWalker(el, 4); // text nodes
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (pre.contains(n)) continue;
    const t = n.data.trim();
    if (!t) continue;
    if (n.parentElement?.closest('p, li, h1, h2, h3, h4, h5, h6, blockquote') && el.contains(n.parentElement.closest('p, li, h1, h2, h3, h4, h5, h6, blockquote'))) return null;
    if (!LANG_WORD.test(t) && !NOT_LANG.test(t) && !/copy|复制|下载/i.test(t)) return null;
  }
  return pre;
}

/** Text of a block element: its children's blocks joined by blank lines, inline runs kept. */
function blockText(el) {
  const wrapped = el.tagName === 'PRE' ? null : codeWrapperPre(el);
  if (wrapped) return blockText(wrapped);
  switch (el.tagName) {
    case 'PRE': {
      const lang = codeLanguage(el);
      return `\`\`\`${lang}\n${codeText(el)}\n\`\`\``;
    }
    case 'UL': case 'OL': return listText(el);
    case 'TABLE': return tableText(el);
    case 'HR': return '---';
    case 'BLOCKQUOTE': return blocksOf(el).split('\n').map((l) => (l ? `> ${l}` : '>')).join('\n');
    case 'H1': case 'H2': case 'H3': case 'H4': case 'H5': case 'H6':
      return `${'#'.repeat(Number(el.tagName[1]))} ${inlineText(el)}`;
    default: return blocksOf(el);
  }
}

function blocksOf(el) {
  const parts = [];
  let run = [];
  const endRun = () => {
    const t = run.join('').split('\n').map((l) => l.trim()).join('\n').replace(/\n{3,}/g, '\n\n').trim();
    if (t) parts.push(t);
    run = [];
  };
  for (const child of el.childNodes) {
    if (child.nodeType !== 1 || (!BLOCK_TAGS.has(child.tagName) && !child.querySelector('pre, p, ul, ol, table, blockquote, h1, h2, h3, h4, h5, h6'))) {
      inlineChild(child, run);
      continue;
    }
    if (skipped(child)) continue;
    endRun();
    const t = blockText(child);
    if (t) parts.push(t);
  }
  endRun();
  // A list item's nested list sits on the next line; other blocks are separated by a blank line.
  return parts.join(el.tagName === 'LI' ? '\n' : '\n\n');
}

/**
 * The reply's text as a person copies it: paragraphs separated by a blank line, line breaks
 * kept, list items numbered (`1. `) or bulleted (`- `), code blocks fenced with their language.
 */
export function replyText(el) {
  return blockText(el).replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

// ---- watching for the reply -----------------------------------------------------------------

export class DomReplyWatcher {
  /**
   * Takes the baseline (the reply elements on the page and their text) at construction: call it
   * just before sending. An element counts as the reply when it is new or its text changed.
   */
  constructor({ doc, adapter, timers, stableChecks = 3, everyMs = 350 }) {
    Object.assign(this, { doc, timers, stableChecks, everyMs });
    this.selectors = [...(adapter?.reply?.selectors || []), ...REPLY_SELECTORS];
    this.baseline = new Map(candidates(doc, this.selectors).map((el) => [el, safeText(el)]));
    this.timer = null;
    this.running = false;
  }

  /** The newest reply element that is new or changed since the baseline, and its text. */
  read() {
    const fresh = candidates(this.doc, this.selectors).filter((el) => isVisible(el));
    for (let i = fresh.length - 1; i >= 0; i -= 1) {
      const el = fresh[i];
      const text = safeText(el);
      if (!text) continue;
      if (this.baseline.has(el) && this.baseline.get(el) === text) return '';
      return text;
    }
    return '';
  }

  /** Starts watching; `onReply(text)` is called once with the settled reply text. */
  start(onReply) {
    if (this.running) return;
    this.running = true;
    let last = null;
    let stable = 0;
    const tick = () => {
      if (!this.running) return;
      const text = this.read();
      if (text) this.sawSomething = true;
      if (text && text === last && !siteShowsStop(this.doc)) stable += 1;
      else stable = 0;
      last = text;
      if (stable >= this.stableChecks) { this.running = false; onReply(text); return; }
      this.timer = this.timers.setTimeout(tick, this.everyMs);
    };
    tick();
  }

  stop() {
    this.running = false;
    if (this.timer) this.timers.clearTimeout(this.timer);
  }
}

function safeText(el) {
  try {
    return replyText(el);
  } catch {
    return (el.innerText || el.textContent || '').trim();
  }
}

/** How long the page may take to show a reply once the stream was not understood. */
export const PAGE_READ_AFTER_MISS_MS = 6_000;
/** How long after the person's send a matching request must start before the page is read. */
export const PERSON_NO_STREAM_MS = 1_500;

/**
 * The person's own turns (no hub task): when the stream was a parser miss, or no matching
 * request started after they pressed send, the reply is read from the page and reported as an
 * untagged `turn_end` with `source: "dom"`, so the hub still hears what the model said.
 */
export class PersonTurnFallback {
  constructor({ doc, adapter, capture, timers, log }) {
    Object.assign(this, { doc, adapter, capture, timers, log });
    this.pending = null;
    capture.on((kind, turn) => this.onCapture(kind, turn));
  }

  /** The person pressed send: take the baseline, wait briefly for the stream. */
  sent() {
    this.cancel();
    this.capture.noteSend();
    const watcher = new DomReplyWatcher({ doc: this.doc, adapter: this.adapter, timers: this.timers });
    const p = { watcher, started: false };
    p.timer = this.timers.setTimeout(() => {
      if (this.pending !== p || p.started) return;
      this.log('warn', 'no stream after the person sent, reading the page / 未捕获到网络流，改读页面');
      this.read(p, PERSON_NO_STREAM_MS * 20);
    }, PERSON_NO_STREAM_MS);
    this.pending = p;
  }

  onCapture(kind, turn) {
    const p = this.pending;
    if (!p || turn?.taskId) return;
    if (kind === 'turn_start') p.started = true;
    if (kind === 'turn_end') this.cancel();
    if (kind === 'parser_miss') this.read(p, PAGE_READ_AFTER_MISS_MS);
  }

  read(p, giveUpMs) {
    const giveUp = this.timers.setTimeout(() => {
      if (this.pending !== p) return;
      this.log('warn', `${this.adapter.name}: the page showed no reply either / 页面上也没有回复`);
      this.cancel();
    }, giveUpMs);
    p.watcher.start((text) => {
      this.timers.clearTimeout(giveUp);
      if (this.pending !== p) return;
      this.pending = null;
      this.capture.domTurn(text, undefined);
    });
    p.giveUp = giveUp;
  }

  cancel() {
    const p = this.pending;
    if (!p) return;
    this.pending = null;
    p.watcher.stop();
    this.timers.clearTimeout(p.timer);
    if (p.giveUp) this.timers.clearTimeout(p.giveUp);
  }
}
