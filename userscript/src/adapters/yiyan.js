// 文心一言 / ERNIE Bot (yiyan.baidu.com, since 2025 also ernie.baidu.com): `POST /eb/chat/conversation/v2` with a
// JSON body (`text` = the prompt), answered by SSE records `event:<name>` + `data:{code, msg, data}`. `major` is
// session metadata, `message` carries the answer: `data.content` is the new piece while `data.is_end` is 0; the
// frame with `is_end: 1` ends the turn and holds the whole answer in `data.tokens_all` (only its missing tail
// is emitted). `thought` frames are reasoning (their own `is_end` ends the thinking only). A top-level
// `code` other than 0 is a site error. docs/sites/yiyan.md.

import { parseJson, sseParser } from './lib/stream.js';
import { makeTrouble } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['yiyan.baidu.com', 'ernie.baidu.com'];

function onEvent(record, out, ctx) {
  const frame = parseJson(record.data);
  if (!frame || typeof frame !== 'object' || Array.isArray(frame)) return;
  if (frame.code !== undefined && Number(frame.code) !== 0) {
    out.error(frame.msg || frame.message || 'ERNIE Bot error / 文心一言出错', frame.code);
    return;
  }
  const data = frame.data;
  if (!data || typeof data !== 'object') return;
  if (record.event === 'thought') {
    if (typeof data.content === 'string') out.reasoning(data.content);
    return;
  }
  if (record.event !== 'message') return; // major, step, state, ping: not answer text
  if (data.isBan === true) {
    out.error('ERNIE Bot declined to answer / 文心一言拒绝回答', 'isBan');
    return;
  }
  if (Number(data.is_end) === 1) {
    const all = typeof data.tokens_all === 'string' ? data.tokens_all : null;
    if (all !== null && all.startsWith(ctx.text)) out.delta(all.slice(ctx.text.length));
    else if (all === null && typeof data.content === 'string') out.delta(data.content);
    out.done();
    return;
  }
  if (typeof data.content === 'string') {
    ctx.text += data.content;
    out.delta(data.content);
  }
}

const trouble = makeTrouble({ codes: {} });

export default {
  name: 'yiyan',
  hosts,
  matchRequest: endpointMatcher({ hosts, paths: [/^\/eb\/chat\/conversation(\/v2)?$/] }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    return body && typeof body === 'object' && typeof body.text === 'string' ? body.text : null;
  },
  createParser: sseParser({ onEvent, trouble, init: () => ({ text: '' }) }),
  input: {
    selectors: ['#dialogue-input', 'textarea[placeholder*="输入问题"]', 'div[contenteditable="true"][class*="editor"]'],
    kind: 'textarea',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/yiyan.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 50 * MB,
    maxFiles: 10,
    input: ['input.dialogue-upload-input'],
    chip: ['.upload-file-item'],
    busy: ['.upload-file-item-loading'],
    error: ['.upload-file-item-error'],
  }),
  send: {
    selectors: ['#sendBtn', 'span[class*="sendInner"]', 'div[class*="sendBtn"]', 'button[aria-label="发送"]'],
    key: 'Enter',
  },
  trouble,
};
