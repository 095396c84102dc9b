// Mock Kimi: www.kimi.com answers the Connect gateway with binary frames (reference §8, current), and
// kimi.moonshot.cn answers `/api/chat/{id}/completion/stream` with the legacy `data:` events. A Lexical
// editor composer on both.

import { encodeConnectFrame } from '../../src/adapters/lib/connect.js';
import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { kimi as upload } from './uploads.js';
import { concatBytes, hostileChunks, hostileSse, prepare, sseEvent } from './lib/wire.js';

const connectVariants = ['default', 'connect-thinking', 'connect-error'];
const legacyVariants = ['legacy', 'legacy-k1', 'legacy-error'];
const variants = [...connectVariants, ...legacyVariants];

function connectStream(rng, variant, tokens, thinkTokens, prompt) {
  const frames = [{ heartbeat: {} }];
  frames.push({ chat: { id: 'd1u2kimi0chat', name: '未命名会话' } });
  frames.push({
    op: 'set', mask: 'message',
    message: { id: 'm-user', parentId: '', role: 'user', status: 'MESSAGE_STATUS_COMPLETED', blocks: [{ id: 'u1', text: { content: prompt } }] },
  });
  frames.push({ op: 'set', mask: 'message', message: { id: 'm-asst', parentId: 'm-user', role: 'assistant', status: 'MESSAGE_STATUS_GENERATING' } });
  if (variant === 'connect-error') {
    frames.push({ heartbeat: {} });
    const parts = frames.map((f) => encodeConnectFrame(f));
    parts.push(encodeConnectFrame({ error: { code: 'resource_exhausted', message: '请求过于频繁，请稍后再试' } }, 2));
    return hostileChunks(concatBytes(parts), rng);
  }
  const block = (id, kind, list) => {
    list.forEach((t, i) => {
      frames.push(i === 0
        ? { op: 'set', mask: `block.${kind}`, block: { id, [kind]: { content: t } } }
        : { op: 'append', mask: `block.${kind}.content`, block: { id, [kind]: { content: t } } });
      if (rng.chance(0.1)) frames.push({ heartbeat: {} });
    });
  };
  if (variant === 'connect-thinking') block('b0', 'think', thinkTokens);
  block('b1', 'text', tokens);
  frames.push({ op: 'set', mask: 'message.status', message: { status: 'MESSAGE_STATUS_COMPLETED' } });
  frames.push({ eventOffset: frames.length, done: {} });
  const parts = frames.map((f) => encodeConnectFrame(f));
  parts.push(encodeConnectFrame({}, 2));
  return hostileChunks(concatBytes(parts), rng);
}

function legacyStream(rng, variant, tokens, thinkTokens, prompt) {
  const data = (obj) => sseEvent({ data: JSON.stringify(obj) });
  const events = [
    data({ content: prompt, event: 'req', group_id: 'cljdett0tc12f8jcpc7g', id: 'cljdett0tc12f8jcpc8g', refs: [] }),
    data({ event: 'resp', group_id: 'cljdett0tc12f8jcpc7g', id: 'cljdett0tc12f8jcpc90' }),
    data({ event: 'debug', message: { need2search: false, search_target: '', search_language: '' } }),
  ];
  if (variant === 'legacy-error') {
    events.push(data({ event: 'error', error: { error_type: 'chat.too_many_requests', message: '当前使用人数过多，请稍后再试' } }));
    return hostileSse(events, rng);
  }
  events.push(data({ event: 'search_plus', msg: { type: 'start' } }));
  events.push(data({ event: 'search_plus', msg: { type: 'get_res', title: '搜索结果标题 not the answer', url: 'https://example.invalid/a', snippet: '摘要' } }));
  if (variant === 'legacy-k1') for (const t of thinkTokens) events.push(data({ event: 'k1', text: t, view: 'cot' }));
  for (const t of tokens) events.push(data({ event: 'cmpl', text: t, view: 'cmpl' }));
  events.push(data({ event: 'rename', text: '1+1 计算' }));
  events.push(data({ event: 'done' }));
  events.push(data({ event: 'all_done' }));
  return hostileSse(events, rng);
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  const prompt = args.prompt || '1+1 等于几？';
  return legacyVariants.includes(variant)
    ? legacyStream(rng, variant, tokens, thinkTokens, prompt)
    : connectStream(rng, variant, tokens, thinkTokens, prompt);
}

