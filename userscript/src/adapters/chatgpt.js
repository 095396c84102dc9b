// ChatGPT (chatgpt.com): the "v1" delta encoding (JSON-patch ops on `{message, conversation_id, error}`; bare
// `{"v":…}` appends to the last path) and the legacy full-snapshot events. Only assistant messages addressed
// to everyone (`recipient: "all"`) are answer text; `thoughts` content is reasoning; system/user echoes and
// metadata events are ignored. Ends at `finished_successfully` + `end_turn`, `message_stream_complete` or
// `[DONE]`.

import { createPatchState } from './lib/patch.js';
import { createSnapshotDiffer } from './lib/snapshot.js';
import { dig, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';

const hosts = ['chatgpt.com', 'chat.openai.com'];

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Per-message differs, so a new assistant message (after a tool call) continues the answer. */
function differFor(ctx, id, kind) {
  const key = `${id}:${kind}`;
  let d = ctx.differs.get(key);
  if (!d) {
    d = createSnapshotDiffer();
    ctx.differs.set(key, d);
  }
  return d;
}

function observe(out, ctx) {
  const root = ctx.patch.root;
  if (!isObject(root)) return;
  if (root.error) {
    out.error(typeof root.error === 'string' ? root.error : root.error.message || 'ChatGPT error / ChatGPT 出错', dig(root.error, 'code') || 'error');
    return;
  }
  const message = root.message;
  if (!isObject(message) || dig(message, 'author', 'role') !== 'assistant') return;
  if (message.recipient !== undefined && message.recipient !== 'all') return; // tool calls
  const id = message.id || 'current';
  const content = message.content || {};
  if (content.content_type === 'text' || content.content_type === 'multimodal_text') {
    const text = (Array.isArray(content.parts) ? content.parts : []).filter((p) => typeof p === 'string').join('');
    out.delta(differFor(ctx, id, 'text').next(text));
  } else if (content.content_type === 'thoughts') {
    const thoughts = Array.isArray(content.thoughts) ? content.thoughts : [];
    const text = thoughts.map((t) => (t && typeof t.content === 'string' ? t.content : '')).join('\n');
    out.reasoning(differFor(ctx, id, 'thoughts').next(text));
  }
  if (message.status === 'finished_successfully' && message.end_turn === true) out.done();
}

function onEvent(record, out, ctx) {
  if (record.event === 'delta_encoding') return;
  const data = record.data.trim();
  if (data === '[DONE]') {
    out.done();
    return;
  }
  const frame = parseJson(data);
  if (!isObject(frame)) return;
  if (typeof frame.type === 'string' && !('v' in frame) && !('message' in frame)) {
    if (frame.type === 'message_stream_complete') out.done();
    else if (frame.type === 'error' || frame.type === 'moderation_error') {
      out.error(frame.message || frame.error || 'ChatGPT error / ChatGPT 出错', frame.code || frame.type);
    }
    return; // resume_conversation_token, input_message, message_marker, title_generation, metadata
  }
  if (!('v' in frame) && ('message' in frame || 'error' in frame)) {
    ctx.patch.root = frame; // legacy: every event is a full snapshot
  } else if (!('p' in frame) && isObject(frame.v) && 'message' in frame.v) {
    ctx.patch.root = frame.v; // `{"c":1,"v":{"message":…}}` – a new message without an explicit op
  } else if ('v' in frame) {
    ctx.patch.apply(frame);
  } else {
    return;
  }
  observe(out, ctx);
}

const trouble = makeTrouble();

export default {
  name: 'chatgpt',
  hosts,
  matchRequest: endpointMatcher({ hosts, paths: [/^\/backend-(api|anon)\/(f\/)?conversation$/] }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    const messages = body && Array.isArray(body.messages) ? body.messages : [];
    for (let i = messages.length - 1; i >= 0; i -= 1) {
      const parts = dig(messages[i], 'content', 'parts');
      if (Array.isArray(parts)) {
        const text = parts.filter((p) => typeof p === 'string');
        if (text.length) return text.join('\n');
      }
    }
    return null;
  },
  createParser: sseParser({
    onEvent,
    trouble,
    init: () => ({ patch: createPatchState({ initialOp: 'append' }), differs: new Map() }),
  }),
  input: {
    selectors: ['#prompt-textarea[contenteditable="true"]', 'div.ProseMirror#prompt-textarea', 'textarea#prompt-textarea', 'div[contenteditable="true"].ProseMirror'],
    kind: 'contenteditable',
  },
  send: {
    selectors: ['button[data-testid="send-button"]', '#composer-submit-button', 'button[aria-label="Send prompt"]', 'button[aria-label="发送提示"]'],
    key: 'Enter',
  },
  trouble,
};
