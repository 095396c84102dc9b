// Mock Qwen / Qianwen: one textarea page on three hosts. www.qianwen.com posts to `/api/v2/chat` and gets
// cumulative `event:message` frames (reference §4a, incl. deep-think, the aurora `event:complete` ending,
// an error envelope); chat.qwen.ai posts to `/api/v2/chat/completions` and gets incremental phase deltas
// (§4b, incl. thinking summary and think phases, error, and two interleaved candidates where the page shows
// response_index 0 and the other one finishes first); tongyi.aliyun.com gets the legacy cumulative format.

import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { qianwen as upload } from './uploads.js';
import { cumulative, hostileSse, prepare, sseEvent } from './lib/wire.js';

const cnVariants = ['default', 'cn-deep-think', 'cn-complete-event', 'cn-error'];
const intlVariants = ['intl', 'intl-thinking', 'intl-error', 'intl-two-candidates'];
const variants = [...cnVariants, ...intlVariants, 'legacy-tongyi'];

const COMM = { chat_assistant_name: 'MainChatAgent', chat_chain_name: 'openChat', disconnection_signal: 0, front_followup: true, llm_client_instance: 'qwen_agent_instance', reqid: '962930be419e41e0a795f062ecaa7877', sessionid: '6c330dfa5257472b958a119c99b634b4' };
const SIGNAL = { meta_data: { operation_types: [['regenerate'], ['enable_web_search']], intent_content: 'MainChatAgent', generate_mode: 'stream', agent_mode: '0' }, mime_type: 'signal/post', status: 'complete' };
const bar = (status) => ({ meta_data: { elements: [{ type: 'text', content: '' }], type: 'bar_update' }, mime_type: 'bar/progress', status });

function cnStream(rng, variant, tokens, thinkTokens) {
  const msg = (obj) => sseEvent({ event: 'message', data: JSON.stringify(obj) }, { space: false });
  const envelope = (resid, messages, status) => ({ communication: { ...COMM, resid }, data: { messages, status }, error_code: 0, error_msg: '', success: true, traceId: '0b2f4c9e17756791620591234e1a2b' });
  const events = [msg(envelope(0, [SIGNAL, bar('processing')], 'processing'))];
  if (variant === 'cn-error') {
    events.push(msg({ communication: { ...COMM, resid: 1 }, data: { messages: [], status: 'failed' }, error_code: 20006, error_msg: '当前提问人数过多，请稍后再试', success: false, traceId: '0b2f' }));
    return hostileSse(events, rng);
  }
  let resid = 1;
  const thinks = cumulative(thinkTokens);
  const marker = variant === 'cn-deep-think' ? '[(deep_think)]' : '';
  const deep = (think, status) => ({ multi_load: [{ type: 'deep_think', content: { think_content: think, status } }] });
  if (variant === 'cn-deep-think') {
    for (const t of thinks) {
      events.push(msg(envelope(resid++, [SIGNAL, bar('processing'), { content: marker, meta_data: deep(t, 'processing'), mime_type: 'multi_load/iframe', status: 'processing' }], 'processing')));
    }
  }
  const finalThink = variant === 'cn-deep-think' ? deep(thinks[thinks.length - 1] || '', 'complete') : {};
  const texts = cumulative(tokens);
  texts.forEach((text, i) => {
    const last = i === texts.length - 1;
    const frame = envelope(resid++, [SIGNAL, bar(last ? 'complete' : 'processing'), { content: marker + text, meta_data: finalThink, mime_type: 'multi_load/iframe', status: last ? 'complete' : 'processing' }], last ? 'complete' : 'processing');
    if (last && variant === 'cn-complete-event') events.push(sseEvent({ event: 'complete', data: JSON.stringify(frame) }, { space: false }));
    else events.push(msg(frame));
    if (rng.chance(0.2)) events.push(msg(frame)); // the same snapshot again: must add nothing
  });
  if (texts.length === 0) events.push(msg(envelope(resid++, [SIGNAL, bar('complete')], 'complete')));
  events.push(sseEvent({ event: 'complete', data: 'true' }, { space: false }));
  return hostileSse(events, rng);
}