function page(opts) {
  return renderPage({
    title: 'Kimi - 会推理解析，能深度思考的AI助手',
    body: `<div id="app" class="app">
  <div class="chat-content-list mock-messages" id="chat-list"></div>
  <div class="chat-input" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px">
    <div class="chat-input-editor-container">
      <div class="chat-input-editor" contenteditable="true" role="textbox" spellcheck="true" data-lexical-editor="true"
        style="user-select:text;white-space:pre-wrap;word-break:break-word" data-placeholder="尽管问，带图也行"></div>
    </div>
    <div class="chat-editor-action" style="display:flex;justify-content:flex-end">
      <div class="send-button-container"><div class="send-button" role="button" tabindex="0">➤</div></div>
    </div>
  </div>
</div>`,
    input: { selector: '.chat-input-editor[contenteditable="true"]', kind: 'lexical' },
    send: { selector: '.send-button' },
    messages: '#chat-list',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      if (ctx.host === 'kimi.moonshot.cn') {
        return {
          url: '/api/chat/cljdett0tc12f8jcpc6g/completion/stream',
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer mock-token' },
          body: JSON.stringify({ kimiplus_id: 'kimi', messages: [{ role: 'user', content: prompt }], refs: (ctx.files || []).map(function (f) { return f.id; }), refs_file: [],
            use_math: false, use_research: false, use_search: false, extend: { sidebar: true } })
        };
      }
      var json = new TextEncoder().encode(JSON.stringify({ scenario: 'SCENARIO_K2D5', chat_id: '', tools: [],
        message: { parent_id: '', role: 'user', blocks: [{ message_id: '', text: { content: prompt } }].concat((ctx.files || []).map(function (f) { return { message_id: '', file: { id: f.id, name: f.name } }; })), scenario: 'SCENARIO_K2D5' },
        options: { thinking: false } }));
      var frame = new Uint8Array(5 + json.length);
      new DataView(frame.buffer).setUint32(1, json.length, false);
      frame.set(json, 5);
      return {
        url: '/apiv2/kimi.gateway.chat.v1.ChatService/Chat',
        method: 'POST',
        headers: { 'Content-Type': 'application/connect+json', 'connect-protocol-version': '1', 'Authorization': 'Bearer mock-token' },
        body: frame
      };
    }`,
    upload,
  }, opts);
}

const meta = {};
for (const v of connectVariants) {
  meta[v] = { contentType: 'application/connect+json', hosts: ['www.kimi.com', 'kimi.com'], path: '/apiv2/kimi.gateway.chat.v1.ChatService/Chat' };
}
for (const v of legacyVariants) {
  meta[v] = { contentType: 'text/event-stream; charset=utf-8', hosts: ['kimi.moonshot.cn'], path: /^\/api\/chat\/[^/]+\/completion\/stream$/ };
}

export default {
  name: 'kimi',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['www.kimi.com', 'kimi.com', 'kimi.moonshot.cn'],
  page,
  // CSP: www.kimi.com / kimi.moonshot.cn: no published policy (shared/reference/site-runtime.md §1b) —
  // so the strict stand-in: nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(['www.kimi.com', 'kimi.com', 'kimi.moonshot.cn']),
  endpoint: { method: 'POST', path: /^(\/apiv2\/kimi\.gateway\.chat\.v1\.ChatService\/Chat|\/api\/chat\/[^/]+\/completion\/stream)$/ },
  variants,
  variantMeta: meta,
  reasoningVariants: ['connect-thinking', 'legacy-k1'],
  errorVariants: { 'connect-error': 'resource_exhausted', 'legacy-error': 'chat.too_many_requests' },
  stream,
  contentType: 'application/connect+json',
};
