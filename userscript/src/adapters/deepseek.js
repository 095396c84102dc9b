// DeepSeek (chat.deepseek.com): SSE of JSON-patch ops on `response/fragments`; THINK fragments are reasoning,
// RESPONSE fragments the answer; `response/status` FINISHED (or INCOMPLETE after a stop) ends the turn.

import { createPatchState } from './lib/patch.js';
import { createSnapshotDiffer } from './lib/snapshot.js';
import { dig, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';

const hosts = ['chat.deepseek.com'];

/** Answer and reasoning text as the page would show them, from the patched `response` object. */
function texts(response) {
  let answer = typeof response.content === 'string' ? response.content : '';
  let reasoning = typeof response.thinking_content === 'string' ? response.thinking_content : '';
  for (const fragment of Array.isArray(response.fragments) ? response.fragments : []) {
    if (!fragment || typeof fragment.content !== 'string') continue;
    if (fragment.type === 'RESPONSE') answer += fragment.content;
    else if (fragment.type === 'THINK') reasoning += fragment.content;
  }
  return { answer, reasoning };
}

function onEvent(record, out, ctx) {
  if (record.event === 'hint') {
    const hint = parseJson(record.data);
    if (hint && hint.type === 'error') out.error(hint.content || 'DeepSeek error / DeepSeek 出错', hint.finish_reason);
    return;
  }
  if (record.event === 'close') {
    out.done();
    return;
  }
  if (record.event !== 'message') return; // ready, update_session, title: metadata
  const frame = parseJson(record.data);
  if (!frame || typeof frame !== 'object' || Array.isArray(frame)) return;
  if (frame.code !== undefined && frame.code !== 0 && frame.msg !== undefined && !('v' in frame)) {
    out.error(frame.msg, frame.code);
    return;
  }
  if (!('p' in frame) && frame.v && typeof frame.v === 'object' && !Array.isArray(frame.v) && 'response' in frame.v) {
    ctx.patch.root = frame.v; // initial snapshot
  } else if ('v' in frame) {
    ctx.patch.apply(frame);
  } else {
    return;
  }
  const response = dig(ctx.patch.root, 'response') || {};
  const { answer, reasoning } = texts(response);
  out.reasoning(ctx.reasoning.next(reasoning));
  out.delta(ctx.answer.next(answer));
  if (response.status === 'FINISHED' || response.status === 'INCOMPLETE') out.done();
  else if (response.status === 'CONTENT_FILTER') out.error('DeepSeek filtered the reply / 回复被内容过滤', 'CONTENT_FILTER');
}

const trouble = makeTrouble({
  codes: {
    40003: REASONS.login,
    40002: REASONS.login,
  },
});

export default {
  name: 'deepseek',
  hosts,
  matchRequest: endpointMatcher({ hosts, paths: [/^\/api\/v0\/chat\/(completion|regenerate|resume_stream|continue)$/] }),
  promptFromRequest(bodyText) {
    const body = parseJson(bodyText);
    return body && typeof body.prompt === 'string' ? body.prompt : null;
  },
  createParser: sseParser({
    onEvent,
    trouble,
    init: () => ({
      patch: createPatchState({ initialOp: 'SET', appendStrings: (p) => /(^|\/)(content|thinking_content)$/.test(p) }),
      answer: createSnapshotDiffer(),
      reasoning: createSnapshotDiffer(),
    }),
  }),
  input: {
    selectors: ['textarea#chat-input', 'textarea[placeholder*="DeepSeek"]', 'textarea[placeholder*="发送消息"]'],
    kind: 'textarea',
  },
  send: {
    selectors: [
      'div[role="button"]._7436101',
      'div.ds-button--primary[role="button"]',
      'button[aria-label="发送"]',
      'button[aria-label="Send"]',
    ],
    key: 'Enter',
  },
  trouble,
};
