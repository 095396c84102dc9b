// Mock chatgpt.com: a ProseMirror `#prompt-textarea` composer and `/backend-api/f/conversation` answered with
// the v1 delta encoding (reference §5: system/user echoes, metadata events, append/patch ops, final patch),
// a reasoning ("thoughts") message, a tool call before the answer, the legacy full-snapshot stream, and an error.

import { NONCE } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { chatgpt as upload } from './uploads.js';
import { cumulative, hostileSse, prepare, spacedJson, sseEvent } from './lib/wire.js';

const variants = ['default', 'thoughts', 'tool-call', 'legacy', 'error'];
const CONV = '68f1c2aa-0b3c-8003-9d8e-5b1e0a6f2c11';

function message(id, role, content, extra = {}) {
  return {
    id, author: { role, name: null, metadata: {} }, create_time: 1760000000.12, update_time: null, content,
    status: 'in_progress', end_turn: null, weight: 1.0, metadata: { model_slug: 'gpt-5' }, recipient: 'all', channel: null, ...extra,
  };
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  const prompt = args.prompt || 'Hello';
  const delta = (obj) => sseEvent({ event: 'delta', data: spacedJson(obj) });
  const data = (obj) => sseEvent({ data: spacedJson(obj) });
  const events = [];
  if (variant === 'legacy') {
    events.push(data({ message: { ...message('u1', 'user', { content_type: 'text', parts: [prompt] }), status: 'finished_successfully' }, conversation_id: CONV, error: null }));
    const texts = cumulative(tokens);
    if (texts.length === 0) texts.push('');
    texts.forEach((text, i) => {
      const last = i === texts.length - 1;
      const m = message('a1', 'assistant', { content_type: 'text', parts: [text] }, last ? { status: 'finished_successfully', end_turn: true } : {});
      events.push(data({ message: m, conversation_id: CONV, error: null }));
    });
    events.push('data: [DONE]\n\n');
    return hostileSse(events, rng);
  }
  events.push(sseEvent({ event: 'delta_encoding', data: '"v1"' }));
  events.push(data({ type: 'resume_conversation_token', kind: 'topic', token: 'eyJhbGciOiJSUzI1NiJ9.e30.sig', conversation_id: CONV }));
  events.push(delta({ p: '', o: 'add', v: { message: { ...message('s0', 'system', { content_type: 'text', parts: [''] }), status: 'finished_successfully', weight: 0 }, conversation_id: CONV, error: null }, c: 0 }));
  events.push(delta({ c: 1, v: { message: { ...message('u1', 'user', { content_type: 'text', parts: [prompt] }), status: 'finished_successfully' }, conversation_id: CONV, error: null } }));
  events.push(data({ type: 'input_message', input_message: { id: 'u1', author: { role: 'user' }, content: { content_type: 'text', parts: [prompt] } }, conversation_id: CONV }));
  events.push(data({ type: 'message_marker', conversation_id: CONV, message_id: 'u1', marker: 'user_visible_token', event: 'first' }));
  let c = 2;
  if (variant === 'error') {
    events.push(delta({ p: '', o: 'add', v: { message: message('a1', 'assistant', { content_type: 'text', parts: [''] }), conversation_id: CONV, error: null }, c: c++ }));
    events.push(data({ message: null, conversation_id: CONV, error: 'Something went wrong while generating the response. 生成回复时出错。' }));
    return hostileSse(events, rng);
  }
  const streamText = (path, list) => {
    let i = 0;
    while (i < list.length) {
      if (i === 0) events.push(delta({ p: path, o: 'append', v: list[i++] }));
      else if (rng.chance(0.2) && i + 1 < list.length) {
        events.push(delta({ p: '', o: 'patch', v: [{ p: path, o: 'append', v: list[i] }, { p: path, o: 'append', v: list[i + 1] }] }));
        i += 2;
      } else events.push(delta({ v: list[i++] }));
    }
  };
  if (variant === 'thoughts') {
    events.push(delta({ p: '', o: 'add', v: { message: message('t1', 'assistant', { content_type: 'thoughts', thoughts: [], source_analysis_msg_id: 'x1' }, { channel: 'analysis' }), conversation_id: CONV, error: null }, c: c++ }));
    events.push(delta({ p: '/message/content/thoughts', o: 'append', v: [{ summary: 'Thinking 思考', content: '', chunks: [], finished: false }] }));
    streamText('/message/content/thoughts/0/content', thinkTokens);
    events.push(delta({ p: '', o: 'patch', v: [{ p: '/message/content/thoughts/0/finished', o: 'replace', v: true }, { p: '/message/status', o: 'replace', v: 'finished_successfully' }] }));
    events.push(delta({ p: '', o: 'add', v: { message: { ...message('rr1', 'assistant', { content_type: 'reasoning_recap', content: 'Thought for 3s' }), status: 'finished_successfully' }, conversation_id: CONV, error: null }, c: c++ }));
  }
  if (variant === 'tool-call') {
    events.push(delta({ p: '', o: 'add', v: { message: message('k1', 'assistant', { content_type: 'code', language: 'unknown', text: '' }, { recipient: 'web.run' }), conversation_id: CONV, error: null }, c: c++ }));
    events.push(delta({ p: '/message/content/text', o: 'append', v: '{"search_query": [{"q": "天气 北京"}]}' }));
    events.push(delta({ p: '', o: 'patch', v: [{ p: '/message/status', o: 'replace', v: 'finished_successfully' }, { p: '/message/end_turn', o: 'replace', v: false }] }));
    events.push(delta({ p: '', o: 'add', v: { message: { ...message('k2', 'tool', { content_type: 'text', parts: ['search results — not the answer'] }), status: 'finished_successfully' }, conversation_id: CONV, error: null }, c: c++ }));
  }
  for (const [i, img] of (args.images || []).entries()) {
    // The image tool's message (docs/sites/chatgpt.md "Images"): an asset pointer, no address; the page asks
    // for a signed one after the stream and shows it (the mock page's x-mock-images).
    const pointer = { content_type: 'image_asset_pointer', asset_pointer: `sediment://file_00000000${String(i).padStart(4, '0')}a1b2c3d4e5f6a7b8c9d0`,
      size_bytes: 1048576, width: 1024, height: 1024, fovea: null,
      metadata: { dalle: { gen_id: `gen-${i}`, prompt: '', seed: null, parent_gen_id: null, edit_op: null, serialization_title: 'DALL-E generation metadata' }, gizmo: null, generation: { gen_id: `gen-${i}`, gen_size: 'image', seed: null, parent_gen_id: null, height: 1024, width: 1024, transparent_background: false, serialization_title: 'Image Generation metadata' }, container_pixel_height: 1024, container_pixel_width: 1024, sanitized: false } };
    events.push(delta({ p: '', o: 'add', v: { message: { ...message(`img${i}`, 'tool', { content_type: 'multimodal_text', parts: [pointer] }, { author: { role: 'tool', name: 't2uay3k.sj1i4kz', metadata: {} } }), status: 'finished_successfully' }, conversation_id: CONV, error: null }, c: c++ }));
  }
  events.push(delta({ p: '', o: 'add', v: { message: { ...message('a1', 'assistant', { content_type: 'text', parts: [''] }), channel: 'final' }, conversation_id: CONV, error: null }, c: c++ }));
  streamText('/message/content/parts/0', tokens);
  events.push(delta({ p: '', o: 'patch', v: [
    { p: '/message/content/parts/0', o: 'append', v: '' },
    { p: '/message/status', o: 'replace', v: 'finished_successfully' },
    { p: '/message/end_turn', o: 'replace', v: true },
    { p: '/message/metadata', o: 'append', v: { is_complete: true, finish_details: { type: 'stop', stop_tokens: [200002] } } },
  ] }));
  events.push(data({ type: 'title_generation', title: 'Friendly greeting 友好的问候', conversation_id: CONV }));
  events.push(data({ type: 'message_stream_complete', conversation_id: CONV }));
  events.push(data({ type: 'conversation_detail_metadata', banner_info: null, blocked_features: [], model_limits: [], conversation_id: CONV }));
  events.push('data: [DONE]\n\n');
  return hostileSse(events, rng);
}

