// ChatGLM / 智谱清言 (chatglm.cn): `data:` JSON frames with `parts[]` keyed by `logic_id`, each holding
// `content[]` items (`text` = answer, `think` = reasoning). Sources disagree on the text encoding (reference
// §9): a 2026-09 capture sends incremental pieces while a part is `init` and the full text once it is
// `finish`; 2024-25 parsers treat every frame as a cumulative snapshot. This adapter learns the mode from the
// stream: a piece that does not extend the text so far proves "incremental"; a piece that strictly extends
// it proves "cumulative". `finish` parts always carry the full text and only their missing tail is emitted.
// The turn ends on top-level `status:"finish"` or `[DONE]`.

import { parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['chatglm.cn'];
const FIELDS = { text: 'text', think: 'think' };

/** An `image` content item: `image[].image_url` (docs/sites/chatglm.md "Images"), each address once. */
function takeImages(item, out, ctx) {
  for (const img of Array.isArray(item.image) ? item.image : []) {
    const url = img && typeof img.image_url === 'string' ? img.image_url : null;
    if (!url || !/^https?:\/\//i.test(url) || ctx.images.has(url)) continue;
    ctx.images.add(url);
    out.image({ url, alt: typeof img.alt === 'string' ? img.alt : '' });
  }
}

function keyState(ctx, key) {
  let s = ctx.keys.get(key);
  if (!s) {
    s = { text: '' };
    ctx.keys.set(key, s);
  }
  return s;
}

/** The part of `piece` that is new, given the text so far for this key and the stream's mode. */
function newText(ctx, state, piece, isFull) {
  const acc = state.text;
  if (isFull || ctx.mode === 'cumulative') {
    if (piece.startsWith(acc)) {
      state.text = piece;
      return piece.slice(acc.length);
    }
    if (!isFull && !acc.startsWith(piece)) state.text = piece; // rewritten snapshot: nothing new to show
    return '';
  }
  if (ctx.mode === 'incremental' || acc === '') {
    state.text = acc + piece;
    return piece;
  }
  if (piece.length > acc.length && piece.startsWith(acc)) {
    ctx.mode = 'cumulative';
    state.text = piece;
    return piece.slice(acc.length);
  }
  if (piece === acc) return ''; // a repeated snapshot (ambiguous, and harmless to skip)
  ctx.mode = 'incremental';
  state.text = acc + piece;
  return piece;
}

function onEvent(record, out, ctx) {
  const data = record.data.trim();
  if (data === '[DONE]') {
    out.done();
    return;
  }
  const frame = parseJson(data);
  if (!frame || typeof frame !== 'object' || Array.isArray(frame)) return;
  if (typeof frame.status === 'number' && frame.status !== 0) {
    out.error(frame.message || frame.msg || 'ChatGLM error / 智谱清言出错', frame.status);
    return;
  }
  const lastError = frame.last_error;
  if (frame.status === 'intervene' || (lastError && typeof lastError === 'object' && (lastError.code || lastError.msg))) {
    const reason = (lastError && (lastError.intervene_text || lastError.msg)) || 'ChatGLM stopped the reply / 智谱清言中止了回复';
    out.error(reason, (lastError && lastError.code) || frame.status);
    return;
  }
  for (const part of Array.isArray(frame.parts) ? frame.parts : []) {
    if (!part || typeof part !== 'object' || (part.role && part.role !== 'assistant')) continue;
    const partKey = part.logic_id || part.id || '';
    const isFull = part.status === 'finish';
    for (const item of Array.isArray(part.content) ? part.content : []) {
      if (item && item.type === 'image') takeImages(item, out, ctx);
      const field = item && FIELDS[item.type];
      if (!field || typeof item[field] !== 'string') continue; // tool_calls, code, image, quote_result, …
      const piece = newText(ctx, keyState(ctx, `${partKey}:${item.type}`), item[field], isFull);
      if (item.type === 'think') out.reasoning(piece);
      else out.delta(piece);
    }
  }
  if (frame.status === 'finish') out.done();
}

const trouble = makeTrouble({ codes: { 40102: REASONS.login, 40103: REASONS.login } });

export default {
  name: 'chatglm',
  hosts,
  matchRequest: endpointMatcher({
    hosts,
    paths: [/^\/chatglm\/backend-api\/assistant\/stream$/, /^\/chatglm\/backend-api\/v1\/stream$/],
  }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    const messages = body && Array.isArray(body.messages) ? body.messages : [];
    const last = messages[messages.length - 1];
    if (!last) return null;
    if (typeof last.content === 'string') return last.content;
    const items = Array.isArray(last.content) ? last.content : [];
    const text = items.filter((c) => c && c.type === 'text' && typeof c.text === 'string').map((c) => c.text);
    return text.length ? text.join('\n') : null;
  },
  createParser: sseParser({ onEvent, trouble, init: () => ({ keys: new Map(), mode: null, images: new Set() }) }),
  input: {
    selectors: ['.input-box-inner textarea', 'textarea.scroll-display-none', 'textarea[placeholder*="清言"]', 'div.input-wrap textarea'],
    kind: 'textarea',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/chatglm.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 100 * MB,
    maxFiles: 10,
    input: ['input.upload-file-input'],
    chip: ['.file-item'],
    busy: ['.file-item-loading'],
    error: ['.file-item-error'],
  }),
  send: {
    selectors: ['.input-box-inner .enter', '.enter_icon', 'div.enter', 'button[aria-label="发送"]'],
    key: 'Enter',
  },
  trouble,
};
