/**
 * Typing into the site's input box the way a person would, and pressing send.
 * React-controlled textareas get the native value setter plus an `input` event (React tracks the
 * native value); contenteditable editors (ProseMirror, Quill, Lexical) get `beforeinput` /
 * `execCommand('insertText')`, which they handle as typing. Locators try the adapter's selectors
 * first, then generic heuristics, so a renamed class does not break the site.
 */

const GENERIC_INPUTS = 'textarea, [contenteditable="true"], [contenteditable=""], [contenteditable="plaintext-only"], [role="textbox"]';
const SEND_LABEL = /send|submit|发送|提交|送出/i;
// A stop-generating control (not e.g. "Stop recording" of a voice button).
const STOP_LABEL = /stop[ _-]?(generating|streaming|response|answer|button)|^stop$|停止(生成|输出|回答|响应)?$|中止|取消生成/i;

export function isVisible(el) {
  if (!el || !el.isConnected) return false;
  const rect = el.getBoundingClientRect();
  if (rect.width < 2 || rect.height < 2) return false;
  const style = el.ownerDocument.defaultView.getComputedStyle(el);
  return style.visibility !== 'hidden' && style.display !== 'none' && Number(style.opacity) > 0.05;
}

function firstVisible(doc, selectors = []) {
  for (const sel of selectors) {
    let nodes;
    try { nodes = doc.querySelectorAll(sel); } catch { continue; }
    for (const el of nodes) if (isVisible(el)) return el;
  }
  return null;
}

/** The adapter's input box, else the visible textarea/contenteditable nearest the bottom. */
export function findInput(doc, adapter) {
  const own = firstVisible(doc, adapter?.input?.selectors);
  if (own) return own;
  let best = null;
  let bestBottom = -Infinity;
  for (const el of doc.querySelectorAll(GENERIC_INPUTS)) {
    if (!isVisible(el) || el.closest('[data-aicard-panel]') || el.readOnly || el.disabled) continue;
    // Nested editable children belong to their outermost editable.
    if (el.parentElement?.closest('[contenteditable="true"], [contenteditable=""]')) continue;
    const bottom = el.getBoundingClientRect().bottom;
    if (bottom > bestBottom) { best = el; bestBottom = bottom; }
  }
  return best;
}

function isTextField(el) {
  return el.tagName === 'TEXTAREA' || el.tagName === 'INPUT';
}

const BLOCK_TAGS = /^(P|DIV|LI|H[1-6]|PRE|BLOCKQUOTE|UL|OL)$/;

/**
 * An editor's text as the person typed it: one `\n` between paragraphs (innerText would put two
 * between `<p>`s), `<br>` as a line break, the placeholder `<br>` of an empty paragraph as nothing.
 */
export function editorText(el) {
  const lines = [];
  let inline = null;
  const flush = () => { if (inline !== null) { lines.push(inline); inline = null; } };
  for (const node of el.childNodes) {
    if (node.nodeType === 1 && BLOCK_TAGS.test(node.tagName)) {
      flush();
      lines.push(editorText(node));
    } else if (node.nodeType === 1 && node.tagName === 'BR') {
      const last = node === el.lastChild;
      if (!last) inline = `${inline ?? ''}\n`;
      else if (inline === null && lines.length === 0) inline = '';
    } else if (node.nodeType === 3 || node.nodeType === 1) {
      inline = (inline ?? '') + (node.nodeType === 3 ? node.data : editorText(node));
    }
  }
  flush();
  return lines.join('\n');
}

/** The text currently in the input box (the person's draft). */
export function readInput(el) {
  if (isTextField(el)) return el.value;
  return editorText(el);
}

/** Sets a textarea's value through the prototype's setter so React's value tracker sees a change. */
function setNativeValue(el, value) {
  const win = el.ownerDocument.defaultView;
  const proto = el.tagName === 'TEXTAREA' ? win.HTMLTextAreaElement.prototype : win.HTMLInputElement.prototype;
  const setter = Object.getOwnPropertyDescriptor(proto, 'value').set;
  setter.call(el, value);
}

function fireInput(el, data, inputType = 'insertText') {
  const win = el.ownerDocument.defaultView;
  el.dispatchEvent(new win.InputEvent('input', { bubbles: true, composed: true, inputType, data }));
}

function replaceTextField(el, value) {
  el.focus();
  setNativeValue(el, value);
  fireInput(el, value);
  el.dispatchEvent(new el.ownerDocument.defaultView.Event('change', { bubbles: true }));
}

/** Selects everything in an editor, anchored in its text nodes (as a person's Ctrl+A would be). */
function selectContents(el) {
  const doc = el.ownerDocument;
  const range = doc.createRange();
  const walker = doc.createTreeWalker(el, 4 /* NodeFilter.SHOW_TEXT */);
  let first = null;
  let last = null;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) { first = first || n; last = n; }
  if (first) {
    range.setStart(first, 0);
    range.setEnd(last, last.data.length);
  } else {
    range.selectNodeContents(el);
  }
  const sel = doc.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