function page(opts) {
  return renderPage({
    title: 'ChatGPT',
    lang: 'en-US',
    body: `<div class="relative flex h-full w-full">
  <main class="mock-messages" id="thread"></main>
  <form class="w-full" data-type="unified-composer" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:28px;padding:12px">
    <textarea class="wcDTda_fallbackTextarea" name="prompt-textarea" autofocus placeholder="Ask anything" style="display:none"></textarea>
    <div contenteditable="true" translate="no" class="ProseMirror" id="prompt-textarea" data-virtualkeyboard="true" data-placeholder="Ask anything"></div>
    <div style="display:flex;justify-content:flex-end">
      <button id="composer-submit-button" aria-label="Send prompt" data-testid="send-button" class="composer-submit-btn composer-submit-button-color" type="button">↑</button>
    </div>
  </form>
</div>`,
    input: { selector: '#prompt-textarea', kind: 'prosemirror' },
    send: { selector: 'button[data-testid="send-button"]' },
    messages: '#thread',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      return { url: '/backend-api/f/conversation', method: 'POST',
        headers: { 'accept': 'text/event-stream', 'content-type': 'application/json', 'authorization': 'Bearer mock', 'openai-sentinel-chat-requirements-token': 'mock' },
        body: JSON.stringify({ action: 'next', messages: [{ id: ctx.uuid(), author: { role: 'user' }, content: { content_type: 'text', parts: [prompt] },
          metadata: { serialization_metadata: { custom_symbol_offsets: [] }, attachments: (ctx.files || []).map(function (f) { return { id: f.id, name: f.name, size: f.size, mime_type: f.type }; }) }, create_time: ctx.now / 1000 }], parent_message_id: 'client-created-root',
          model: 'auto', timezone_offset_min: -480, timezone: 'Asia/Shanghai', conversation_mode: { kind: 'primary_assistant' }, enable_message_followups: true,
          system_hints: [], supports_buffering: true, supported_encodings: ['v1'], client_contextual_info: { is_dark_mode: false, time_since_loaded: 120,
          page_height: 578, page_width: 1850, pixel_ratio: 1, screen_height: 1080, screen_width: 1920 }, paragen_cot_summary_display_override: 'allow' }) };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'chatgpt',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['chatgpt.com', 'chat.openai.com'],
  page,
  // CSP as quoted from chatgpt.com (shared/reference/site-runtime.md §1b). Scripts: "script-src-elem 'nonce-…'
  // 'self' 'sha256-…' https://auth0.openai.com/ blob: https://challenges.cloudflare.com/ … https://*.chatgpt.com …
  // wss://*.chatgpt.com/" (cowlicks/privacypossum#385, 2025-10-31; 4as/Chat-DeMod#55, 2024-06-18): nonce for
  // inline, hosts for the rest, no 'strict-dynamic'. Connections: "connect-src 'self' o33249.ingest.sentry.io
  // statsigapi.net http://localhost:* https://*.oaistatic.com … https://chat.openai.com", which refused
  // ws://localhost:8765 (zsodur/chatgpt-api-by-browser-script#8, 2023-10-10); chatgpt.com's own origins added
  // since the 2024 move. Elided parts (…) are unknown and left out; so is the unknown sha256.
  csp: {
    'script-src': [NONCE, "'self'", 'https://auth0.openai.com/', 'blob:', 'https://challenges.cloudflare.com/', 'https://*.chatgpt.com', 'wss://*.chatgpt.com/'],
    'script-src-elem': [NONCE, "'self'", 'https://auth0.openai.com/', 'blob:', 'https://challenges.cloudflare.com/', 'https://*.chatgpt.com', 'wss://*.chatgpt.com/'],
    'connect-src': ["'self'", 'o33249.ingest.sentry.io', 'statsigapi.net', 'http://localhost:*', 'https://*.oaistatic.com',
      'https://chatgpt.com', 'https://*.chatgpt.com', 'wss://*.chatgpt.com', 'https://chat.openai.com'],
  },
  endpoint: { method: 'POST', path: /^\/backend-(api|anon)\/(f\/)?conversation$/ },
  // Generated images are served from the site's own origin (signed `estuary/content` addresses).
  imagePaths: [/^\/backend-api\/estuary\/content$/],
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'text/event-stream; charset=utf-8', hosts: ['chatgpt.com', 'chat.openai.com'] }])),
  reasoningVariants: ['thoughts'],
  errorVariants: { error: 'error' },
  stream,
  contentType: 'text/event-stream; charset=utf-8',
};
