// Mock chatglm.cn: a textarea composer and `/chatglm/backend-api/assistant/stream` answered in both text
// encodings the sources report (reference §9): the 2026-09 capture (incremental `init` pieces, then the full
// text in `finish` parts, repeated), the same with reasoning (`think` items, `event: message` lines), the
// 2024-25 cumulative snapshots (with and without `data: [DONE]`), and an `intervene` stop.

import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { chatglm as upload } from './uploads.js';
import { cumulative, hostileSse, prepare, sseEvent } from './lib/wire.js';

const variants = ['default', 'thinking', 'cumulative', 'cumulative-done', 'intervene'];

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens, answer, reasoning } = prepare(args, variants);
  const withEvent = variant === 'thinking';
  const data = (obj) => sseEvent(withEvent ? { event: 'message', data: JSON.stringify(obj) } : { data: JSON.stringify(obj) });
  const frame = (status, parts) => ({ id: 'a', conversation_id: 'c1', assistant_id: '65940acff94777010aa6b796', status, parts, last_error: {}, meta_data: {} });
  const part = (status, content) => ({ id: 'a', logic_id: 'L1', role: 'assistant', status, content, meta_data: {} });
  const events = [data(frame('init', []))];
  if (variant === 'intervene') {
    events.push(data(frame('init', [part('init', [{ type: 'text', text: tokens[0] || '' }])])));
    events.push(data({ ...frame('intervene', []), last_error: { intervene_text: '这个问题我暂时无法回答，换个话题吧', code: 'intervene' } }));
    return hostileSse(events, rng);
  }
  if (variant === 'cumulative' || variant === 'cumulative-done') {
    const texts = cumulative(tokens);
    texts.forEach((t) => {
      events.push(data(frame('init', [part('init', [{ type: 'text', text: t }])])));
      if (rng.chance(0.2)) events.push(data(frame('init', [part('init', [{ type: 'text', text: t }])])));
    });
    events.push(data(frame('finish', [part('finish', [{ type: 'text', text: answer }])])));
    if (variant === 'cumulative-done') events.push('data: [DONE]\n\n');
    return hostileSse(events, rng);
  }
  if (variant === 'thinking') {
    for (const t of thinkTokens) events.push(data(frame('init', [part('init', [{ type: 'think', think: t }])])));
  }
  for (const t of tokens) events.push(data(frame('init', [part('init', [{ type: 'text', text: t }])])));
  const full = variant === 'thinking' ? [{ type: 'think', think: reasoning }, { type: 'text', text: answer }] : [{ type: 'text', text: answer }];
  // An image item (shared/reference/sse-formats.md §9: `image` with `image[].image_url`), in the finished part.
  if ((args.images || []).length) full.push({ type: 'image', image: args.images.map((img) => ({ image_url: img.url })), status: 'finish' });
  events.push(data(frame('init', [part('finish', full)])));
  events.push(data(frame('init', [part('finish', full)])));
  events.push(data(frame('finish', [part('finish', full)])));
  return hostileSse(events, rng);
}

function page(opts) {
  return renderPage({
    title: '智谱清言',
    body: `<div id="app" class="chat-container">
  <div class="conversation-list mock-messages" id="conversation-list"></div>
  <div class="input-wrap" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px">
    <div class="input-box-inner">
      <textarea class="scroll-display-none" placeholder="向清言提问..." rows="1" style="width:100%;border:0;resize:none;font:inherit"></textarea>
      <div style="display:flex;justify-content:flex-end">
        <div class="enter" role="button" tabindex="0"><img class="enter_icon" alt="发送" src="data:image/gif;base64,R0lGODlhAQABAAAAACw="></div>
      </div>
    </div>
  </div>
</div>`,
    input: { selector: '.input-box-inner textarea', kind: 'react-textarea' },
    send: { selector: '.input-box-inner .enter' },
    messages: '#conversation-list',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      return { url: '/chatglm/backend-api/assistant/stream', method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Accept': 'text/event-stream', 'Authorization': 'Bearer mock', 'X-Device-Id': 'mock-device',
          'X-Request-Id': ctx.uuid(), 'X-Nonce': ctx.uuid().replace(/-/g, ''), 'X-Timestamp': String(ctx.now), 'X-Sign': 'mock' },
        body: JSON.stringify({ assistant_id: '65940acff94777010aa6b796', conversation_id: '', project_id: '', chat_type: 'user_chat',
          meta_data: { cogview: { rm_label_watermark: false }, is_test: false, input_question_type: 'xxxx', channel: '', draft_id: '', chat_mode: 'zero',
            is_networking: false, quote_log_id: '', platform: 'pc' },
          messages: [{ role: 'user', content: [{ type: 'text', text: prompt }].concat((ctx.files || []).map(function (f) { return { type: /^image\\//.test(f.type) ? 'image' : 'file', file_id: f.id }; })) }] }) };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'chatglm',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['chatglm.cn'],
  page,
  // CSP: chatglm.cn: no published policy (shared/reference/site-runtime.md §1b) —
  // so the strict stand-in: nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(['chatglm.cn']),
  endpoint: { method: 'POST', path: '/chatglm/backend-api/assistant/stream' },
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'text/event-stream;charset=UTF-8', hosts: ['chatglm.cn'] }])),
  reasoningVariants: ['thinking'],
  errorVariants: { intervene: 'intervene' },
  stream,
  contentType: 'text/event-stream;charset=UTF-8',
};
