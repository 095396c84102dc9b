// Doubao (www.doubao.com): the current `/chat/completion` SSE (STREAM_MSG_NOTIFY, STREAM_CHUNK patch_object 1,
// CHUNK_DELTA; FULL_MSG_NOTIFY is the echo of the person's message; SSE_REPLY_END ends) and the legacy
// `/samantha/chat/completion` stream of double-encoded JSON (`event_data` is a JSON string whose
// `message.content` is another JSON string).
//
// Sources disagree on whether the body text is in patch_object 1 or only in its `tts_content` mirror
// (patch_object 111), so both are collected and the longer one that extends the other is streamed — never both
// added together. The final `brief` (end_type 1) completes the text when it extends what was streamed.

import { dig, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['www.doubao.com', 'doubao.com'];
const TEXT_BLOCK = 10000;
const THINKING_BLOCK = 10040;
const CREATION_BLOCK = 2074;

/**
 * A generated image of a creation block (`creation_block.creations[].image`): the original's address
 * (`image_ori_raw`, else `image_ori`), else the preview's; null while it is still being made.
 */
function creationImage(creation) {
  const image = creation && typeof creation === 'object' ? creation.image : null;
  if (!image || typeof image !== 'object') return null;
  for (const key of ['image_ori_raw', 'image_ori', 'image_preview', 'image_thumb']) {
    const v = image[key];
    const url = typeof v === 'string' ? v : v && typeof v === 'object' ? v.url : null;
    if (typeof url === 'string' && /^https?:\/\//i.test(url)) return url;
  }
  return null;
}

/** The images of a creation block, each once (a signed address repeats with a new query). */
function takeCreations(block, ctx) {
  const creations = dig(block, 'content', 'creation_block', 'creations');
  for (const creation of Array.isArray(creations) ? creations : []) {
    const url = creationImage(creation);
    if (!url || ctx.imageKeys.has(url.split('?')[0])) continue;
    ctx.imageKeys.add(url.split('?')[0]);
    ctx.images.push({ url, alt: typeof creation.image?.description === 'string' ? creation.image.description : '' });
  }
}

function init() {
  return {
    primary: '', // STREAM_MSG_NOTIFY + patch_object 1 + CHUNK_DELTA
    mirror: '', // tts_content (patch_object 111) + CHUNK_DELTA
    mirrorExtendsAt: -1, // primary length at which the mirror was last checked to extend it
    mirrorExtends: false,
    source: 'primary', // what has been streamed so far
    emitted: 0, // characters of `source` already streamed
    reasoning: '',
    reasoningEmitted: 0,
    images: [], // generated images (creation blocks) not yet reported
    imageKeys: new Set(), // their addresses without the query
  };
}

/** Collect text and thinking from a list of content blocks into the turn state. */
function takeBlocks(blocks, ctx) {
  if (!Array.isArray(blocks)) return;
  for (const block of blocks) {
    if (!block || typeof block !== 'object') continue;
    if (block.block_type === TEXT_BLOCK || (block.block_type === undefined && dig(block, 'content', 'text_block'))) {
      const text = dig(block, 'content', 'text_block', 'text');
      if (typeof text === 'string') ctx.primary += text;
    } else if (block.block_type === CREATION_BLOCK || dig(block, 'content', 'creation_block')) {
      takeCreations(block, ctx);
    } else if (block.block_type === THINKING_BLOCK) {
      const tb = dig(block, 'content', 'thinking_block') || {};
      const text = typeof tb.text === 'string' ? tb.text : tb.content;
      if (typeof text === 'string') ctx.reasoning += text;
    }
  }
}

/**
 * Stream whatever is new. The text source is the primary one unless the tts mirror is longer and extends it
 * (the tts-only shape). Both only ever grow, so a prefix check is needed only when the primary text changed
 * or the source switches; otherwise the new text is a slice, keeping long replies linear.
 */
function flush(out, ctx) {
  for (const img of ctx.images.splice(0)) out.image(img);
  if (ctx.reasoning.length > ctx.reasoningEmitted) {
    out.reasoning(ctx.reasoning.slice(ctx.reasoningEmitted));
    ctx.reasoningEmitted = ctx.reasoning.length;
  }
  let source = 'primary';
  if (ctx.mirror.length > ctx.primary.length) {
    if (ctx.mirrorExtendsAt !== ctx.primary.length) {
      ctx.mirrorExtends = ctx.mirror.startsWith(ctx.primary);
      ctx.mirrorExtendsAt = ctx.primary.length;
    }
    if (ctx.mirrorExtends) source = 'mirror';
  }
  const text = ctx[source];
  if (text.length <= ctx.emitted) return;
  if (source !== ctx.source) {
    if (!text.startsWith(ctx[ctx.source].slice(0, ctx.emitted))) return; // would contradict what was streamed
    ctx.source = source;
  }
  out.delta(text.slice(ctx.emitted));
  ctx.emitted = text.length;
}

/** The final `brief` completes the reply when it extends what was streamed. */
function finishWithBrief(out, ctx, brief) {
  if (typeof brief !== 'string' || brief.length <= ctx.emitted) return;
  if (brief.startsWith(ctx[ctx.source].slice(0, ctx.emitted))) {
    out.delta(brief.slice(ctx.emitted));
    ctx.emitted = brief.length;
  }
}

function onCurrent(record, out, ctx) {
  const frame = parseJson(record.data);
  if (!frame || typeof frame !== 'object') return;
  switch (record.event) {
    case 'STREAM_MSG_NOTIFY':
      takeBlocks(dig(frame, 'content', 'content_block'), ctx);
      if (typeof dig(frame, 'content', 'tts_content') === 'string') ctx.mirror += frame.content.tts_content;
      break;
    case 'STREAM_CHUNK':
      for (const op of Array.isArray(frame.patch_op) ? frame.patch_op : []) {
        if (!op || op.patch_type === 2) continue; // deletes
        if (op.patch_object === 1) takeBlocks(dig(op, 'patch_value', 'content_block'), ctx);
        else if (op.patch_object === 111 && typeof dig(op, 'patch_value', 'tts_content') === 'string') {
          ctx.mirror += op.patch_value.tts_content;
        }
      }
      break;
    case 'CHUNK_DELTA':
      if (typeof frame.text === 'string') {
        ctx.primary += frame.text;
        ctx.mirror += frame.text;
      }
      break;
    case 'SSE_REPLY_END':
      if (frame.end_type === 1) {
        const brief = dig(frame, 'msg_finish_attr', 'brief');
        flush(out, ctx);
        finishWithBrief(out, ctx, brief);
        out.done();
      } else if (frame.end_type === 3) {
        flush(out, ctx);
        out.done();
      }
      return;
    case 'STREAM_ERROR':
      out.error(frame.error_msg || 'Doubao error / 豆包出错', frame.error_code || 'error');
      return;
    default:
      return; // SSE_HEARTBEAT, SSE_ACK, FULL_MSG_NOTIFY (echo of the person's message)
  }
  flush(out, ctx);
}

function onSamantha(frame, out) {
  if (typeof frame.code === 'number' && frame.code !== 0) {
    out.error(frame.message || frame.msg || 'Doubao error / 豆包出错', frame.code);
    return;
  }
  if (frame.event_type === 2003) {
    out.done();
    return;
  }
  if (frame.event_type === 2005) {
    const ed = parseJson(frame.event_data) || {};
    out.error(ed.message || ed.error_msg || 'Doubao error / 豆包出错', ed.code || ed.error_code || 2005);
    return;
  }
  if (frame.event_type !== 2001) return; // 2002 conversation created, 2010 intent
  const ed = parseJson(frame.event_data);
  if (!ed || !ed.message) return;
  const type = ed.message.content_type;
  if (type === 2001 || type === 2008) {
    const content = parseJson(ed.message.content);
    if (content && typeof content.text === 'string') out.delta(content.text);
    if (ed.is_finish === true) out.done();
  }
  // content_type 2002: follow-up suggestions
}

function onEvent(record, out, ctx) {
  if (record.event !== 'message') {
    onCurrent(record, out, ctx);
    return;
  }
  const frame = parseJson(record.data);
  if (frame && typeof frame === 'object' && ('event_type' in frame || 'code' in frame)) onSamantha(frame, out);
}

const trouble = makeTrouble({
  codes: {
    710022004: 'Doubao rate limit, too many requests / 豆包限流，请求过于频繁',
    710012002: REASONS.login,
  },
});

export default {
  name: 'doubao',
  hosts,
  matchRequest: endpointMatcher({ hosts, paths: [/^\/chat\/completion$/, /^\/samantha\/chat\/completion$/] }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    if (!body || !Array.isArray(body.messages) || body.messages.length === 0) return null;
    const message = body.messages[body.messages.length - 1];
    const current = dig(message, 'content_block', 0, 'content', 'text_block', 'text');
    if (typeof current === 'string') return current;
    const legacy = parseJson(message.content);
    return legacy && typeof legacy.text === 'string' ? legacy.text : null;
  },
  createParser: sseParser({ onEvent, trouble, init }),
  input: {
    selectors: ['textarea[data-testid="chat_input_input"]', 'textarea.semi-input-textarea', 'div[data-testid="chat_input"] textarea'],
    kind: 'textarea',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/doubao.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 50 * MB,
    maxFiles: 50,
    input: ['input[data-testid="upload_file_input"]'],
    chip: ['.file-card-wrapper'],
    busy: ['.file-card-loading'],
    error: ['.file-card-error'],
  }),
  send: {
    selectors: ['button[data-testid="chat_input_send_button"]', '#flow-end-msg-send', 'button[aria-label="发送"]'],
    key: 'Enter',
  },
  trouble,
};
