// Kimi: legacy kimi.moonshot.cn SSE (`cmpl` text, `k1` reasoning, `all_done`) and the current www.kimi.com
// Connect stream (binary frames of `{op, mask, block|message}` patches, `done`, and an end trailer). The
// format is recognised from the first byte: Connect frames start with a flags byte (0x00–0x03), SSE with text.

import { createConnectReader } from './lib/connect.js';
import { createSnapshotDiffer } from './lib/snapshot.js';
import { createOutput, dig, finishAtEof, INCOMPLETE, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { toBytes } from './lib/utf8.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['www.kimi.com', 'kimi.com', 'kimi.moonshot.cn'];

const trouble = makeTrouble({ codes: { 40100: REASONS.login, 40102: REASONS.login, 42900: REASONS.rateLimit } });

function onLegacyEvent(record, out, ctx) {
  const frame = parseJson(record.data);
  if (!frame || typeof frame !== 'object') return;
  switch (frame.event) {
    case 'cmpl':
      out.delta(frame.text);
      return;
    case 'k1':
      out.reasoning(frame.text);
      return;
    case 'all_done':
      out.done();
      return;
    case 'done':
      ctx.sawDone = true;
      return;
    case 'error': {
      const err = frame.error || {};
      out.error(err.message || err.msg || 'Kimi error / Kimi 出错', err.error_type || err.code || 'error');
      return;
    }
    default:
      // req (echo of the prompt), resp, debug, search_plus, rename, length, ping: not answer text
  }
}

const createLegacyParser = sseParser({
  onEvent: onLegacyEvent,
  trouble,
  init: () => ({ sawDone: false }),
  atEof: (out, ctx) => {
    if (ctx.sawDone) out.done();
  },
});

/** Handle one Connect JSON frame of the www.kimi.com chat stream. */
function onConnectFrame(frame, out, ctx) {
  if (frame.error) {
    out.error(frame.error.message || 'Kimi error / Kimi 出错', frame.error.code || 'error');
    return;
  }
  if (frame.done !== undefined) {
    out.done();
    return;
  }
  const mask = typeof frame.mask === 'string' ? frame.mask : '';
  if (!frame.op || !mask) return; // heartbeat, chat metadata
  const message = frame.message;
  if (mask === 'message' || mask.startsWith('message.')) {
    // The echo of the person's message (role user, text inside `message.blocks`) is never answer text.
    if (dig(message, 'role') === 'user') return;
    const status = dig(message, 'status');
    if (status === 'MESSAGE_STATUS_COMPLETED') out.done();
    else if (status === 'MESSAGE_STATUS_FAILED') out.error('Kimi could not answer / Kimi 回答失败', status);
    return;
  }
  if (!frame.block) return;
  const kind = mask.startsWith('block.think') ? 'think' : mask.startsWith('block.text') ? 'text' : null;
  if (!kind) return; // tool, search and other blocks
  const piece = dig(frame.block, kind, 'content');
  if (typeof piece !== 'string') return;
  const key = `${frame.block.id}:${kind}`;
  let differ = ctx.blocks.get(key);
  if (!differ) {
    differ = createSnapshotDiffer();
    ctx.blocks.set(key, differ);
  }
  const emit = kind === 'think' ? (t) => out.reasoning(t) : (t) => out.delta(t);
  if (frame.op === 'append') emit(differ.append(piece));
  else emit(differ.next(piece));
}

function createConnectParser() {
  const reader = createConnectReader();
  const out = createOutput();
  const ctx = { blocks: new Map() };
  const handle = (frames) => {
    for (const f of frames) {
      if (out.finished) break;
      if (f.compressed) out.error('compressed Connect frame not supported / 不支持压缩的 Connect 帧', 'compressed');
      else if (f.end) {
        if (f.json && f.json.error) onConnectFrame({ error: f.json.error }, out, ctx);
        else out.done();
      } else {
        try {
          onConnectFrame(f.json, out, ctx);
        } catch {
          // a malformed frame is skipped
        }
      }
    }
  };
  return {
    push(bytes) {
      handle(reader.push(bytes));
      return out.take();
    },
    end() {
      const { frames, leftover } = reader.end();
      handle(frames);
      if (!out.finished && leftover > 0) out.error(INCOMPLETE, 'incomplete');
      finishAtEof(out, { eofIsDone: false, trouble: null, sample: '' });
      return out.take();
    },
  };
}

/** Pick the legacy SSE or the Connect parser from the first byte of the body. */
function createParser() {
  let inner = null;
  return {
    push(chunk) {
      const bytes = toBytes(chunk);
      if (!inner) {
        if (bytes.length === 0) return [];
        inner = bytes[0] <= 0x03 ? createConnectParser() : createLegacyParser();
      }
      return inner.push(bytes);
    },
    end() {
      if (!inner) inner = createLegacyParser();
      return inner.end();
    },
  };
}

export default {
  name: 'kimi',
  hosts,
  matchRequest: endpointMatcher({
    hosts,
    paths: [/^\/api\/chat\/[^/]+\/completion\/stream$/, /^\/apiv2\/kimi\.gateway\.chat\.v1\.ChatService\/Chat$/],
  }),
  promptFromRequest(bodyText) {
    if (typeof bodyText !== 'string') return null;
    const start = bodyText.indexOf('{');
    const end = bodyText.lastIndexOf('}');
    if (start < 0 || end < start) return null;
    const body = parseJson(bodyText.slice(start, end + 1));
    if (!body) return null;
    const legacy = dig(body, 'messages', -1, 'content');
    if (typeof legacy === 'string') return legacy;
    const blocks = dig(body, 'message', 'blocks');
    if (Array.isArray(blocks)) {
      const text = blocks.map((b) => dig(b, 'text', 'content')).filter((t) => typeof t === 'string');
      if (text.length) return text.join('\n');
    }
    return null;
  },
  createParser,
  input: {
    selectors: [
      '.chat-input-editor[contenteditable="true"]',
      'div[data-lexical-editor="true"][contenteditable="true"]',
      '#msh-chatinput-editor[contenteditable="true"]',
    ],
    kind: 'contenteditable',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/kimi.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 100 * MB,
    maxFiles: 50,
    input: ['input.hidden-input'],
    chip: ['.attachment-item'],
    busy: ['.attachment-item-loading'],
    error: ['.attachment-item-error'],
  }),
  send: {
    selectors: ['.send-button-container:not(.disabled) .send-button', '.send-button', '#send-button', 'button[data-testid="msh-chatinput-send-button"]'],
    key: 'Enter',
  },
  trouble,
};
