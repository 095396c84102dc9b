// Tencent Yuanbao: `data:` JSON frames (`type:"text"` msg = answer; `think`/`reasoner` = reasoning) mixed
// with `event: speech_type` labels and bare markers (`[MSGINDEX:n]`, `[TRACEID:…]`); `data: [DONE]` ends.

import { parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['yuanbao.tencent.com'];

/** Inline UI markup the page strips before display, e.g. `[](@replace=1)`. */
const MARKUP = /\[\]\(@[A-Za-z_]+=[^)\s]*\)/g;

function onEvent(record, out) {
  if (record.event === 'speech_type') return; // bare labels: status, text, reasoner, search_with_text
  const data = record.data.trim();
  if (data === '[DONE]') {
    out.done();
    return;
  }
  if (!data.startsWith('{')) return; // [plugin: ], [MSGINDEX:10], [TRACEID:…]
  const frame = parseJson(data);
  if (!frame || typeof frame !== 'object') return;
  switch (frame.type) {
    case 'text':
      if (typeof frame.msg === 'string') out.delta(frame.msg.replace(MARKUP, ''));
      return;
    case 'think':
    case 'reasoner':
      out.reasoning(typeof frame.content === 'string' ? frame.content : frame.msg);
      return;
    case 'error':
      out.error(frame.msg || 'Yuanbao error / 元宝出错', frame.code || 'error');
      return;
    default:
      // tips, meta, step, progress, replace, searchGuid, continue_step: not answer text
      if (frame.error && frame.error.code) out.error(frame.error.message || 'Yuanbao error / 元宝出错', frame.error.code);
  }
}

const trouble = makeTrouble({
  codes: {
    23000: REASONS.login,
    21007: 'Yuanbao could not fetch the answer / 元宝回答拉取失败',
  },
});

export default {
  name: 'yuanbao',
  hosts,
  matchRequest: endpointMatcher({ hosts, paths: [/^\/api\/chat\/[A-Za-z0-9_-]+$/] }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    if (!body) return null;
    if (typeof body.prompt === 'string') return body.prompt;
    return typeof body.displayPrompt === 'string' ? body.displayPrompt : null;
  },
  createParser: sseParser({ onEvent, trouble }),
  input: {
    selectors: ['.chat-input-editor .ql-editor[contenteditable="true"]', 'div.ql-editor[contenteditable="true"]', '#search-bar [contenteditable="true"]'],
    kind: 'contenteditable',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/yuanbao.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 100 * MB,
    maxFiles: 50,
    input: ['input.hyc-upload-input'],
    chip: ['.hyc-file-item'],
    busy: ['.hyc-file-item__loading'],
    error: ['.hyc-file-item--fail'],
  }),
  send: {
    selectors: ['a#yuanbao-send-btn', '#yuanbao-send-btn', 'a[class*="send-btn"]', 'button[class*="send-btn"]'],
    key: 'Enter',
  },
  trouble,
};
