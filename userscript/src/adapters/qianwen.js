// Qwen / Qianwen, three front ends with three formats, recognised per frame:
// - www.qianwen.com → chat2.qianwen.com `/api/v2/chat`: `event:message` frames whose `data.messages[]` hold the
//   answer as a CUMULATIVE `multi_load/iframe` message (deep-think in `meta_data.multi_load[]`); ends with
//   `data.status:"complete"` / `event:complete` + `data:true`.
// - chat.qwen.ai `/api/v2/chat/completions`: incremental `choices[0].delta` with `phase` (answer / think /
//   thinking_summary); ends on `status:"finished"` in the answer phase, or at end of body. The site may stream
//   two candidates at once (a `response.created` per `response_index`, every delta tagged `response_id`,
//   interleaved): only the one the page shows counts (response_index 0, else the lowest announced), and its
//   own finish ends the turn (docs/sites/qwen.md).
// - legacy tongyi (tongyi.aliyun.com → qianwen.biz.aliyun.com `/dialog/conversation`): cumulative `contents[]`,
//   ends on `msgStatus:"finished"` or `[DONE]`.

import { createSnapshotDiffer } from './lib/snapshot.js';
import { dig, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['tongyi.aliyun.com', 'www.tongyi.com', 'www.qianwen.com', 'qianwen.com', 'chat.qwen.ai'];
const endpointHosts = [...hosts, 'chat2.qianwen.com', 'qianwen.biz.aliyun.com'];
const DEEP_THINK_MARK = /\[\(deep_think\)\]/g;

function init() {
  return {
    answer: createSnapshotDiffer(), reasoning: createSnapshotDiffer(), summary: createSnapshotDiffer(), format: null,
    candidates: new Map(), // chat.qwen.ai: response_id → response_index, from `response.created`
    images: new Set(), // chat.qwen.ai: image addresses already reported (`image_gen` phase)
  };
}

/** chat.qwen.ai: note a candidate the stream opens. */
function onCreated(created, ctx) {
  if (!created || typeof created !== 'object' || typeof created.response_id !== 'string') return;
  const index = Number(created.response_index);
  ctx.candidates.set(created.response_id, Number.isFinite(index) ? index : Infinity);
}

/** chat.qwen.ai: the candidate the page shows (response_index 0, else the lowest announced one), or null. */
function shownCandidate(ctx) {
  let best = null;
  let bestIndex = Infinity;
  for (const [id, index] of ctx.candidates) {
    if (best === null || index < bestIndex) {
      best = id;
      bestIndex = index;
    }
  }
  return best;
}

function onCn(frame, out, ctx) {
  if ((frame.error_code && frame.error_code !== 0) || frame.success === false) {
    out.error(frame.error_msg || 'Qianwen error / 千问出错', frame.error_code || 'error');
    return;
  }
  const data = frame.data || {};
  if (dig(data, 'audit_info', 'problem_code') === 'blocked') {
    out.error('Qianwen blocked the reply (moderation) / 千问拦截了回复（内容审核）', 'blocked');
    return;
  }
  const messages = Array.isArray(data.messages) ? data.messages : [];
  let answer = null;
  let reasoning = null;
  for (const m of messages) {
    if (!m || typeof m !== 'object') continue;
    if ((m.mime_type === 'multi_load/iframe' || m.mime_type === 'text/plain') && typeof m.content === 'string') answer = m.content;
    for (const item of Array.isArray(dig(m, 'meta_data', 'multi_load')) ? m.meta_data.multi_load : []) {
      const think = dig(item, 'content', 'think_content');
      if (item && item.type === 'deep_think' && typeof think === 'string') reasoning = think;
    }
  }
  if (reasoning !== null) out.reasoning(ctx.reasoning.next(reasoning));
  if (answer !== null) out.delta(ctx.answer.next(answer.replace(DEEP_THINK_MARK, '')));
  if (data.status === 'complete') out.done();
}

function onIntl(frame, out, ctx) {
  const delta = dig(frame, 'choices', 0, 'delta');
  if (!delta || typeof delta !== 'object') return;
  // With candidates announced, another candidate's delta is not the shown answer (an untagged one still counts).
  if (ctx.candidates.size > 0 && typeof frame.response_id === 'string' && frame.response_id !== shownCandidate(ctx)) return;
  const phase = delta.phase;
  if (phase === 'thinking_summary') {
    const list = dig(delta, 'extra', 'summary_thought', 'content');
    if (Array.isArray(list)) out.reasoning(ctx.summary.next(list.filter((s) => typeof s === 'string').join('\n')));
  } else if (phase === 'think' || phase === 'thinking' || phase === 'reasoning') {
    out.reasoning(delta.content);
  } else if (phase === 'image_gen') {
    // A generated image: the phase's content is its CDN address (docs/sites/qwen.md "Images").
    const url = typeof delta.content === 'string' ? delta.content.trim() : '';
    if (/^https?:\/\//i.test(url) && !ctx.images.has(url)) {
      ctx.images.add(url);
      out.image({ url, alt: '' });
    }
  } else if (phase === 'answer' || phase === null || phase === undefined) {
    out.delta(delta.content);
  }
  if (delta.status === 'finished' && (phase === 'answer' || phase === null || phase === undefined)) out.done();
}

function onLegacy(frame, out, ctx) {
  if (frame.errorCode || frame.errorMsg) {
    out.error(frame.errorMsg || 'Tongyi error / 通义出错', frame.errorCode || 'error');
    return;
  }
  const contents = Array.isArray(frame.contents) ? frame.contents : [];
  const text = contents.filter((c) => c && c.contentType === 'text' && c.role !== 'user' && typeof c.content === 'string');
  if (text.length) out.delta(ctx.answer.next(text[text.length - 1].content));
  if (frame.msgStatus === 'finished') out.done();
}

function onEvent(record, out, ctx) {
  const data = record.data.trim();
  if (data === '[DONE]' || data === 'true') {
    if (record.event === 'complete' || ctx.format !== 'cn' || data === '[DONE]') out.done();
    return;
  }
  const frame = parseJson(data);
  if (!frame || typeof frame !== 'object' || Array.isArray(frame)) return;
  if (frame.error && typeof frame.error === 'object') {
    out.error(frame.error.details || frame.error.message || 'Qwen error / 通义千问出错', frame.error.code || 'error');
    return;
  }
  if ('response.created' in frame) {
    ctx.format = 'intl';
    onCreated(frame['response.created'], ctx);
  } else if ('choices' in frame) {
    ctx.format = 'intl';
    onIntl(frame, out, ctx);
  } else if ('communication' in frame || dig(frame, 'data', 'messages') !== undefined || 'error_code' in frame) {
    ctx.format = 'cn';
    onCn(frame, out, ctx);
  } else if ('msgStatus' in frame || 'contents' in frame) {
    ctx.format = 'legacy';
    onLegacy(frame, out, ctx);
  }
  // other envelopes carry no text
}

const trouble = makeTrouble({
  codes: {
    1004: REASONS.login,
    20006: 'Qianwen rate limit / 千问限流',
  },
});

export default {
  name: 'qianwen',
  hosts,
  matchRequest: endpointMatcher({
    hosts: endpointHosts,
    paths: [/^\/api\/v2\/chat$/, /^\/api\/v2\/chat\/completions$/, /^\/api\/chat\/completions$/, /^\/dialog\/conversation$/],
  }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    if (!body) return null;
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const last = messages[messages.length - 1];
    if (last && typeof last.content === 'string') return last.content;
    const contents = Array.isArray(body.contents) ? body.contents : [];
    const user = contents.filter((c) => c && c.role === 'user' && typeof c.content === 'string');
    return user.length ? user[user.length - 1].content : null;
  },
  createParser: sseParser({
    onEvent,
    trouble,
    init,
    atEof: (out, ctx) => {
      if (ctx.format === 'intl') out.done(); // chat.qwen.ai may simply close the body
    },
  }),
  input: {
    selectors: ['textarea#chat-input', 'textarea[placeholder*="千问"]', 'textarea.ant-input', 'div[contenteditable="true"][role="textbox"]'],
    kind: 'textarea',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/qianwen.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 100 * MB,
    maxFiles: 10,
    input: ['input#filesUpload'],
    chip: ['div.prompt-input-file-list .fileitem-file'],
    busy: ['.fileitem-loading'],
    error: ['.fileitem-error'],
  }),
  send: {
    selectors: ['button#send-message-button', 'button[aria-label="发送"]', 'div[class*="operateBtn"]', 'button[class*="send"]'],
    key: 'Enter',
  },
  trouble,
};
