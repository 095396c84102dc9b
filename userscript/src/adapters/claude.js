// Claude.ai: Anthropic Messages SSE (`content_block_delta` text_delta = answer, thinking_delta = reasoning,
// `message_stop` ends the turn) and the legacy `completion` events (end when `stop_reason` is set).

import { parseJson, sseParser } from './lib/stream.js';
import { makeTrouble } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['claude.ai'];

function onEvent(record, out, ctx) {
  const frame = parseJson(record.data);
  if (!frame || typeof frame !== 'object') return;
  const type = frame.type || record.event;
  switch (type) {
    case 'content_block_start': {
      const block = frame.content_block || {};
      ctx.blocks.set(frame.index, block.type);
      if (block.type === 'text') out.delta(block.text);
      else if (block.type === 'thinking') out.reasoning(block.thinking);
      return;
    }
    case 'content_block_delta': {
      const delta = frame.delta || {};
      const blockType = ctx.blocks.get(frame.index);
      if (delta.type === 'text_delta' && (blockType === undefined || blockType === 'text')) out.delta(delta.text);
      else if (delta.type === 'thinking_delta') out.reasoning(delta.thinking);
      return; // input_json_delta, citations_delta, signature_delta, thinking_summary_delta: not text
    }
    case 'message_delta':
      if (frame.delta && frame.delta.stop_reason) ctx.stopReason = frame.delta.stop_reason;
      return;
    case 'message_stop':
      out.done();
      return;
    case 'error': {
      const err = frame.error || {};
      out.error(err.message || 'Claude error / Claude 出错', err.type || 'error');
      return;
    }
    case 'completion':
      out.delta(frame.completion);
      if (frame.stop_reason) out.done();
      return;
    default:
      if (frame.error && typeof frame.error === 'object') {
        out.error(frame.error.message || 'Claude error / Claude 出错', frame.error.type || 'error');
      }
  }
}

const trouble = makeTrouble();

export default {
  name: 'claude',
  hosts,
  matchRequest: endpointMatcher({
    hosts,
    paths: [
      /^\/api\/organizations\/[^/]+\/chat_conversations\/[^/]+\/(completion|retry_completion)$/,
      /^\/api\/append_message$/,
    ],
  }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    if (!body) return null;
    if (typeof body.prompt === 'string') return body.prompt;
    return typeof body.completion?.prompt === 'string' ? body.completion.prompt : null;
  },
  createParser: sseParser({
    onEvent,
    trouble,
    init: () => ({ blocks: new Map(), stopReason: null }),
    atEof: (out, ctx) => {
      if (ctx.stopReason) out.done();
    },
  }),
  input: {
    selectors: [
      'div.ProseMirror[contenteditable="true"]',
      '[data-testid="chat-input"][contenteditable="true"]',
      'div[contenteditable="true"][aria-label*="Claude"]',
    ],
    kind: 'contenteditable',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/claude.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 30 * MB,
    maxFiles: 20,
    input: ['input[data-testid="file-upload"]'],
    chip: ['.attachment-thumbnail', '[data-testid="file-thumbnail"]'],
    busy: ['.attachment-uploading'],
    error: ['.attachment-error'],
  }),
  send: {
    selectors: ['button[aria-label="Send message"]', 'button[aria-label="Send Message"]', 'button[aria-label="发送消息"]'],
    key: 'Enter',
  },
  trouble,
};
