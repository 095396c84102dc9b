// DeepSeek (chat.deepseek.com): SSE of JSON-patch ops on `response/fragments`; THINK fragments are reasoning,
// RESPONSE fragments the answer; `response/status` FINISHED (or INCOMPLETE after a stop) ends the turn.
// A bare `{"v":[…]}` after a BATCH continues at the batch's own path (docs/sites/deepseek.md): that is how the
// site withdraws an answer (`status` CONTENT_FILTER at `response`, the turn fails with `content_filter`) and
// how it sends most search citations. Citation markers (`[reference:N]`, `[citation:N]`) are badges on the
// page: they are dropped, and the sources they point at follow the answer under `来源 / Sources`.

import { createMarkerFilter, sourcesBlock } from './lib/citations.js';
import { createPatchState } from './lib/patch.js';
import { dig, parseJson, sseParser } from './lib/stream.js';
import { makeTrouble, REASONS } from './lib/trouble.js';
import { endpointMatcher } from './lib/url.js';
import { DOCS, IMAGES, MB, uploadTable } from './lib/upload.js';

const hosts = ['chat.deepseek.com'];
export const CONTENT_FILTERED = 'DeepSeek withdrew the reply (content filter) / DeepSeek 撤回了回复（内容过滤）';

/** Answer text, without citation markers; the markers' numbers are kept for `[citation:N]` sources. */
function answer(out, ctx, text) {
  const { text: clean, markers } = ctx.markers.push(text);
  for (const m of markers) if (m.kind === 'citation') ctx.cited.push({ cite: m.n });
  out.delta(clean);
}

/** Send a fragment's text to the answer (RESPONSE) or the reasoning (THINK); tool and tip fragments are UI. */
function emitFragmentText(out, ctx, fragment, text) {
  if (!fragment || typeof text !== 'string') return;
  if (fragment.type === 'RESPONSE') answer(out, ctx, text);
  else if (fragment.type === 'THINK') out.reasoning(text);
}

function emitFragments(out, ctx, fragments) {
  for (const f of Array.isArray(fragments) ? fragments : []) emitFragmentText(out, ctx, f, f && f.content);
}

/** Text carried by one applied patch op (only appends carry text: content paths always append). */
function emitApplied(out, ctx, leaf) {
  const root = ctx.patch.root;
  const path = leaf.path;
  if (path[0] !== 'response') return;
  if (path.length === 4 && path[1] === 'fragments' && path[3] === 'references' && Array.isArray(leaf.value)) {
    // 2026 search: a RESPONSE fragment's `references` names the tool fragments its latest marker cites
    if (dig(root, 'response', 'fragments', path[2], 'type') === 'RESPONSE') ctx.cited.push({ refs: leaf.value });
    return;
  }
  if (leaf.op !== 'append') return;
  if (path.length === 4 && path[1] === 'fragments' && path[3] === 'content') {
    emitFragmentText(out, ctx, dig(root, 'response', 'fragments', path[2]), leaf.value);
  } else if (path.length === 2 && path[1] === 'fragments') {
    emitFragments(out, ctx, Array.isArray(leaf.value) ? leaf.value : [leaf.value]);
  } else if (path.length === 2 && path[1] === 'content' && typeof leaf.value === 'string') {
    answer(out, ctx, leaf.value); // 2025-early shape: response/content
  } else if (path.length === 2 && path[1] === 'thinking_content' && typeof leaf.value === 'string') {
    out.reasoning(leaf.value);
  }
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The sources the answer's markers cite, in citation order: a TOOL_OPEN fragment's `result`, a TOOL_SEARCH
 * fragment's `results`, or (2025) the search result whose `cite_index` is the marker's number. */
function citedSources(ctx) {
  const response = dig(ctx.patch.root, 'response');
  if (!isObject(response)) return [];
  const fragments = Array.isArray(response.fragments) ? response.fragments.filter(isObject) : [];
  const byId = new Map(fragments.map((f) => [f.id, f]));
  const pool = [response.search_results, ...fragments.map((f) => f.results)]
    .flatMap((list) => (Array.isArray(list) ? list.filter(isObject) : []));
  const sources = [];
  for (const c of ctx.cited) {
    if (c.refs) {
      for (const ref of c.refs) {
        const f = isObject(ref) ? byId.get(ref.id) : undefined;
        if (!f) continue;
        if (isObject(f.result)) sources.push(f.result);
        else if (Array.isArray(f.results)) sources.push(...f.results.filter(isObject));
      }
    } else {
      const hit = pool.find((r) => r.cite_index !== null && r.cite_index !== undefined && Number(r.cite_index) === c.cite);
      if (hit) sources.push(hit);
    }
  }
  return sources;
}

/** The answer is complete: what the marker filter held back, the sources, then done. */
function finish(out, ctx) {
  if (out.finished) return;
  out.delta(ctx.markers.flush());
  out.delta(sourcesBlock(citedSources(ctx)));
  out.done();
}

function onEvent(record, out, ctx) {
  if (record.event === 'hint') {
    const hint = parseJson(record.data);
    if (hint && hint.type === 'error') out.error(hint.content || 'DeepSeek error / DeepSeek 出错', hint.finish_reason);
    return;
  }
  if (record.event === 'close') {
    finish(out, ctx);
    return;
  }
  if (record.event !== 'message') return; // ready, update_session, title, finish: metadata
  const frame = parseJson(record.data);
  if (!frame || typeof frame !== 'object' || Array.isArray(frame)) return;
  if (frame.code !== undefined && frame.code !== 0 && frame.msg !== undefined && !('v' in frame)) {
    out.error(frame.msg, frame.code);
    return;
  }
  if (!('p' in frame) && isObject(frame.v) && 'response' in frame.v) {
    ctx.patch.root = frame.v; // initial snapshot: its fragments' text counts
    const response = frame.v.response || {};
    if (typeof response.thinking_content === 'string') out.reasoning(response.thinking_content);
    if (typeof response.content === 'string') answer(out, ctx, response.content);
    emitFragments(out, ctx, response.fragments);
  } else if ('v' in frame) {
    for (const leaf of ctx.patch.apply(frame)) emitApplied(out, ctx, leaf);
  } else {
    return;
  }
  const response = dig(ctx.patch.root, 'response');
  const status = dig(response, 'status');
  // The withdrawal: the page swaps the answer for a TEMPLATE_RESPONSE refusal; neither is the answer.
  if (status === 'CONTENT_FILTER' || dig(response, 'quasi_status') === 'CONTENT_FILTER') out.error(CONTENT_FILTERED, 'content_filter');
  else if (status === 'FINISHED' || status === 'INCOMPLETE') finish(out, ctx);
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
      patch: createPatchState({
        initialOp: 'SET',
        appendStrings: (p) => /(^|\/)(content|thinking_content)$/.test(p),
        batchCursor: 'self',
      }),
      markers: createMarkerFilter(),
      cited: [],
    }),
  }),
  input: {
    selectors: ['textarea#chat-input', 'textarea[placeholder*="DeepSeek"]', 'textarea[placeholder*="发送消息"]'],
    kind: 'textarea',
  },
  // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/deepseek.md).
  upload: uploadTable({
    how: 'input',
    accept: [...IMAGES, ...DOCS],
    maxBytes: 100 * MB,
    maxFiles: 50,
    input: ['input.ds-upload-input'],
    chip: ['.ds-file-card'],
    busy: ['.ds-file-card__loading'],
    error: ['.ds-file-card--error'],
  }),
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
