// Gemini web (gemini.google.com StreamGenerate): not SSE but `)]}'` + length-prefixed JSON frames. Each
// `["wrb.fr", id, "<payload JSON>"]` entry carries a CUMULATIVE candidate: text at payload[4][0][1][0],
// reasoning at payload[4][0][37][0][0]. The turn ends when the candidate status payload[4][0][8][0] is 2, at
// the `{"44":true}` end payload, or when the body closes on a frame boundary. Entries with a null payload and
// a BardErrorInfo code are errors (1037 usage limit, 1060 IP blocked, …).

import { createLengthPrefixedReader } from './lib/frames.js';
import { createSnapshotDiffer } from './lib/snapshot.js';
import { createOutput, dig, finishAtEof, INCOMPLETE, parseJson } from './lib/stream.js';
import { makeTrouble } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { createUtf8Decoder, toBytes } from './lib/utf8.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['gemini.google.com'];

const ERRORS = {
  1037: 'Gemini usage limit reached / Gemini 已达使用上限',
  1060: 'Gemini blocked this IP address / Gemini 屏蔽了此 IP 地址',
  1013: 'Gemini is temporarily unavailable / Gemini 暂时不可用',
  1096: 'Gemini session token is stale, reload the page / Gemini 会话令牌已过期，请刷新页面',
  1157: 'Gemini session token is stale, reload the page / Gemini 会话令牌已过期，请刷新页面',
};

function errorCode(entry) {
  const info = dig(entry, 5, 2);
  if (Array.isArray(info)) {
    for (const item of info) {
      const code = dig(item, 1, 0);
      if (typeof code === 'number') return code;
    }
  }
  const status = dig(entry, 5, 0);
  return typeof status === 'number' ? status : null;
}

function onEntry(entry, out, ctx) {
  if (!Array.isArray(entry) || entry[0] !== 'wrb.fr') return; // di, af.httprm, e: bookkeeping
  if (typeof entry[2] !== 'string') {
    const code = errorCode(entry);
    if (code !== null) out.error(ERRORS[code] || `Gemini error ${code} / Gemini 出错 ${code}`, code);
    return;
  }
  const payload = parseJson(entry[2]);
  if (!Array.isArray(payload)) return;
  const candidate = dig(payload, 4, 0);
  if (Array.isArray(candidate)) {
    const reasoning = dig(candidate, 37, 0, 0);
    if (typeof reasoning === 'string') out.reasoning(ctx.reasoning.next(reasoning));
    const text = dig(candidate, 1, 0);
    if (typeof text === 'string') out.delta(ctx.answer.next(text));
    if (dig(candidate, 8, 0) === 2) out.done();
  }
  const tail = payload[2];
  if (tail && typeof tail === 'object' && !Array.isArray(tail) && tail['44'] === true) out.done();
}

function createParser() {
  const decoder = createUtf8Decoder();
  const reader = createLengthPrefixedReader();
  const out = createOutput();
  const ctx = { answer: createSnapshotDiffer(), reasoning: createSnapshotDiffer() };
  let sample = '';
  let broken = false;
  const handle = (frames) => {
    for (const frame of frames) {
      for (const entry of Array.isArray(frame) ? frame : []) {
        if (out.finished) return;
        onEntry(entry, out, ctx);
      }
    }
  };
  const feed = (text, final) => {
    if (sample.length < 4096) sample += text.slice(0, 4096 - sample.length);
    try {
      handle(reader.push(text));
      if (final) handle(reader.end());
    } catch {
      broken = true;
    }
  };
  return {
    push(bytes) {
      if (!broken) feed(decoder.decode(toBytes(bytes)), false);
      return out.take();
    },
    end() {
      if (!broken) feed(decoder.flush(), true);
      if (broken && !out.finished) out.error(INCOMPLETE, 'incomplete');
      finishAtEof(out, { eofIsDone: true, trouble, sample });
      return out.take();
    },
  };
}

const trouble = makeTrouble({
  codes: ERRORS,
  // `[13,null,[["type.googleapis.com/…BardErrorInfo",[1037]]]]`
  codePatterns: [/\[\s*\d+\s*,\s*null\s*,\s*\[\s*\[\s*"[^"]*"\s*,\s*\[\s*(\d+)\s*\]/],
});

export default {
  name: 'gemini',
  hosts,
  matchRequest: endpointMatcher({
    hosts,
    paths: [/^(\/u\/\d+)?\/_\/BardChatUi\/data\/assistant\.lamda\.BardFrontendService\/StreamGenerate$/],
  }),
  promptFromRequest(bodyText) {
    if (typeof bodyText !== 'string') return null;
    const freq = new URLSearchParams(bodyText).get('f.req');
    const outer = parseJson(freq);
    const inner = parseJson(dig(outer, 1));
    const prompt = dig(inner, 0, 0);
    return typeof prompt === 'string' ? prompt : null;
  },
  createParser,
  input: {
    selectors: ['rich-textarea .ql-editor[contenteditable="true"]', 'div.ql-editor[contenteditable="true"][role="textbox"]', 'div[contenteditable="true"][aria-label*="prompt"]'],
    kind: 'contenteditable',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/gemini.md).
  upload: uploadTable({
    how: ['drop', 'paste'],
    accept: [...IMAGES, ...DOCS],
    maxBytes: 100 * MB,
    maxFiles: 10,
    target: ['div[xapfileselectordropzone]'],
    chip: ['.xap-filed-upload-preview', '.file-preview-chip'],
    busy: ['.file-preview-chip-loading'],
    error: ['.file-upload-error'],
  }),
  send: {
    selectors: ['button.send-button', 'button[aria-label="Send message"]', 'button[aria-label="发送"]', 'button[mattooltip="Submit"]'],
    key: 'Enter',
  },
  trouble,
};
