// Mock chat.deepseek.com: a React-style textarea composer and `POST /api/v0/chat/completion` answered with
// DeepSeek's SSE fragment patches (reference §1), thinking on/off, 2025 spacing, user stop, hint errors, and
// the withdrawal (`content-filter`: the answer streams, then a bare `{"v":[…]}` after a BATCH sets `status`
// CONTENT_FILTER at `response` and swaps in a TEMPLATE_RESPONSE refusal, as in the captures in
// docs/sites/deepseek.md).

import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { deepseek as upload } from './uploads.js';
import { hostileSse, prepare, spacedJson, sseEvent } from './lib/wire.js';

const variants = ['default', 'thinking', 'spaced-2025', 'stopped', 'error-hint', 'content-filter'];

function snapshot(fragments, thinking) {
  return {
    v: {
      response: {
        message_id: 2, parent_id: 1, model: '', role: 'ASSISTANT', thinking_enabled: thinking, ban_edit: false,
        ban_regenerate: false, status: 'WIP', incomplete_message: null, accumulated_token_usage: 0, feedback: null,
        inserted_at: 1789181711.200752, search_enabled: false, fragments, conversation_mode: 'DEFAULT',
        has_pending_fragment: false, auto_continue: false, search_triggered: false,
      },
    },
  };
}

function fragment(id, type, content) {
  return type === 'THINK'
    ? { id, type, content, elapsed_secs: null, references: [], stage_id: 1 }
    : { id, type, content, references: [], stage_id: 1 };
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  const json = variant === 'spaced-2025' ? spacedJson : JSON.stringify;
  const data = (obj) => sseEvent({ data: json(obj) });
  const events = [
    sseEvent({ event: 'ready', data: JSON.stringify({ request_message_id: 1, response_message_id: 2, model_type: 'default' }) }),
    sseEvent({ event: 'update_session', data: JSON.stringify({ updated_at: 1789181711.2138479 }) }),
  ];
  if (variant === 'error-hint') {
    events.push(sseEvent({
      event: 'hint',
      data: JSON.stringify({ type: 'error', content: '输入内容超出长度限制 / input exceeds the limit', clear_response: true, finish_reason: 'input_exceeds_limit' }),
    }));
    events.push(sseEvent({ event: 'close', data: JSON.stringify({ click_behavior: 'none', auto_resume: false }) }));
    return hostileSse(events, rng);
  }
  const appendRun = (list, first) => {
    list.forEach((t, i) => {
      if (i === 0 && first) events.push(data(first(t)));
      else events.push(data({ v: t }));
    });
  };
  if (variant === 'thinking') {
    const [r0 = '', ...rest] = thinkTokens;
    events.push(data(snapshot([fragment(1, 'THINK', r0)], true)));
    appendRun(rest, (t) => ({ p: 'response/fragments/-1/content', o: 'APPEND', v: t }));
    events.push(data({ p: 'response/fragments/-1/elapsed_secs', o: 'SET', v: 3.2 }));
    const [a0 = '', ...more] = tokens;
    events.push(data({ p: 'response/fragments', o: 'APPEND', v: [fragment(2, 'RESPONSE', a0)] }));
    appendRun(more, (t) => ({ p: 'response/fragments/-1/content', v: t }));
  } else {
    const [a0 = '', ...rest] = tokens;
    events.push(data(snapshot([fragment(2, 'RESPONSE', a0)], false)));
    appendRun(rest, (t) => ({ p: 'response/fragments/-1/content', o: 'APPEND', v: t }));
  }
  if (variant === 'stopped') {
    events.push(data({ p: 'response/status', v: 'INCOMPLETE' }));
  } else if (variant === 'content-filter') {
    events.push(data({ p: 'response/fragments', v: [{ id: 3, type: 'TIP', content: '本回答由 AI 生成，内容仅供参考，请仔细甄别。', style: 'WARNING', hide_on_wip: true }] }));
    events.push(data({ p: 'response', o: 'BATCH', v: [{ p: 'accumulated_token_usage', v: 49 }, { p: 'quasi_status', v: 'FINISHED' }] }));
    events.push(data({ v: [
      { p: 'ban_regenerate', v: true }, { p: 'status', v: 'CONTENT_FILTER' },
      { p: 'fragments', v: [{ id: 4, type: 'TEMPLATE_RESPONSE', content: '你好，这个问题我暂时无法回答，让我们换个话题再聊聊吧。' }] },
      { p: 'quasi_status', v: 'CONTENT_FILTER' },
    ] }));
    events.push(sseEvent({ event: 'finish', data: '{}' }));
  } else {
    events.push(data({ p: 'response', o: 'BATCH', v: [{ p: 'accumulated_token_usage', v: 49 }, { p: 'quasi_status', v: 'FINISHED' }] }));
    events.push(data({ p: 'response/status', o: 'SET', v: 'FINISHED' }));
  }
  events.push(sseEvent({ event: 'update_session', data: JSON.stringify({ updated_at: 1789181712.4127 }) }));
  events.push(sseEvent({ event: 'title', data: JSON.stringify({ content: 'Greeting the Assistant 标题' }) }));
  events.push(sseEvent({ event: 'close', data: JSON.stringify({ click_behavior: 'none', auto_resume: false }) }));
  return hostileSse(events, rng);
}

