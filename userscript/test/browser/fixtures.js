// Shared test data and helpers for the browser tests.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { ROOT } from './harness.js';

/** An answer that exercises every hostile split: CJK, emoji (surrogate pairs), quotes, newlines. */
export function answerFor(site, variant) {
  return `【${site}/${variant}】你好，世界！这是模拟回答。🌏🚀👩‍💻\n\n`
    + '1. "quoted" and \\backslash\\ and {"json": [1, 2]}\n'
    + '2. **加粗** `code` — 破折号… end✅';
}

export const REASONING = '先想一想：用户要什么？THINKING-NOT-ANSWER 🤔';

/** Adapters by site name: the sites' own plus the core's `sim`. */
export async function loadAdapters() {
  const list = [];
  const index = join(ROOT, 'src', 'adapters', 'index.js');
  if (existsSync(index)) list.push(...(await import(pathToFileURL(index).href)).adapters);
  list.push((await import(pathToFileURL(join(ROOT, 'src', 'core-test-site', 'sim-adapter.js')).href)).default);
  return new Map(list.map((a) => [a.name, a]));
}

/** Types `text` into the site's input as a person would (real key events) and sends it. */
export async function personTypesAndSends(page, adapter, text) {
  const input = page.locator(adapter.input.selectors.join(', ')).first();
  await input.click();
  await page.keyboard.type(text);
  const send = page.locator(adapter.send.selectors.join(', ')).first();
  if (await send.count()) await send.click();
  else await page.keyboard.press(adapter.send.key || 'Enter');
}

/**
 * In-page: the text of the box matching `sel` as a person reads it (textarea value, or an editor's
 * paragraphs joined by one newline — innerText would double them).
 */
export function boxTextInPage(sel) {
  const el = document.querySelector(sel);
  if (!el) return null;
  if (el.tagName === 'TEXTAREA' || el.tagName === 'INPUT') return el.value;
  const blocks = /^(P|DIV|LI|H[1-6]|PRE|BLOCKQUOTE|UL|OL)$/;
  const walk = (node) => {
    const lines = [];
    let inline = null;
    for (const n of node.childNodes) {
      if (n.nodeType === 1 && blocks.test(n.tagName)) { if (inline !== null) lines.push(inline); inline = null; lines.push(walk(n)); }
      else if (n.nodeType === 1 && n.tagName === 'BR') { if (n !== node.lastChild) inline = `${inline ?? ''}\n`; }
      else if (n.nodeType === 3) inline = (inline ?? '') + n.data;
      else if (n.nodeType === 1) inline = (inline ?? '') + walk(n);
    }
    if (inline !== null) lines.push(inline);
    return lines.join('\n');
  };
  return walk(el);
}
