// Mock yuanbao.tencent.com: a Quill editor composer (request sent by XHR with a text/plain JSON body, like
// the real page) and `/api/chat/{cid}` answered with Yuanbao's frames (reference §3): labels, markers,
// meta, deep-think `think` frames, legacy `reasoner` frames, inline markup, and the error frame.

import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { yuanbao as upload } from './uploads.js';
import { hostileSse, prepare, sseEvent } from './lib/wire.js';

const variants = ['default', 'deep-think', 'reasoner-legacy', 'error'];

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  const data = (d) => sseEvent({ data: typeof d === 'string' ? d : JSON.stringify(d) });
  const label = (name) => sseEvent({ event: 'speech_type', data: name });
  const events = [data({ type: 'text' }), label('status')];
  if (variant === 'error') {
    events.push(data({ type: 'error', msg: '回答拉取失败，正在重试', code: '21007', error: {} }));
    return hostileSse(events, rng);
  }
  if (variant === 'deep-think') {
    events.push(label('reasoner'));
    for (const t of thinkTokens) events.push(data({ type: 'think', title: '思考中...', iconType: 9, content: t, status: 1 }));
    events.push(data({ type: 'think', title: '已深度思考', iconType: 9, content: '', status: 2 }));
  }
  if (variant === 'reasoner-legacy') {
    events.push(label('reasoner'));
    for (const t of thinkTokens) events.push(data({ type: 'reasoner', content: t }));
  }
  events.push(label('text'));
  tokens.forEach((t, i) => {
    events.push(data({ type: 'text', msg: t }));
    if (variant === 'deep-think' && i === 0) events.push(data({ type: 'text', msg: '[](@replace=1)' }));
  });
  events.push(data({ type: 'tips', status: 0, internetFlag: 0, targetFunctionId: 'autoInternetSearch' }));
  events.push(data('[plugin: ]'));
  events.push(data('[MSGINDEX:10]'));
  events.push(data({
    type: 'meta', messageId: 'x', stopReason: 'stop', endConv: false, chainID: 'c1', oneAgentId: '',
    tokenUsageInfo: { promptTokens: 12, completionTokens: 34, totalTokens: 46 },
  }));
  events.push(data('[TRACEID:94e8eb1cf9ac8f2e65f12560abe6042d]'));
  events.push(data('[DONE]'));
  return hostileSse(events, rng);
}

function page(opts) {
  return renderPage({
    title: '腾讯元宝 - 轻松工作 多点生活',
    body: `<div id="app" class="yb-layout">
  <div class="agent-chat__list mock-messages" id="chat-list"></div>
  <div class="agent-dialogue__content--common__input" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px">
    <div class="chat-input-editor ql-container">
      <div class="ql-editor ql-blank" contenteditable="true" role="textbox" data-gramm="false" data-placeholder="有问题，尽管问，shift+enter换行"></div>
    </div>
    <div class="agent-dialogue__tool" style="display:flex;justify-content:flex-end">
      <a id="yuanbao-send-btn" class="style__send-btn___ZsLmU" href="javascript:void(0)" role="button">发送</a>
    </div>
  </div>
</div>`,
    input: { selector: 'div.ql-editor[contenteditable="true"]', kind: 'quill' },
    send: { selector: 'a#yuanbao-send-btn' },
    messages: '#chat-list',
    transport: 'xhr',
    request: `function (prompt, ctx) {
      return {
        url: '/api/chat/6b1c7f0e-0d4e-4a3f-9c2b-8e5d7a1f3c20',
        method: 'POST',
        headers: { 'Content-Type': 'text/plain;charset=UTF-8' },
        body: JSON.stringify({ model: 'gpt_175B_0404', prompt: prompt, plugin: 'Adaptive', displayPrompt: prompt, displayPromptType: 1,
          agentId: 'naQivTmsDa', isTemporary: false, projectId: '', chatModelId: 'hunyuan_gpt_175B_0404',
          supportFunctions: ['openAutoSearchSwitch', 'autoInternetSearch'], docOpenid: '',
          options: { imageIntention: { needIntentionModel: true, backendUpdateFlag: 2, intentionStatus: true } }, multimedia: (ctx.files || []).map(function (f) { return { type: /^image\\//.test(f.type) ? 'image' : 'doc', fileName: f.name, resourceId: f.id }; }), supportHint: 1,
          chatModelExtInfo: JSON.stringify({ modelId: 'hunyuan_gpt_175B_0404', subModelId: '', supportFunctions: { internetSearch: '' }, internetSearch: 'autoInternetSearch' }),
          applicationIdList: [], chatSource: 'prompt', version: 'v2', extReportParams: null, isAtomInput: false,
          conversationId: '6b1c7f0e-0d4e-4a3f-9c2b-8e5d7a1f3c20', offsetOfHour: 8, offsetOfMinute: 0 })
      };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'yuanbao',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['yuanbao.tencent.com'],
  page,
  // CSP: yuanbao.tencent.com: no published policy (shared/reference/site-runtime.md §1b) —
  // so the strict stand-in: nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(['yuanbao.tencent.com']),
  endpoint: { method: 'POST', path: /^\/api\/chat\/[A-Za-z0-9_-]+$/ },
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'text/event-stream; charset=utf-8', hosts: ['yuanbao.tencent.com'] }])),
  reasoningVariants: ['deep-think', 'reasoner-legacy'],
  errorVariants: { error: '21007' },
  stream,
  contentType: 'text/event-stream; charset=utf-8',
};
