// 讯飞星火 / iFlytek Spark (xinghuo.xfyun.cn): `POST /iflygpt-chat/u/chat_message/chat` with a multipart form
// (`text` = the prompt), answered by SSE `data:` lines without `event:`: each line is one base64 piece of the
// answer's UTF-8; bare markers are control: `<end>` ends the answer (a `…<sid>` line follows), `[error]` then
// a JSON `{key, descr}` then `<end>` is a site error, `[geeError]` asks for a captcha, `[belongerr]` means the
// chat is not the person's. Pieces that decode to `<deep_x1>…` are X1 deep-think reasoning (inferred), and
// JSON pieces carrying `allTool` / `multi_image_url` are tool or image metadata, not text. docs/sites/xinghuo.md.

import { parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['xinghuo.xfyun.cn'];
const THINK_MARK = '<deep_x1>';
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Bytes of one base64 piece (missing padding tolerated, as the site's own decoder does). */
function base64Bytes(text) {
  const padded = text + '='.repeat((4 - (text.length % 4)) % 4);
  const bin = atob(padded);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i += 1) out[i] = bin.charCodeAt(i);
  return out;
}

function siteError(out, collected) {
  const info = parseJson(collected.replace(/^\[error\]/, '')) || {};
  const reason = info.descr || info.desc || info.message || 'Spark could not answer / 讯飞星火回答失败';
  out.error(reason, info.key !== undefined ? info.key : 'error');
}

function onEvent(record, out, ctx) {
  const data = record.data.trim();
  if (data === '') return;
  if (ctx.error !== null) {
    // after `[error]` the site sends the error JSON (possibly in several lines) and `<end>`
    if (data === '<end>') siteError(out, ctx.error);
    else ctx.error += data;
    return;
  }
  if (data === '<end>') {
    out.done();
    return;
  }
  if (data === '[error]') {
    ctx.error = '';
    return;
  }
  if (data === '[geeError]') {
    out.error(REASONS.captcha, 'geeError');
    return;
  }
  if (data === '[belongerr]') {
    out.error('this chat is not in your Spark account, open a new one / 该对话不属于当前账号，请新建对话', 'belongerr');
    return;
  }
  if (/^<[^>]*>$/.test(data) || data.endsWith('<sid>')) return; // `<kx>`, the `…<sid>` line: control
  if (!BASE64.test(data)) return; // not a base64 piece: unknown control line
  let text;
  try {
    text = ctx.decoder.decode(base64Bytes(data), { stream: true });
  } catch {
    // base64-looking but not UTF-8 (another format's bare word such as `text` or `true`): not answer text
    ctx.decoder = new TextDecoder('utf-8', { fatal: true });
    return;
  }
  if (text.startsWith(THINK_MARK)) {
    out.reasoning(text.slice(THINK_MARK.length));
    return;
  }
  if (/^\s*[{[]/.test(text) && /"(allTool|multi_image_url)"/.test(text)) return; // tool / image metadata
  out.delta(text);
}

const trouble = makeTrouble({ codes: {} });

/** The `text` field of a form body: multipart (as sent), url-encoded (as the page hooks report FormData) or JSON. */
function formField(bodyText, name) {
  if (typeof bodyText !== 'string' || bodyText === '') return null;
  const trimmed = bodyText.trimStart();
  if (trimmed.startsWith('--')) {
    const boundary = trimmed.slice(0, trimmed.search(/\r?\n/));
    if (boundary.length < 3) return null;
    for (const part of trimmed.split(boundary)) {
      const head = part.search(/\r?\n\r?\n/);
      if (head < 0) continue;
      const headers = part.slice(0, head);
      if (!new RegExp(`name="${name}"(;|\\s|$)`, 'i').test(headers)) continue;
      const value = part.slice(head).replace(/^\r?\n\r?\n/, '').replace(/\r?\n$/, '');
      return value.replace(/\r\n/g, '\n'); // multipart encoding turns every line break of a value into CRLF

    }
    return null;
  }
  if (trimmed.startsWith('{')) {
    const body = parseJson(trimmed);
    return body && typeof body[name] === 'string' ? body[name] : null;
  }
  if (!bodyText.includes('=')) return null;
  const value = new URLSearchParams(bodyText).get(name);
  return typeof value === 'string' ? value : null;
}

export default {
  name: 'xinghuo',
  hosts,
  matchRequest: endpointMatcher({
    hosts,
    paths: [
      /^\/iflygpt-chat\/u\/chat_message\/chat$/,
      /^\/iflygpt\/u\/chat_message\/chat$/,
      /^\/iflygpt-longcontext\/u\/chat_message\/web\/chat$/,
    ],
  }),
  promptFromRequest(bodyText) {
    return formField(bodyText, 'text');
  },
  createParser: sseParser({
    onEvent,
    trouble,
    init: () => ({ decoder: new TextDecoder('utf-8', { fatal: true }), error: null }),
    atEof: (out, ctx) => {
      if (ctx.error !== null) siteError(out, ctx.error);
    },
  }),
  input: {
    selectors: ['div[class*="chat_textAreaWrapper"] textarea', 'textarea[placeholder*="输入您要提问"]', 'div[class*="chat_inputArea"] textarea'],
    kind: 'textarea',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/xinghuo.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 20 * MB,
    maxFiles: 10,
    input: ['input.upload-input'],
    chip: ['.file-card'],
    busy: ['.file-card-uploading'],
    error: ['.file-card-failed'],
  }),
  send: {
    selectors: ['div[class*="chat_send__"]', 'div[class*="chat_inputArea"] div[class*="send"]'],
    key: 'Enter',
  },
  trouble,
};