function page(opts) {
  return renderPage({
    title: 'DeepSeek - 探索未至之境',
    body: `<div id="root"><div class="ds-theme _3919b83">
  <div class="_8f60047 mock-messages" id="chat-messages"></div>
  <div class="_77cefa5" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:24px;padding:12px">
    <div class="_24fad49"><textarea id="chat-input" class="_27c9245 ds-scroll-area" placeholder="给 DeepSeek 发送消息 " rows="2" style="width:100%;border:0;resize:none;font:inherit"></textarea></div>
    <div class="ec4f5d61" style="display:flex;justify-content:flex-end;gap:8px">
      <div role="button" class="ds-button ds-button--secondary" aria-pressed="false">深度思考 (R1)</div>
      <div role="button" class="_7436101 ds-button--primary ds-icon-button" aria-disabled="true" tabindex="0" style="width:32px;height:32px;border-radius:16px;background:#4d6bfe;color:#fff;text-align:center">↑</div>
    </div>
  </div>
</div></div>`,
    input: { selector: 'textarea#chat-input', kind: 'react-textarea' },
    send: { selector: 'div[role="button"]._7436101' },
    messages: '#chat-messages',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      return {
        url: '/api/v0/chat/completion',
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer mock-token', 'X-Ds-Pow-Response': 'bW9jaw==' },
        body: JSON.stringify({ chat_session_id: 'd213f7b1-0aa7-47a2-a6cf-3b4910a66b3a', parent_message_id: ctx.turn > 1 ? (ctx.turn - 1) * 2 : null,
          prompt: prompt, ref_file_ids: (ctx.files || []).map(function (f) { return f.id; }), thinking_enabled: false, search_enabled: false, client_stream_id: '20251122-' + ctx.uuid().replace(/-/g, '').slice(0, 16) })
      };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'deepseek',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['chat.deepseek.com'],
  page,
  // CSP: chat.deepseek.com: only a Report-Only policy (`script-src 'none'`) is on record (DenysMb/ChatAI-Plasmoid#29,
  // 2025-02-09), no enforced one (shared/reference/site-runtime.md §1b) —
  // so the strict stand-in: nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(['chat.deepseek.com']),
  endpoint: { method: 'POST', path: '/api/v0/chat/completion' },
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'text/event-stream; charset=utf-8', hosts: ['chat.deepseek.com'] }])),
  reasoningVariants: ['thinking'],
  errorVariants: { 'error-hint': 'input_exceeds_limit', 'content-filter': 'content_filter' },
  stream,
  contentType: 'text/event-stream; charset=utf-8',
};
