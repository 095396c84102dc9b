// DeepSeek (chat.deepseek.com): SSE of JSON-patch ops on `response/fragments`; THINK fragments are reasoning,
// RESPONSE fragments the answer; `response/status` FINISHED (or INCOMPLETE after a stop) ends the turn.

import { createPatchState } from './lib/patch.js';
import { dig, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';

const hosts = ['chat.deepseek.com'];

/** Send a fragment's text to the answer (RESPONSE) or the reasoning (THINK); tool and tip fragments are UI. */
function emitFragmentText(out, fragment, text) {
  if (!fragment || typeof text !== 'string') return;
  if (fragment.type === 'RESPONSE') out.delta(text);
  else if (fragment.type === 'THINK') out.reasoning(text);
}

function emitFragments(out, fragments) {
  for (const f of Array.isArray(fragments) ? fragments : []) emitFragmentText(out, f, f && f.content);
}

/** Text carried by one applied patch op (only appends carry text: content paths always append). */
function emitApplied(out, root, leaf) {
  const path = leaf.path;
  if (path[0] !== 'response' || leaf.op !== 'append') return;
  if (path.length === 4 && path[1] === 'fragments' && path[3] === 'content') {
    emitFragmentText(out, dig(root, 'response', 'fragments', path[2]), leaf.value);
  } else if (path.length === 2 && path[1] === 'fragments') {
    emitFragments(out, Array.isArray(leaf.value) ? leaf.value : [leaf.value]);
  } else if (path.length === 2 && path[1] === 'content' && typeof leaf.value === 'string') {
    out.delta(leaf.value); // 2025-early shape: response/content
  } else if (path.length === 2 && path[1] === 'thinking_content' && typeof leaf.value === 'string') {
    out.reasoning(leaf.value);
  }
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
    ctx.patch.root = frame.v; // initial snapshot: its fragments' text counts
    const response = frame.v.response || {};
    if (typeof response.thinking_content === 'string') out.reasoning(response.thinking_content);
    if (typeof response.content === 'string') out.delta(response.content);
    emitFragments(out, response.fragments);
  } else if ('v' in frame) {
    for (const leaf of ctx.patch.apply(frame)) emitApplied(out, ctx.patch.root, leaf);
  } else {
    return;
  }
  const status = dig(ctx.patch.root, 'response', 'status');
  if (status === 'FINISHED' || status === 'INCOMPLETE') out.done();
  else if (status === 'CONTENT_FILTER') out.error('DeepSeek filtered the reply / 回复被内容过滤', 'CONTENT_FILTER');
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