/** Replaces an editor's content as typing would: beforeinput, then execCommand, then raw DOM. */
function replaceEditable(el, value) {
  const doc = el.ownerDocument;
  const win = doc.defaultView;
  el.focus();
  selectContents(el);
  if (value === '') {
    doc.execCommand('delete', false);
    if (readInput(el) !== '') { el.textContent = ''; fireInput(el, null, 'deleteContentBackward'); }
    return;
  }
  const before = new win.InputEvent('beforeinput', {
    bubbles: true, cancelable: true, composed: true, inputType: 'insertText', data: value,
  });
  const handled = !el.dispatchEvent(before);
  if (handled && readInput(el) === value) return;
  if (handled) selectContents(el);
  if (doc.execCommand('insertText', false, value) && readInput(el) === value) return;
  // Last resort for editors that ignore both: write paragraphs and announce the change.
  el.replaceChildren(...value.split('\n').map((line) => {
    const p = doc.createElement('p');
    p.textContent = line;
    if (!line) p.appendChild(doc.createElement('br'));
    return p;
  }));
  fireInput(el, value);
}

/** Puts exactly `value` into the input box. */
export function setInput(el, value) {
  if (isTextField(el)) replaceTextField(el, value);
  else replaceEditable(el, value);
}

/**
 * The seed's protected block: inserts `block` into the person's draft without losing what they
 * typed before and after it. Inserted at the caret when the caret is in the box, else appended.
 */
export function composeWithDraft(draft, block, caret = draft.length) {
  const before = draft.slice(0, caret);
  const after = draft.slice(caret);
  const sepBefore = before && !before.endsWith('\n') ? '\n' : '';
  const sepAfter = after && !after.startsWith('\n') ? '\n' : '';
  return `${before}${sepBefore}${block}${sepAfter}${after}`;
}

function caretIn(el) {
  if (isTextField(el)) return el.ownerDocument.activeElement === el ? el.selectionStart : undefined;
  return undefined;
}

/** Inserts `block` into the box, keeping the draft around it (deliver without auto_send). */
export function insertBlock(el, block) {
  const draft = readInput(el);
  setInput(el, composeWithDraft(draft, block, caretIn(el)));
}

function isEnabled(btn) {
  return !btn.disabled && btn.getAttribute('aria-disabled') !== 'true';
}

/** The adapter's send button, else a visible button labelled send/发送 or a submit near the input. */
export function findSendButton(doc, adapter, input) {
  const own = firstVisible(doc, adapter?.send?.selectors);
  if (own) return own;
  const buttons = [...doc.querySelectorAll('button, [role="button"]')].filter((b) => isVisible(b) && !b.closest('[data-aicard-panel]'));
  const label = (b) => `${b.getAttribute('aria-label') || ''} ${b.getAttribute('title') || ''} ${b.getAttribute('data-testid') || ''} ${b.textContent || ''}`;
  const byLabel = buttons.find((b) => SEND_LABEL.test(label(b)) && !STOP_LABEL.test(label(b).trim()));
  if (byLabel) return byLabel;
  const form = input?.closest('form');
  const submit = form && [...form.querySelectorAll('button[type="submit"], input[type="submit"]')].find(isVisible);
  if (submit) return submit;
  if (!input) return null;
  // An icon button right of / below the input, closest to its bottom-right corner.
  const box = input.getBoundingClientRect();
  let best = null;
  let bestDist = Infinity;
  for (const b of buttons) {
    if (!b.querySelector('svg, img')) continue;
    const r = b.getBoundingClientRect();
    if (r.left < box.left || r.top < box.top - 80) continue;
    const dist = Math.hypot(r.right - box.right, r.bottom - box.bottom);
    if (dist < bestDist && dist < 200) { best = b; bestDist = dist; }
  }
  return best;
}

/** True when the site shows a stop-generating button (it is still streaming). */
export function siteShowsStop(doc) {
  return Boolean(findStopButton(doc));
}

/** The site's visible "stop generating" button, if it shows one. */
export function findStopButton(doc) {
  for (const b of doc.querySelectorAll('button, [role="button"]')) {
    const labels = [b.getAttribute('aria-label'), b.getAttribute('data-testid'), b.getAttribute('title')].filter(Boolean);
    if (labels.some((l) => STOP_LABEL.test(l.trim())) && isVisible(b) && !b.closest('[data-aicard-panel]')) return b;
  }
  return null;
}

function pressEnter(el, key = 'Enter') {
  const win = el.ownerDocument.defaultView;
  const init = { key, code: key, keyCode: 13, which: 13, bubbles: true, cancelable: true, composed: true };
  el.focus();
  el.dispatchEvent(new win.KeyboardEvent('keydown', init));
  el.dispatchEvent(new win.KeyboardEvent('keypress', init));
  el.dispatchEvent(new win.KeyboardEvent('keyup', init));
}

/** Waits (polling the DOM, bounded) for `check()` to be truthy. */
export function waitFor(check, { timeoutMs = 3000, everyMs = 50, timers = globalThis } = {}) {
  return new Promise((resolve) => {
    const started = Date.now();
    const tick = () => {
      let value;
      try { value = check(); } catch { value = null; }
      if (value) { resolve(value); return; }
      if (Date.now() - started >= timeoutMs) { resolve(null); return; }
      timers.setTimeout(tick, everyMs);
    };
    tick();
  });
}

/** Sends what is in the box: clicks the (enabled) send button, else presses the adapter's key. */
export async function pressSend(doc, adapter, input, timers) {
  const button = await waitFor(() => {
    const b = findSendButton(doc, adapter, input);
    return b && isEnabled(b) ? b : null;
  }, { timeoutMs: 3000, timers });
  if (button) {
    button.click();
    return 'button';
  }
  pressEnter(input, adapter?.send?.key || 'Enter');
  return 'key';
}