function intlStream(rng, variant, tokens, thinkTokens, images = []) {
  const data = (obj) => sseEvent({ data: JSON.stringify(obj) });
  const delta = (d) => data({ choices: [{ delta: { role: 'assistant', ...d } }], response_id: 'r1' });
  const events = [`data: ${JSON.stringify({ 'response.created': { chat_id: 'c1', parent_id: 'p0', response_id: 'r1', response_index: '0' } })} \n\n`];
  if (variant === 'intl-error') {
    events.push(data({ error: { code: 'RateLimited', details: 'You have reached the limit / 已达到使用上限' } }));
    return hostileSse(events, rng);
  }
  if (variant === 'intl-thinking') {
    const half = Math.ceil(thinkTokens.length / 2);
    const summary = cumulative(thinkTokens.slice(0, half));
    for (const s of summary) events.push(delta({ content: '', phase: 'thinking_summary', extra: { summary_thought: { content: [s] } }, status: 'typing' }));
    events.push(delta({ content: '', phase: 'thinking_summary', status: 'finished' }));
    for (const t of thinkTokens.slice(half)) events.push(delta({ content: t, phase: 'think', status: 'typing' }));
    events.push(delta({ content: '', phase: 'think', status: 'finished' }));
  }
  if (variant === 'intl-two-candidates') {
    // A second candidate (response_index 1, another text) interleaved with the shown one, and finished first.
    events.push(`data: ${JSON.stringify({ 'response.created': { chat_id: 'c1', parent_id: 'p0', response_id: 'r2', response_index: '1' } })}\n\n`);
    const other = ['另一个', '候选', '回答'];
    const other2 = (d) => data({ choices: [{ delta: { role: 'assistant', ...d } }], response_id: 'r2' });
    tokens.forEach((t, i) => {
      if (i < other.length) events.push(other2({ content: other[i], phase: 'answer', status: 'typing' }));
      if (i === other.length) events.push(other2({ content: '', phase: 'answer', status: 'finished' }));
      events.push(delta({ content: t, phase: 'answer', status: 'typing' }));
    });
    if (tokens.length <= other.length) events.push(other2({ content: '', phase: 'answer', status: 'finished' }));
  } else {
    for (const t of tokens) events.push(delta({ content: t, phase: 'answer', status: 'typing' }));
  }
  for (const img of images) {
    // A generated image (docs/sites/qwen.md "Images"): the `image_gen` phase's content is its CDN address.
    events.push(delta({ content: '', phase: 'image_gen', status: 'typing', extra: { output_image_hw: [[1024, 1024]] } }));
    events.push(delta({ content: img.url, phase: 'image_gen', status: 'typing', extra: { output_image_hw: [[1024, 1024]] } }));
    events.push(delta({ content: '', phase: 'image_gen', status: 'finished' }));
  }
  events.push(data({ choices: [{ delta: { content: '', role: 'assistant', status: 'finished', phase: 'answer' } }], response_id: 'r1', usage: { input_tokens: 12, output_tokens: tokens.length } }));
  events.push(data('[DONE]').replace('"[DONE]"', '[DONE]'));
  return hostileSse(events, rng);
}

function legacyStream(rng, tokens, prompt) {
  const data = (obj) => sseEvent({ data: JSON.stringify(obj) });
  const events = [];
  const texts = cumulative(tokens);
  texts.forEach((text, i) => {
    const last = i === texts.length - 1;
    events.push(data({
      sessionId: 's1', msgId: 'm1', parentMsgId: 'p0', msgStatus: last ? 'finished' : 'generating', contentType: 'text',
      contents: [{ contentType: 'text', role: 'assistant', content: text, status: last ? 'finished' : 'generating' }], canShare: true, canFeedback: true,
    }));
  });
  if (texts.length === 0) events.push(data({ sessionId: 's1', msgId: 'm1', msgStatus: 'finished', contents: [], prompt }));
  events.push('data: [DONE]\n\n');
  return hostileSse(events, rng);
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  if (intlVariants.includes(variant)) return intlStream(rng, variant, tokens, thinkTokens, args.images || []);
  if (variant === 'legacy-tongyi') return legacyStream(rng, tokens, args.prompt || '你好');
  return cnStream(rng, variant, tokens, thinkTokens);
}

