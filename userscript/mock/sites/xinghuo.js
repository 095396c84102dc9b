// Mock xinghuo.xfyun.cn (讯飞星火): the chat page's textarea composer (`chat_textAreaWrapper` / `chat_send`
// CSS-module classes) sending a multipart FormData to `POST /iflygpt-chat/u/chat_message/chat`, answered like
// docs/sites/xinghuo.md: `data:` lines without a space, each one base64 piece of the answer's UTF-8, then
// `data:<end>` and the `…<sid>` line; with X1 deep-think pieces (`<deep_x1>` prefix, inferred), a tool-metadata
// piece before the text, the `[error]` + JSON + `<end>` error, and `[geeError]` (captcha).

import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { xinghuo as upload } from './uploads.js';
import { hostileSse, prepare, utf8 } from './lib/wire.js';

const variants = ['default', 'thinking', 'tool', 'error', 'gee-error'];
const HOSTS = ['xinghuo.xfyun.cn'];

function b64(text) {
  return Buffer.from(utf8(text)).toString('base64');
}

// The site writes `data:` with no space and no `event:`; a record per line.
const line = (payload) => `data:${payload}\n\n`;

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  const events = [];
  if (variant === 'gee-error') {
    events.push(line('[geeError]'));
    events.push(line('{"key":10014,"descr":"请完成验证"}'));
    events.push(line('<end>'));
    return hostileSse(events, rng);
  }
  if (variant === 'error') {
    if (tokens[0]) events.push(line(b64(tokens[0])));
    events.push(line('[error]'));
    events.push(line('{"key":20002,"descr":"今日对话次数已用完，请明天再来"}'));
    events.push(line('<end>'));
    return hostileSse(events, rng);
  }
  if (variant === 'thinking') {
    for (const t of thinkTokens) events.push(line(b64(`<deep_x1>${t}`)));
  }
  if (variant === 'tool') {
    events.push(line(b64(JSON.stringify({ allTool: [{ name: 'ifly_search', status: 'done' }], query: String(args.prompt || '') }))));
  }
  for (const t of tokens) events.push(line(b64(t)));
  events.push(line('<end>'));
  events.push(line('cht000b9f1c@dx193b2e1d0c2b4a2540<sid>'));
  return hostileSse(events, rng);
}

function page(opts) {
  return renderPage({
    title: '讯飞星火认知大模型',
    body: `<div id="root"><div class="chat_chatContainer__PEdkm">
  <div class="chat_chatContent__Far4j mock-messages" id="chat-content"></div>
  <div class="chat_bottomWrapper__lbzza" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px">
    <div class="chat_inputArea__ntZoe" style="display:flex;gap:8px;align-items:flex-end">
      <div class="chat_textAreaWrapper__H3e95" style="flex:1"><textarea maxlength="7000" placeholder="请在此输入您要提问的内容" style="width:100%;height:3rem;border:0;resize:none;font:inherit"></textarea></div>
      <div class="chat_send__dBrgV" role="button" tabindex="0" style="width:64px;height:32px;border-radius:16px;background:#3e7cf7;color:#fff;text-align:center;line-height:32px">发送</div>
    </div>
  </div>
</div></div>`,
    input: { selector: 'div[class*="chat_textAreaWrapper"] textarea', kind: 'react-textarea' },
    send: { selector: 'div[class*="chat_send__"]' },
    messages: '#chat-content',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      var form = new FormData();
      form.append('fd', String(ctx.now).slice(-6));
      form.append('isBot', '0');
      form.append('clientType', '1');
      form.append('text', prompt);
      (ctx.files || []).forEach(function (f) { form.append('fileUrl', f.id); });
      form.append('chatId', '985818485');
      form.append('GtToken', 'RzAwAGPhPKm-mock-gee-token');
      return { url: '/iflygpt-chat/u/chat_message/chat', method: 'POST',
        headers: { 'Accept': 'text/event-stream', 'Botweb': '0', 'Challenge': 'undefined', 'Seccode': '', 'Validate': 'undefined' },
        body: form };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'xinghuo',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: HOSTS,
  page,
  // CSP: xinghuo.xfyun.cn: no published policy on record (docs/sites/xinghuo.md) — so the strict stand-in:
  // nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(HOSTS),
  endpoint: { method: 'POST', path: '/iflygpt-chat/u/chat_message/chat' },
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'text/event-stream;charset=UTF-8', hosts: HOSTS }])),
  reasoningVariants: ['thinking'],
  errorVariants: { error: '20002', 'gee-error': 'geeError' },
  // The frames are base64, not JSON: the hostile-chunking test looks for cuts inside a piece instead.
  base64Frames: true,
  stream,
  contentType: 'text/event-stream;charset=UTF-8',
};
