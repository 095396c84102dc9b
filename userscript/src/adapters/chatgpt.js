// ChatGPT (chatgpt.com): the "v1" delta encoding (JSON-patch ops on `{message, conversation_id, error}`; bare
// `{"v":…}` appends to the last path) and the legacy full-snapshot events. Only assistant messages addressed
// to everyone (`recipient: "all"`) are answer text; `thoughts` content is reasoning; system/user echoes and
// metadata events are ignored. Ends at `finished_successfully` + `end_turn`, `message_stream_complete` or
// `[DONE]`. An image the image tool makes is announced by its asset pointer (`takeImages`) and read from the page.

import { createPatchState } from './lib/patch.js';
import { dig, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { MB, uploadTable } from './lib/upload.js';

const hosts = ['chatgpt.com', 'chat.openai.com'];

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** An assistant message addressed to everyone (not a tool call, not a system/user echo). */
function visibleMessage(root) {
  const message = isObject(root) ? root.message : null;
  if (!isObject(message) || dig(message, 'author', 'role') !== 'assistant') return null;
  if (message.recipient !== undefined && message.recipient !== 'all') return null;
  return message;
}

/** What has been streamed for one message: answer text and reasoning text. */
function streamedFor(ctx, message) {
  const id = message.id || 'current';
  let s = ctx.streamed.get(id);
  if (!s) {
    s = { text: '', thoughts: '' };
    ctx.streamed.set(id, s);
  }
  return s;
}

function fullText(message) {
  const content = message.content || {};
  if (content.content_type === 'text' || content.content_type === 'multimodal_text') {
    return { kind: 'text', text: (Array.isArray(content.parts) ? content.parts : []).filter((p) => typeof p === 'string').join('') };
  }
  if (content.content_type === 'thoughts') {
    const thoughts = Array.isArray(content.thoughts) ? content.thoughts : [];
    return { kind: 'thoughts', text: thoughts.map((t) => (t && typeof t.content === 'string' ? t.content : '')).join('\n') };
  }
  return null;
}

/** Slow path (snapshots, new messages, replaces): diff the message's whole text against what was streamed. */
function syncMessage(out, ctx) {
  const message = visibleMessage(ctx.patch.root);
  if (!message) return;
  const full = fullText(message);
  if (!full) return;
  const streamed = streamedFor(ctx, message);
  const before = streamed[full.kind];
  if (full.text.length > before.length && full.text.startsWith(before)) {
    const piece = full.text.slice(before.length);
    if (full.kind === 'text') out.delta(piece);
    else out.reasoning(piece);
  }
  if (!before.startsWith(full.text)) streamed[full.kind] = full.text;
}

/**
 * Fast path: an append of a string to the last text part (or the last thought's content) of a visible
 * message is streamed as is. Returns false when the op needs the slow path, null when it carries no text.
 */
function streamAppend(out, ctx, leaf) {
  const path = leaf.path;
  if (path.length === 0) return false; // a new root message
  if (path[0] !== 'message' || path[1] !== 'content') return null; // status, end_turn, metadata, …
  const message = visibleMessage(ctx.patch.root);
  if (!message) return null;
  if (leaf.op !== 'append' || typeof leaf.value !== 'string') return false;
  const content = message.content || {};
  const streamed = streamedFor(ctx, message);
  if (path[2] === 'parts' && path.length === 4 && Array.isArray(content.parts) && path[3] === content.parts.length - 1
    && (content.content_type === 'text' || content.content_type === 'multimodal_text')) {
    out.delta(leaf.value);
    streamed.text += leaf.value;
    return true;
  }
  if (path[2] === 'thoughts' && path.length === 5 && path[4] === 'content' && content.content_type === 'thoughts'
    && Array.isArray(content.thoughts) && path[3] === content.thoughts.length - 1) {
    out.reasoning(leaf.value);
    streamed.thoughts += leaf.value;
    return true;
  }
  return false;
}

/**
 * Images a message carries (docs/sites/chatgpt.md "Images"): `multimodal_text` parts of type
 * `image_asset_pointer` (`sediment://…`, `file-service://…`) from the image tool or the assistant. A pointer
 * is no address the hub can open (the page asks /backend-api/files/… for a signed one), so each is reported
 * once as pending: the reply's page is read for it at the end of the turn. The person's own uploads are
 * in the user's message and never reported.
 */
function takeImages(out, ctx) {
  const message = isObject(ctx.patch.root) ? ctx.patch.root.message : null;
  if (!isObject(message) || message.content?.content_type !== 'multimodal_text') return;
  const role = dig(message, 'author', 'role');
  if (role !== 'tool' && role !== 'assistant') return;
  for (const part of Array.isArray(message.content.parts) ? message.content.parts : []) {
    if (!isObject(part) || part.content_type !== 'image_asset_pointer' || typeof part.asset_pointer !== 'string') continue;
    if (ctx.images.has(part.asset_pointer)) continue;
    ctx.images.add(part.asset_pointer);
    out.image({ pending: true, alt: dig(part, 'metadata', 'dalle', 'prompt') || '' });
  }
}

function checkEnd(out, ctx) {
  const root = ctx.patch.root;
  if (isObject(root) && root.error) {
    out.error(typeof root.error === 'string' ? root.error : root.error.message || 'ChatGPT error / ChatGPT 出错', dig(root.error, 'code') || 'error');
    return;
  }
  const message = visibleMessage(root);
  if (message && message.status === 'finished_successfully' && message.end_turn === true) out.done();
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
    syncMessage(out, ctx);
  } else if (!('p' in frame) && isObject(frame.v) && 'message' in frame.v) {
    ctx.patch.root = frame.v; // `{"c":1,"v":{"message":…}}` – a new message without an explicit op
    syncMessage(out, ctx);
  } else if ('v' in frame) {
    let slow = false;
    for (const leaf of ctx.patch.apply(frame)) if (streamAppend(out, ctx, leaf) === false) slow = true;
    if (slow) syncMessage(out, ctx);
  } else {
    return;
  }
  takeImages(out, ctx);
  checkEnd(out, ctx);
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
    init: () => ({ patch: createPatchState({ initialOp: 'append' }), streamed: new Map(), images: new Set() }),
  }),
  input: {
    selectors: ['#prompt-textarea[contenteditable="true"]', 'div.ProseMirror#prompt-textarea', 'textarea#prompt-textarea', 'div[contenteditable="true"].ProseMirror'],
    kind: 'contenteditable',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/chatgpt.md).
  upload: uploadTable({
    how: 'input',
    accept: [],
    maxBytes: 512 * MB,
    maxFiles: 10,
    input: ['input#upload-files', 'input[type="file"][multiple]'],
    chip: ['.composer-attachment', '[data-testid="file-attachment"]'],
    busy: ['.composer-attachment-loading'],
    error: ['.composer-attachment-error'],
  }),
  send: {
    selectors: ['button[data-testid="send-button"]', '#composer-submit-button', 'button[aria-label="Send prompt"]', 'button[aria-label="发送提示"]'],
    key: 'Enter',
  },
  trouble,
};
