// Mock claude.ai: a ProseMirror composer and the completion endpoint answered with Anthropic Messages SSE
// (reference §6): plain text, extended thinking, a tool block between two text blocks, the legacy
// `completion` events, and an error frame.

import { NONCE } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { claude as upload } from './uploads.js';
import { hostileSse, prepare, sseEvent } from './lib/wire.js';

const variants = ['default', 'thinking', 'tool-use', 'legacy-completion', 'error-overloaded'];
const ev = (name, obj) => sseEvent({ event: name, data: JSON.stringify(obj) });

function messageStart() {
  return ev('message_start', {
    type: 'message_start',
    message: {
      id: 'chatcompl_016nDBiL4LuuBF3DtWJhvJ2g', type: 'message', role: 'assistant', model: '',
      parent_uuid: '019dd855-3b42-7bf9-9cec-107e4cfafeb7', uuid: '019dd855-3b42-7a43-af6d-a4e2e1da2473', content: [],
      stop_reason: null, stop_sequence: null, stop_details: null, trace_id: '000000000000000026ef3276f2ac1521',
      request_id: 'req_011CaXjqC8b2HkF7jDPAT1cb',
    },
    discarded_parent_message_uuid: null,
  });
}

function textBlock(index, tokens, events, rng) {
  events.push(ev('content_block_start', {
    type: 'content_block_start', index,
    content_block: { start_timestamp: '2026-04-29T08:23:24.586201Z', stop_timestamp: null, flags: null, type: 'text', text: '', citations: [] },
  }));
  for (const t of tokens) {
    events.push(ev('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: t } }));
    if (rng.chance(0.1)) events.push(': ping - 2026-04-29 08:23:26.497349\n\n');
    if (rng.chance(0.05)) events.push(ev('ping', { type: 'ping' }));
  }
  events.push(ev('content_block_stop', { type: 'content_block_stop', index, stop_timestamp: '2026-04-29T08:23:28.531755Z' }));
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  const events = [];
  if (variant === 'legacy-completion') {
    tokens.forEach((t, i) => {
      const last = i === tokens.length - 1;
      events.push(ev('completion', {
        type: 'completion', completion: t, stop_reason: null, model: 'claude-2.1', stop: null, log_id: 'log_1',
        messageLimit: { type: 'within_limit' },
      }));
      if (last) events.push(ev('completion', { type: 'completion', completion: '', stop_reason: 'stop_sequence', model: 'claude-2.1', stop: '\n\nHuman:', log_id: 'log_1', messageLimit: { type: 'within_limit' } }));
    });
    if (tokens.length === 0) events.push(ev('completion', { type: 'completion', completion: '', stop_reason: 'stop_sequence', model: 'claude-2.1', log_id: 'log_1' }));
    return hostileSse(events, rng);
  }
  events.push(ev('conversation_ready', { type: 'conversation_ready' }));
  events.push(messageStart());
  if (variant === 'error-overloaded') {
    events.push(ev('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
    return hostileSse(events, rng);
  }
  let index = 0;
  if (variant === 'thinking') {
    events.push(ev('content_block_start', { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', summaries: [], cut_off: false } }));
    for (const t of thinkTokens) events.push(ev('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: t } }));
    events.push(ev('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_summary_delta', summary: { summary: 'Thinking about the greeting.' } } }));
    events.push(ev('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: 'c2lnbmF0dXJl' } }));
    events.push(ev('content_block_stop', { type: 'content_block_stop', index }));
    index += 1;
  }
  if (variant === 'tool-use') {
    const half = Math.ceil(tokens.length / 2);
    textBlock(index, tokens.slice(0, half), events, rng);
    index += 1;
    events.push(ev('content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: 'toolu_01', name: 'web_search', input: {} } }));
    events.push(ev('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '{"query": "天气' } }));
    events.push(ev('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: ' 北京"}' } }));
    events.push(ev('content_block_stop', { type: 'content_block_stop', index }));
    index += 1;
    events.push(ev('content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'text', text: 'search result text, not the answer' }] } }));
    events.push(ev('content_block_stop', { type: 'content_block_stop', index }));
    index += 1;
    textBlock(index, tokens.slice(half), events, rng);
  } else {
    textBlock(index, tokens, events, rng);
  }
  events.push(ev('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null, stop_details: null } }));
  events.push(ev('message_limit', {
    type: 'message_limit',
    message_limit: { type: 'within_limit', resetsAt: null, remaining: null, perModelLimit: null, representativeClaim: 'five_hour', overageDisabledReason: 'overage_not_provisioned', overageInUse: false, windows: { '5h': { status: 'within_limit', resets_at: 1777464600, utilization: 0.86 } } },
  }));
  events.push(ev('message_stop', { type: 'message_stop' }));
  return hostileSse(events, rng);
}

function page(opts) {
  return renderPage({
    title: 'Claude',
    lang: 'en-US',
    body: `<div class="flex min-h-screen w-full" data-theme="claude">
  <main class="mock-messages" id="messages" data-testid="conversation"></main>
  <fieldset class="flex w-full min-w-0 flex-col" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px">
    <div aria-label="Write your prompt to Claude" class="relative">
      <div contenteditable="true" translate="no" role="textbox" enterkeyhint="enter" tabindex="0" aria-multiline="true"
        aria-label="Write your prompt to Claude" data-testid="chat-input" data-placeholder="How can I help you today?"
        class="tiptap ProseMirror break-words max-w-[60ch]"></div>
    </div>
    <div class="flex gap-2.5 w-full items-center" style="display:flex;justify-content:flex-end">
      <button type="button" aria-label="Send message" class="inline-flex items-center justify-center bg-accent-main-000">↑</button>
    </div>
  </fieldset>
</div>`,
    input: { selector: 'div.ProseMirror[contenteditable="true"]', kind: 'prosemirror' },
    send: { selector: 'button[aria-label="Send message"]' },
    messages: '#messages',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      return {
        url: '/api/organizations/5d1f0a8e-1111-4c2a-9e61-0a4b7c9d2e01/chat_conversations/8b2e6c1d-2222-4f3a-8d71-1b5c8e0f3a12/completion',
        method: 'POST',
        headers: { 'accept': 'text/event-stream', 'content-type': 'application/json', 'anthropic-client-platform': 'web_claude_ai' },
        body: JSON.stringify({ prompt: prompt, timezone: 'Asia/Shanghai', personalized_styles: [{ type: 'default', key: 'Default', name: 'Normal',
          nameKey: 'normal_style_name', prompt: 'Normal\\n', summary: 'Default responses from Claude', summaryKey: 'normal_style_summary', isDefault: true }],
          locale: 'en-US', model: 'claude-haiku-4-5-20251001', tools: [], rendering_mode: 'messages', parent_message_uuid: ctx.uuid(),
          turn_message_uuids: { human_message_uuid: ctx.uuid(), assistant_message_uuid: ctx.uuid() }, attachments: [], files: (ctx.files || []).map(function (f) { return f.id; }), sync_sources: [] })
      };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'claude',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['claude.ai'],
  page,
  // CSP of claude.ai (shared/reference/site-runtime.md §1b): inline script needs a nonce or hash ("Either the
  // 'unsafe-inline' keyword, a hash […], or a nonce […] is required", lugia19/Claude-Usage-Extension#69,
  // 2026-06-07; the rest of its script-src is unknown), and connect-src as logged by the claude.ai web view
  // (anthropics/claude-code#18854, 2026-01-27).
  csp: {
    'script-src': [NONCE, "'self'"],
    'connect-src': ["'self'", 'https://api.segment.io', 'https://*.segment.io', 'https://*.segment.com', 'https://a-cdn.anthropic.com',
      'https://*.google.com', 'https://*.facebook.com', 'https://*.facebook.net', 'https://*.doubleclick.net'],
  },
  endpoint: { method: 'POST', path: /^\/api\/organizations\/[^/]+\/chat_conversations\/[^/]+\/(completion|retry_completion)$/ },
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'text/event-stream; charset=utf-8', hosts: ['claude.ai'] }])),
  reasoningVariants: ['thinking'],
  errorVariants: { 'error-overloaded': 'overloaded_error' },
  stream,
  contentType: 'text/event-stream; charset=utf-8',
};
