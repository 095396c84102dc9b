// Mock gemini.google.com: a Quill `rich-textarea` composer posting the `f.req` form by XHR (as the real page
// does) to StreamGenerate, answered with `)]}'` + length-prefixed cumulative frames (reference §7): plain,
// with thinking text at [37], ending by status/`{"44":true}` or only by the body closing, and the 1037 error.

import { NONCE } from './lib/csp.js';
import { PAGE_TT_POLICY, renderPage } from './lib/page.js';
import { gemini as upload } from './uploads.js';
import { cumulative, hostileChunks, prepare, utf8 } from './lib/wire.js';

const variants = ['default', 'thinking', 'eof-only', 'error-1037'];
const IDS = ['c_66fc1629be0bc83a', 'r_a9283965aa789ef0'];

/** One length-prefixed frame; the length is the UTF-16 length of "\n" + JSON, as gpt4free reads it. */
function frame(value) {
  const json = JSON.stringify(value);
  return `${json.length + 1}\n${json}\n`;
}

function candidate(text, status, reasoning) {
  const c = ['rc_c1300196cbdf6021', [text], null, null, null, null, null, null, [status], 'en'];
  if (reasoning !== undefined) {
    while (c.length < 37) c.push(null);
    c.push([[reasoning]]);
  }
  return c;
}

const wrb = (payload) => [['wrb.fr', null, JSON.stringify(payload)]];

/** Where Gemini's text marks a generated image (docs/sites/gemini.md "Images"). */
const placeholder = (i) => `http://googleusercontent.com/image_generation_content/${i}`;

/** A candidate carrying generated images at [12][7][0] (address at [k][0][3][3], description at [k][3][5][0]). */
function withImages(c, images) {
  while (c.length < 13) c.push(null);
  const generated = images.map((img, i) => [[null, null, null, [null, 1, `image_${i}.png`, img.url, null, `token_${i}`]], null, null,
    [null, null, null, null, null, [img.alt || ''], String(i + 1)]]);
  c[12] = [null, null, null, null, null, null, null, [generated]];
  return c;
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens } = prepare(args, variants);
  let body = ")]}'\n\n";
  if (variant === 'error-1037') {
    body += frame([['wrb.fr', null, null, null, null, [13, null, [['type.googleapis.com/assistant.boq.bard.application.BardErrorInfo', [1037]]]]]]);
    body += frame([['di', 57], ['af.httprm', 56, '-2271787830452958131', 2]]);
    body += frame([['e', 4, null, null, 215]]);
    return hostileChunks(utf8(body), rng);
  }
  const thinks = variant === 'thinking' ? cumulative(thinkTokens) : [];
  const finalThink = thinks.length ? thinks[thinks.length - 1] : undefined;
  for (const t of thinks) body += frame(wrb([null, IDS, null, null, [candidate('', 1, t)]]));
  const texts = cumulative(tokens);
  if (texts.length === 0) texts.push('');
  texts.forEach((text, i) => {
    const last = i === texts.length - 1 && variant !== 'eof-only' && !(args.images || []).length;
    body += frame(wrb([null, IDS, null, null, [candidate(text, last ? 2 : 1, finalThink)]]));
    if (rng.chance(0.15)) body += frame(wrb([null, IDS, null, null, [candidate(text, 1, finalThink)]])); // repeated snapshot
  });
  const images = args.images || [];
  if (images.length) {
    // The text then names the image by its placeholder, cut across two frames; the last frames carry the image.
    const base = texts[texts.length - 1];
    const full = `${base}\n\n${images.map((_, i) => placeholder(i)).join('\n')}`;
    const cut = base.length + 2 + 20;
    body += frame(wrb([null, IDS, null, null, [candidate(full.slice(0, cut), 1, finalThink)]]));
    body += frame(wrb([null, IDS, null, null, [withImages(candidate(full, 1, finalThink), images)]]));
    body += frame(wrb([null, IDS, null, null, [withImages(candidate(full, variant === 'eof-only' ? 1 : 2, finalThink), images)]]));
  }
  if (variant !== 'eof-only') body += frame(wrb([null, IDS, { 44: true }]));
  body += frame([['di', 192], ['af.httprm', 191, '8196459853603899163', 2]]);
  body += frame([['e', 4, null, null, 216]]);
  return hostileChunks(utf8(body), rng);
}