function page(opts) {
  return renderPage({
    title: '千问 - 通义千问',
    body: `<div id="root" class="chat-layout">
  <div class="chat-messages mock-messages" id="chat-messages"></div>
  <div class="chat-message-input" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px">
    <textarea id="chat-input" class="ant-input chat-input-textarea" placeholder="向千问提问" rows="2" style="width:100%;border:0;resize:none;font:inherit"></textarea>
    <div style="display:flex;justify-content:flex-end">
      <button id="send-message-button" type="button" aria-label="发送" class="operateBtn--send">➤</button>
    </div>
  </div>
</div>`,
    input: { selector: 'textarea#chat-input', kind: 'react-textarea' },
    send: { selector: 'button#send-message-button' },
    messages: '#chat-messages',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      if (ctx.host === 'chat.qwen.ai') {
        return { url: '/api/v2/chat/completions?chat_id=c1', method: 'POST', headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer mock', 'source': 'web' },
          body: JSON.stringify({ stream: true, version: '2.1', incremental_output: true, chat_id: 'c1', chat_mode: 'normal', model: 'qwen3-max', parent_id: null,
            messages: [{ fid: ctx.uuid(), parentId: null, childrenIds: [], role: 'user', content: prompt, user_action: 'chat', files: (ctx.files || []).map(function (f) { return { type: /^image\\//.test(f.type) ? 'image' : 'file', id: f.id, name: f.name }; }), timestamp: Math.floor(ctx.now / 1000),
              models: ['qwen3-max'], chat_type: 't2t', feature_config: { thinking_enabled: false, output_schema: 'phase', thinking_budget: 81920 },
              extra: { meta: { subChatType: 't2t' } }, sub_chat_type: 't2t' }], timestamp: Math.floor(ctx.now / 1000) }) };
      }
      if (ctx.host === 'tongyi.aliyun.com') {
        return { url: '/dialog/conversation', method: 'POST', headers: { 'Content-Type': 'application/json', 'Accept': 'text/event-stream' },
          body: JSON.stringify({ mode: 'chat', model: '', action: 'next', userAction: 'chat', requestId: ctx.uuid().replace(/-/g, ''), sessionId: '', sessionType: 'text_chat',
            parentMsgId: '', params: { fileUploadBatchId: ctx.uuid() }, contents: [{ content: prompt, contentType: 'text', role: 'user' }].concat((ctx.files || []).map(function (f) { return { content: f.id, contentType: /^image\\//.test(f.type) ? 'image' : 'file', role: 'user' }; })) }) };
      }
      return { url: '/api/v2/chat?biz_id=ai_qwen&chat_client=h5&device=pc&fr=pc&pr=qwen&la=zh-CN&tz=Asia/Shanghai&nonce=' + ctx.turn + '&timestamp=' + ctx.now,
        method: 'POST', headers: { 'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream, text/plain, */*', 'x-platform': 'pc_tongyi' },
        body: JSON.stringify({ deep_search: '0', req_id: ctx.uuid().replace(/-/g, ''), model: 'Qwen3-Coder', scene: 'chat', session_id: '6c330dfa5257472b958a119c99b634b4',
          sub_scene: 'chat', temporary: false, messages: (ctx.files || []).map(function (f) { return { content: f.id, mime_type: f.type, meta_data: { file_name: f.name } }; }).concat([{ content: prompt, mime_type: 'text/plain', meta_data: { ori_query: prompt } }]), from: 'default',
          topic_id: '29e8d4897d444ddcb20c8a88ff2b026a', parent_req_id: '0', scene_param: 'first_turn', chat_client: 'h5', client_tm: String(ctx.now),
          protocol_version: 'v2', biz_id: 'ai_qwen' }) };
    }`,
    upload,
  }, opts);
}

const meta = {};
for (const v of cnVariants) meta[v] = { contentType: 'text/event-stream;charset=UTF-8', hosts: ['www.qianwen.com', 'qianwen.com'], path: '/api/v2/chat' };
for (const v of intlVariants) meta[v] = { contentType: 'text/event-stream; charset=utf-8', hosts: ['chat.qwen.ai'], path: '/api/v2/chat/completions' };
meta['legacy-tongyi'] = { contentType: 'text/event-stream;charset=UTF-8', hosts: ['tongyi.aliyun.com'], path: '/dialog/conversation' };

export default {
  name: 'qianwen',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['tongyi.aliyun.com', 'www.qianwen.com', 'chat.qwen.ai'],
  imageHosts: ['cdn.qwenlm.ai'], // generated images (docs/files.md "Back / 回传")
  page,
  // CSP: www.qianwen.com / tongyi.aliyun.com / chat.qwen.ai: no published policy (shared/reference/site-runtime.md §1b) —
  // so the strict stand-in: nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(['tongyi.aliyun.com', 'www.qianwen.com', 'qianwen.com', 'chat.qwen.ai']),
  endpoint: { method: 'POST', path: /^(\/api\/v2\/chat|\/api\/v2\/chat\/completions|\/dialog\/conversation)$/ },
  variants,
  variantMeta: meta,
  reasoningVariants: ['cn-deep-think', 'intl-thinking'],
  errorVariants: { 'cn-error': '20006', 'intl-error': 'RateLimited' },
  stream,
  contentType: 'text/event-stream;charset=UTF-8',
};
