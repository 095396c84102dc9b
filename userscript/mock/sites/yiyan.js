// Mock yiyan.baidu.com (文心一言): a textarea composer (`#dialogue-input`, the send button its parent's next
// sibling) and `POST /eb/chat/conversation/v2` answered like docs/sites/yiyan.md: `event:major` session metadata,
// `event:message` frames with incremental `data.content` and `is_end: 0`, then the `is_end: 1` frame holding the
// whole answer in `tokens_all` (sent twice, as in the public capture); with reasoning (`event:thought` frames and
// a `step`, inferred shape), and a top-level error code.

import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { yiyan as upload } from './uploads.js';
import { hostileSse, prepare, sseEvent } from './lib/wire.js';

const variants = ['default', 'thinking', 'error-code'];
const HOSTS = ['yiyan.baidu.com'];

function messageData(fields) {
  return {
    content: '', text: '', stop: 0, tips: '', wordGengStatus: false, pluginInfo: null, isIncr: true, isBan: false, flag: 0,
    logid: '118000005254496251', usageVo: { plugins: null, input_tokens: 1, prompt_tokens: 0, output_tokens: 0 },
    content_type: 'text', sent_id: 0, is_end: 0, is_truncated: 0, error_code: 0, chat_id: '167936782', ...fields,
  };
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens, answer } = prepare(args, variants);
  const asked = String(args.prompt || '');
  const ev = (event, obj) => sseEvent({ event, data: JSON.stringify(obj) }, { space: false });
  const ok = (data) => ({ code: 0, msg: 'success', data, logId: null });
  const events = [ev('major', ok({
    createSessionResponseVoCommonResult: { code: 0, msg: 'success', data: { sessionId: '1a2b3c', sessionName: asked.slice(0, 20) || '新对话' } },
    createChatResponseVoCommonResult: { code: 0, msg: 'success', data: { botChat: { id: '167936782', role: 'robot', parent: '0' }, userChat: { id: '167936781', role: 'user', message: [{ content: asked }] } } },
  }))];
  if (variant === 'error-code') {
    events.push(ev('message', { code: 2003, msg: '当前提问人数过多，请稍后再试', data: null, logId: null }));
    return hostileSse(events, rng);
  }
  if (variant === 'thinking') {
    thinkTokens.forEach((t, i) => events.push(ev('thought', ok({ content: t, is_end: 0, sent_id: i + 1 }))));
    events.push(ev('thought', ok({ content: '', is_end: 1, sent_id: thinkTokens.length + 1 })));
    events.push(ev('step', ok({ stepName: 'answer', status: 'start' })));
  }
  const streamed = tokens.slice(0, -1);
  const last = tokens.length ? tokens[tokens.length - 1] : '';
  streamed.forEach((t, i) => events.push(ev('message', ok(messageData({ content: t, text: t, sent_id: i + 1 })))));
  const final = ok(messageData({ content: last, text: last, sent_id: tokens.length, is_end: 1, tokens_all: answer }));
  events.push(ev('message', final));
  events.push(ev('message', final));
  return hostileSse(events, rng);
}

function page(opts) {
  return renderPage({
    title: '文心一言',
    body: `<div id="root"><div class="pageWrapper">
  <div class="dialogueList mock-messages" id="DIALOGUE_CONTAINER_ID"></div>
  <div class="inputArea" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px;display:flex;gap:8px;align-items:flex-end">
    <div class="inputWrapper" style="flex:1"><textarea id="dialogue-input" class="ant-input wBs12eIN" placeholder="输入问题或“/”获取模板，Enter发送，Shift+Enter换行" rows="2" style="width:100%;border:0;resize:none;font:inherit"></textarea></div>
    <div id="sendBtn" class="sendBtn__VbHmT" role="button" tabindex="0" style="width:36px;height:36px;border-radius:18px;background:#4e6ef2;color:#fff;text-align:center;line-height:36px"><span class="sendInner__QwmaW">➤</span></div>
  </div>
</div></div>`,
    input: { selector: '#dialogue-input', kind: 'react-textarea' },
    send: { selector: '#sendBtn' },
    messages: '#DIALOGUE_CONTAINER_ID',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      return { url: '/eb/chat/conversation/v2', method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Accept': 'text/event-stream,application/json, text/event-stream', 'Acs-Token': 'mock-acs-token' },
        body: JSON.stringify({ code: 0, deviceType: 'pc', file_ids: (ctx.files || []).map(function (f) { return f.id; }), jt: '', model: 'EB45T', msg: '', newAppSessionId: '',
          parentChatId: ctx.turn > 1 ? String(ctx.turn * 2) : '0', pluginInfo: [], plugins: [], sessionId: '', sessionName: prompt.slice(0, 20),
          sign: 'mock-acs-token', text: prompt, timestamp: ctx.now, type: 10, isNewYiyan: true }) };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'yiyan',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: HOSTS,
  page,
  // CSP: yiyan.baidu.com: no published policy on record (docs/sites/yiyan.md) — so the strict stand-in:
  // nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(HOSTS),
  endpoint: { method: 'POST', path: '/eb/chat/conversation/v2' },
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'text/event-stream;charset=UTF-8', hosts: HOSTS }])),
  reasoningVariants: ['thinking'],
  errorVariants: { 'error-code': '2003' },
  stream,
  contentType: 'text/event-stream;charset=UTF-8',
};
