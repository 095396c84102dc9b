// Gemini web (gemini.google.com StreamGenerate): not SSE but `)]}'` + length-prefixed JSON frames. Each
// `["wrb.fr", id, "<payload JSON>"]` entry carries a CUMULATIVE candidate: text at payload[4][0][1][0],
// reasoning at payload[4][0][37][0][0]. The turn ends when the candidate status payload[4][0][8][0] is 2, at
// the `{"44":true}` end payload, or when the body closes on a frame boundary. Entries with a null payload and
// a BardErrorInfo code are errors (1037 usage limit, 1060 IP blocked, …). Images of the answer are in the
// candidate's [12] (`takeImages`); the text's placeholder for a generated image is left out.

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

/** The placeholder Gemini writes in the text where a generated image goes (the image itself is at [12][7]). */
const PLACEHOLDER = /https?:\/\/googleusercontent\.com\/image_generation_content\/\d+/g;
const PLACEHOLDER_HEADS = ['http://googleusercontent.com/image_generation_content/', 'https://googleusercontent.com/image_generation_content/'];

/**
 * The text without image placeholders (the blank lines they leave folded to one). Until the candidate is final, a tail that may be the start of one
 * (`…\nhttp://google`) is held back, so a placeholder is never half streamed.
 */
function withoutPlaceholders(text, final) {
  const t = text.replace(PLACEHOLDER, '').replace(/\n{3,}/g, '\n\n');
  if (final) return t;
  for (let k = Math.min(t.length, PLACEHOLDER_HEADS[1].length + 12); k > 0; k -= 1) {
    const tail = t.slice(t.length - k);
    if (PLACEHOLDER_HEADS.some((h) => h.startsWith(tail) || (tail.startsWith(h) && /^\d*$/.test(tail.slice(h.length))))) return t.slice(0, t.length - k);
  }
  return t;
}

/**
 * The candidate's images (docs/sites/gemini.md "Images"): generated ones at [12][7][0][k] (address at
 * [0][3][3], description at [3][5][0]) and images from the web at [12][1][k] (address at [0][0][0], alt at
 * [0][4]); each reported once although every cumulative frame repeats them.
 */
function takeImages(candidate, out, ctx) {
  const found = [];
  const generated = dig(candidate, 12, 7, 0);
  for (const [i, item] of (Array.isArray(generated) ? generated : []).entries()) {
    const alt = dig(item, 3, 5, 0);
    found.push({ url: dig(item, 0, 3, 3), alt: typeof alt === 'string' ? alt : `Generated image ${i + 1}` });
  }
  const web = dig(candidate, 12, 1);
  for (const item of Array.isArray(web) ? web : []) {
    const alt = dig(item, 0, 4);
    found.push({ url: dig(item, 0, 0, 0), alt: typeof alt === 'string' ? alt : '' });
  }
  for (const img of found) {
    if (typeof img.url !== 'string' || !/^https?:\/\//i.test(img.url) || ctx.images.has(img.url)) continue;
    ctx.images.add(img.url);
    out.image(img);
  }
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
    const final = dig(candidate, 8, 0) === 2;
    const text = dig(candidate, 1, 0);
    if (typeof text === 'string') {
      ctx.raw = text;
      out.delta(ctx.answer.next(withoutPlaceholders(text, final)));
    }
    takeImages(candidate, out, ctx);
    if (final) out.done();
  }
  const tail = payload[2];
  if (tail && typeof tail === 'object' && !Array.isArray(tail) && tail['44'] === true) out.done();
}

function createParser() {
  const decoder = createUtf8Decoder();
  const reader = createLengthPrefixedReader();
  const out = createOutput();
  const ctx = { answer: createSnapshotDiffer(), reasoning: createSnapshotDiffer(), images: new Set(), raw: null };
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
      // The body closed: a tail held back as a possible placeholder was text after all.
      if (!out.finished && typeof ctx.raw === 'string') out.delta(ctx.answer.next(withoutPlaceholders(ctx.raw, true)));
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