function page(opts) {
  return renderPage({
    title: 'Google Gemini',
    lang: 'en',
    body: `<chat-app id="app-root">
  <div class="conversation-container mock-messages" id="chat-history"></div>
  <input-area-v2 class="input-area" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:28px;padding:12px;display:block">
    <div xapfileselectordropzone class="xap-uploader-dropzone" style="display:block">
    <rich-textarea class="text-input-field_textarea" style="display:block">
      <div class="ql-editor ql-blank textarea new-input-ui" data-gramm="false" contenteditable="true" role="textbox" aria-multiline="true"
        aria-label="Enter a prompt here" data-placeholder="Ask Gemini"></div>
    </rich-textarea>
    </div>
    <div class="trailing-actions-wrapper" style="display:flex;justify-content:flex-end">
      <button mat-icon-button class="mat-mdc-icon-button send-button submit" aria-label="Send message" mattooltip="Submit" type="button">➤</button>
    </div>
  </input-area-v2>
</chat-app>`,
    input: { selector: 'rich-textarea .ql-editor[contenteditable="true"]', kind: 'quill' },
    send: { selector: 'button.send-button' },
    messages: '#chat-history',
    transport: 'xhr',
    request: `function (prompt, ctx) {
      var attached = (ctx.files || []).map(function (f) { return [[f.id, 1], f.name]; });
      var inner = [[prompt, 0, null, attached.length ? attached : null, null, null, 0], ['en'], ['', '', '', null, null, null, null, null, null, '']];
      while (inner.length < 97) inner.push(null);
      var freq = JSON.stringify([null, JSON.stringify(inner)]);
      return { url: '/_/BardChatUi/data/assistant.lamda.BardFrontendService/StreamGenerate?bl=boq_assistant-bard-web-server_20251118.06_p0&f.sid=-1234567890&hl=en&_reqid=' + (100000 + ctx.turn) + '&rt=c',
        method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded;charset=UTF-8', 'X-Same-Domain': '1' },
        body: 'f.req=' + encodeURIComponent(freq) + '&at=' + encodeURIComponent('AJvLN6M:mock') + '&' };
    }`,
    upload,
  }, opts);
}

export default {
  name: 'gemini',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['gemini.google.com'],
  page,
  // CSP of gemini.google.com (shared/reference/site-runtime.md §1b): Trusted Types enforced ("This document
  // requires 'TrustedHTML' assignment", Nagi-ovo/voyager#548, 2026-03-29; magicoflolis/Userscript-Plus#82,
  // 2026-08-12) and a nonce-based script-src ("its hash, its nonce, or 'unsafe-inline' does not appear in the
  // script-src directive", HenryGetz/GeminiPilot#6, 2025-05-10); the long 'unsafe-inline' list seen in consoles
  // is the Report-Only policy (webcompat/web-bugs#205438). `trusted-types` names only the page's own policies
  // (Google's goog#html and this mock's), so a userscript's createPolicy (or 'default') is refused, as on
  // sites with such an allowlist (PlasmoHQ/plasmo#1021). connect-src is unknown: own origins and Google's.
  csp: {
    'require-trusted-types-for': ["'script'"],
    'trusted-types': ['goog#html', PAGE_TT_POLICY],
    'script-src': [NONCE, "'report-sample'"],
    'connect-src': ["'self'", 'https://*.google.com', 'https://*.googleapis.com', 'https://*.gstatic.com', 'wss://*.google.com'],
    'object-src': ["'none'"],
    'base-uri': ["'self'"],
  },
  imageHosts: ['lh3.googleusercontent.com'],
  endpoint: { method: 'POST', path: /^(\/u\/\d+)?\/_\/BardChatUi\/data\/assistant\.lamda\.BardFrontendService\/StreamGenerate$/ },
  variants,
  variantMeta: Object.fromEntries(variants.map((v) => [v, { contentType: 'application/json; charset=utf-8', hosts: ['gemini.google.com'] }])),
  reasoningVariants: ['thinking'],
  errorVariants: { 'error-1037': '1037' },
  eofIsDone: true,
  stream,
  contentType: 'application/json; charset=utf-8',
};
