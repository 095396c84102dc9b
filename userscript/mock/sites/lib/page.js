// The HTML of a mock chat page: the site's composer (input + send button) and a small in-page runtime that
// behaves like the real front end: React-style controlled textareas (state changes only through real input
// events, like React's value tracker), contenteditable editors with their own document model
// (ProseMirror/Quill read DOM mutations back; Lexical reverts mutations it did not make), send by button or
// Enter, then POST of the site's real request body and a streamed read (fetch + getReader, or XHR progress).
// The runtime uses DOM APIs only (no innerHTML or other HTML string sinks), so it runs on a page that
// enforces Trusted Types (Gemini), and its <script>/<style> carry the response's CSP nonce when given.

/** The Trusted Types policy name the page runtime may create (a site's `trusted-types` directive lists it). */
export const PAGE_TT_POLICY = 'mock-page';

/** What the page runtime needs of a site's `upload` (lib/upload.js): not its server routes or its code. */
function pageFacts({ api, send, ...facts }) {
  return facts;
}

/**
 * Render a page. `site` holds: title, lang, css, body (layout HTML containing the composer and a message
 * list), input {selector, kind: react-textarea|prosemirror|quill|lexical}, send {selector}, messages
 * (selector of the message list), transport (fetch|xhr), request (JS source of
 * `function (prompt, ctx) { return {url, method, headers, body} }`).
 * `nonce`: the nonce of the response's Content-Security-Policy (none: plain `<script>`, as without a CSP).
 */
export function renderPage(site, { nonce } = {}) {
  const nonceAttr = nonce ? ` nonce="${nonce}"` : '';
  const config = {
    input: site.input,
    send: site.send,
    messages: site.messages,
    transport: site.transport || 'fetch',
    upload: site.upload ? pageFacts(site.upload) : null,
  };
  return `<!doctype html>
<html lang="${site.lang || 'zh-CN'}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${site.title}</title>
<style${nonceAttr}>
body{margin:0;font:15px/1.5 system-ui,-apple-system,"PingFang SC","Microsoft YaHei",sans-serif;background:#fff;color:#222}
.mock-messages{max-width:760px;margin:0 auto;padding:16px 16px 180px}
.mock-msg{margin:12px 0;padding:10px 14px;border-radius:12px;white-space:pre-wrap;word-break:break-word}
.mock-msg.user{background:#eef3ff;margin-left:20%}
.mock-msg.assistant{background:#f6f6f6}
.mock-msg pre{margin:6px 0 0;font-size:11px;color:#777;max-height:120px;overflow:auto}
[contenteditable]{outline:none;min-height:24px}
[contenteditable] p{margin:0}
[aria-disabled="true"],button:disabled{opacity:.4;cursor:not-allowed}
${site.css || ''}
</style>
</head>
<body>
${site.body}
<script${nonceAttr}>
(function () {
  'use strict';
  var cfg = ${JSON.stringify(config)};
  var buildRequest = ${site.request};
  var input = document.querySelector(cfg.input.selector);
  var sendButton = document.querySelector(cfg.send.selector);
  var list = document.querySelector(cfg.messages);
  var uploadFile = ${site.upload ? site.upload.send : 'null'};
  var model = '';
  var busy = false;
  var turn = 0;
  var uploads = { pending: 0, done: [], list: null }; // cfg.upload: files the composer holds

  function uuid() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return 'xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx'.replace(/[xy]/g, function (c) {
      var r = Math.random() * 16 | 0; return (c === 'x' ? r : (r & 3 | 8)).toString(16);
    });
  }

  // ---- drift (lib/drift.js): the moved endpoint, and the reply rendered as the real site's markup
  var drift = (/[?&]mock_drift=([\\w-]+)/.exec(location.search) || [])[1] || '';

  function moveEndpoint(url) {
    var u = new URL(url, location.href);
    u.pathname = '/drift-v2' + u.pathname;
    return u.href;
  }

  function h(tag, attrs, kids) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    (kids == null ? [] : [].concat(kids)).forEach(function (k) {
      el.appendChild(typeof k === 'string' ? document.createTextNode(k) : k);
    });
    return el;
  }

  /** Inline markdown: **bold** and \`code\`. */
  function inline(text) {
    var out = [];
    text.split(/(\\*\\*[^*]+\\*\\*|\`[^\`]+\`)/).forEach(function (part) {
      if (!part) return;
      if (/^\\*\\*[^*]+\\*\\*$/.test(part)) out.push(h('strong', {}, part.slice(2, -2)));
      else if (/^\`[^\`]+\`$/.test(part)) out.push(h('code', {}, part.slice(1, -1)));
      else out.push(part);
    });
    return out;
  }

  var LIST = /^(\\d+\\.|[-*])\\s+/;
  function parseMarkdown(md) {
    var lines = md.split('\\n'); var blocks = []; var i = 0;
    function plain(l) { return !/^\\s*$/.test(l) && !/^\`\`\`/.test(l) && !/^#{1,6}\\s/.test(l) && !LIST.test(l); }
    while (i < lines.length) {
      var line = lines[i];
      var fence = /^\`\`\`(\\S*)\\s*$/.exec(line);
      if (fence) {
        var code = []; i += 1;
        while (i < lines.length && !/^\`\`\`\\s*$/.test(lines[i])) { code.push(lines[i]); i += 1; }
        i += 1;
        blocks.push({ t: 'code', lang: fence[1], text: code.join('\\n') });
      } else if (/^\\s*$/.test(line)) {
        i += 1;
      } else if (/^#{1,6}\\s/.test(line)) {
        var m = /^(#{1,6})\\s+(.*)$/.exec(line);
        blocks.push({ t: 'h', level: m[1].length, text: m[2] }); i += 1;
      } else if (LIST.test(line)) {
        var ordered = /^\\d+\\./.test(line); var items = [];
        var same = ordered ? /^\\d+\\.\\s/ : /^[-*]\\s/;
        while (i < lines.length && same.test(lines[i])) { items.push(lines[i].replace(LIST, '')); i += 1; }
        blocks.push({ t: ordered ? 'ol' : 'ul', items: items, start: ordered ? parseInt(line, 10) : 1 });
      } else {
        var para = [];
        while (i < lines.length && plain(lines[i])) { para.push(lines[i]); i += 1; }
        blocks.push({ t: 'p', lines: para });
      }
    }
    return blocks;
  }

  // Each site's reply root and code block, written from the real pages' structure.
  var MARKUP = [
    { host: /deepseek/, root: ['div', { 'class': 'ds-markdown ds-markdown--block' }], code: function (lang, text) {
      return h('div', { 'class': 'md-code-block' }, [
        h('div', { 'class': 'md-code-block-banner-wrap' }, h('div', { 'class': 'md-code-block-banner' }, [
          h('span', { 'class': 'd813de27' }, lang), h('div', { 'class': 'efa13877' }, h('div', { role: 'button', 'class': 'ds-button' }, '复制'))])),
        h('pre', {}, text)]); } },
    { host: /doubao/, root: ['div', { 'data-testid': 'message_text_content', 'class': 'flow-markdown-body' }], code: function (lang, text) {
      return h('div', { 'class': 'code-block-element' }, [
        h('div', { 'class': 'header-wrapper' }, [h('div', { 'class': 'title' }, lang), h('button', { type: 'button' }, '复制')]),
        h('pre', {}, h('code', { 'class': 'language-' + lang }, text))]); } },
    { host: /yuanbao/, root: ['div', { 'class': 'hyc-content-md' }], code: function (lang, text) {
      return h('div', { 'class': 'hyc-common-markdown__code' }, [
        h('div', { 'class': 'hyc-common-markdown__code__hd' }, [h('span', { 'class': 'hyc-common-markdown__code__hd__l' }, lang), h('div', { 'class': 'hyc-common-markdown__code__hd__r' }, '复制')]),
        h('pre', { 'class': 'hyc-common-markdown__code-lan' }, h('code', {}, text))]); } },
    { host: /qianwen|qwen|tongyi/, root: ['div', { 'class': 'tongyi-markdown markdown-body' }], code: function (lang, text) {
      return h('div', { 'class': 'tongyi-design-highlighter' }, [
        h('div', { 'class': 'tongyi-design-highlighter-header' }, [h('span', { 'class': 'tongyi-design-highlighter-lang' }, lang), h('div', { 'class': 'tongyi-design-highlighter-right-actions' }, '复制代码')]),
        h('pre', {}, h('code', {}, text))]); } },
    { host: /chatgpt/, root: ['div', { 'data-message-author-role': 'assistant' }, ['div', { 'class': 'markdown prose w-full break-words' }]], code: function (lang, text) {
      return h('pre', { 'class': 'overflow-visible!' }, h('div', { 'class': 'contain-inline-size rounded-2xl relative' }, [
        h('div', { 'class': 'flex items-center text-token-text-secondary px-4 py-2 text-xs font-sans' }, lang),
        h('div', { 'class': 'sticky top-9' }, h('button', { 'class': 'flex gap-1 items-center', 'aria-label': 'Copy' }, 'Copy code')),
        h('div', { 'class': 'overflow-y-auto p-4', dir: 'ltr' }, h('code', { 'class': 'whitespace-pre! language-' + lang }, text))])); } },
    { host: /claude/, root: ['div', { 'class': 'font-claude-response' }, ['div', { 'class': 'standard-markdown' }]], code: function (lang, text) {
      return h('div', { 'class': 'relative flex flex-col rounded-lg' }, [
        h('div', { 'class': 'text-text-500 font-small p-3.5 pb-0' }, lang),
        h('pre', { 'class': 'code-block__code' }, h('code', { 'class': 'language-' + lang }, text)),
        h('button', { 'class': 'inline-flex', 'aria-label': 'Copy to clipboard' }, 'Copy')]); } },
    { host: /gemini/, root: ['message-content', { 'class': 'model-response-text' }, ['div', { 'class': 'markdown markdown-main-panel' }]], code: function (lang, text) {
      return h('code-block', {}, h('div', { 'class': 'code-block' }, [
        h('div', { 'class': 'code-block-decoration header-formatted' }, [h('span', {}, lang), h('button', { 'aria-label': 'Copy code' }, 'content_copy')]),
        h('div', { 'class': 'formatted-code-block-internal-container' }, h('pre', {}, h('code', { 'class': 'code-container formatted' }, text)))])); } },
    { host: /kimi/, root: ['div', { 'class': 'markdown-container' }, ['div', { 'class': 'markdown' }]], code: function (lang, text) {
      return h('div', { 'class': 'segment-code' }, [
        h('div', { 'class': 'segment-code-header' }, [h('span', { 'class': 'segment-code-lang' }, lang), h('button', { 'class': 'segment-code-copy' }, '复制')]),
        h('div', { 'class': 'segment-code-content' }, h('pre', {}, h('code', {}, text)))]); } },
    { host: /chatglm/, root: ['div', { 'class': 'markdown-body' }], code: function (lang, text) {
      return h('div', { 'class': 'code-wrap' }, [
        h('div', { 'class': 'code-header' }, [h('span', { 'class': 'code-lang' }, lang), h('span', { 'class': 'copy' }, '复制')]),
        h('pre', {}, h('code', { 'class': 'hljs language-' + lang }, text))]); } },
    { host: /yiyan|baidu/, root: ['div', { 'class': 'custom-html md-stream-desktop' }], code: function (lang, text) {
      return h('div', { 'class': 'code-wrapper' }, [
        h('div', { 'class': 'code-header' }, [h('span', { 'class': 'code-lang' }, lang), h('span', { 'class': 'code-copy' }, '复制代码')]),
        h('pre', {}, h('code', {}, text))]); } },
    { host: /./, root: ['div', { 'class': 'markdown-body' }], code: function (lang, text) {
      return h('div', { 'class': 'code-block' }, [h('div', { 'class': 'code-header' }, [h('span', {}, lang), h('button', {}, '复制')]), h('pre', {}, h('code', {}, text))]); } },
  ];

  /** Renders \`md\` into the bubble as the site does (the raw wire stays, hidden). */
  function renderReply(target, md) {
    var site = MARKUP.filter(function (m) { return m.host.test(location.hostname); })[0];
    var spec = site.root; var root = null; var leaf = null;
    while (spec) {
      var el = h(spec[0], spec[1]);
      if (leaf) leaf.appendChild(el); else root = el;
      leaf = el; spec = spec[2];
    }
    parseMarkdown(md).forEach(function (b) {
      if (b.t === 'code') { leaf.appendChild(site.code(b.lang, b.text)); return; }
      if (b.t === 'h') { leaf.appendChild(h('h' + b.level, {}, inline(b.text))); return; }
      if (b.t === 'ol' || b.t === 'ul') {
        var list = h(b.t, b.t === 'ol' && b.start !== 1 ? { start: String(b.start) } : {});
        b.items.forEach(function (it) { list.appendChild(h('li', {}, inline(it))); });
        leaf.appendChild(list); return;
      }
      var p = h('p');
      b.lines.forEach(function (l, i) { if (i) p.appendChild(h('br')); inline(l).forEach(function (k) { p.appendChild(typeof k === 'string' ? document.createTextNode(k) : k); }); });
      leaf.appendChild(p);
    });
    target.style.whiteSpace = 'normal';
    target.appendChild(root);
  }

  // The reply's images as each site's page shows them: the site's avatar beside the reply (small, not part of
  // the answer) and each image of the answer in the site's own wrapper, after \`delayMs\` (a site that asks
  // for the image's address once the stream ended, as ChatGPT does).
  var IMAGE_MARKUP = [
    { host: /chatgpt/, wrap: ['div', { 'class': 'group/imagegen-image relative' }], img: { 'class': 'absolute inset-0 w-full' } },
    { host: /gemini/, wrap: ['single-image', { 'class': 'generated-image large' }], img: { 'class': 'image loaded' } },
    { host: /doubao/, wrap: ['div', { 'data-testid': 'mdbox_image', 'class': 'image-box-grid-item' }], img: { 'class': 'image-QlOyRp' } },
    { host: /./, wrap: ['div', { 'class': 'image-wrapper' }], img: {} },
  ];
  function showImages(target, spec) {
    var site = IMAGE_MARKUP.filter(function (m) { return m.host.test(location.hostname); })[0];
    var avatar = h('img', { 'class': 'avatar', width: '24', height: '24', alt: '', src: location.origin + '/static/avatar-assistant.png' });
    target.insertBefore(avatar, target.firstChild);
    setTimeout(function () {
      spec.images.forEach(function (im) {
        var attrs = { src: im.url, alt: im.alt || '' };
        Object.keys(site.img).forEach(function (k) { attrs[k] = site.img[k]; });
        var img = h('img', attrs);
        img.style.width = '240px'; img.style.height = '180px'; img.style.display = 'block';
        target.appendChild(h(site.wrap[0], site.wrap[1], img));
      });
      target.setAttribute('data-images', String(spec.images.length));
    }, spec.delayMs || 0);
  }

  function updateSend() {
    var enabled = !busy && uploads.pending === 0 && (model.trim() !== '' || uploads.done.length > 0);
    sendButton.setAttribute('aria-disabled', String(!enabled));
    if (sendButton.tagName === 'BUTTON') sendButton.disabled = !enabled;
    document.body.setAttribute('data-streaming', String(busy));
  }

  // React's input value tracking: programmatic \`el.value = x\` updates the tracker, so the input event that
  // follows is ignored; only the native setter (or real typing) produces an onChange.
  function mountReactTextarea(el) {
    var desc = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value');
    var tracked = desc.get.call(el);
    Object.defineProperty(el, 'value', {
      configurable: true,
      get: function () { return desc.get.call(this); },
      set: function (v) { tracked = String(v); desc.set.call(this, v); }
    });
    el.addEventListener('input', function () {
      var now = desc.get.call(el);
      if (now === tracked) return;
      tracked = now;
      model = now;
      updateSend();
    });
    return {
      clear: function () { desc.set.call(el, ''); tracked = ''; model = ''; }
    };
  }

  // A contenteditable editor that owns a model (list of paragraphs) and renders the DOM from it.
  function mountRichEditor(el, flavor) {
    var paragraphs = [''];
    var rendering = false;
    var paraTag = flavor === 'lexical' ? 'p' : 'p';

    function text() { return paragraphs.join('\\n'); }
    function commit() { model = text(); updateSend(); }

    function render(caret) {
      rendering = true;
      while (el.firstChild) el.removeChild(el.firstChild); // not innerHTML: a Trusted Types sink
      paragraphs.forEach(function (p) {
        var node = document.createElement(paraTag);
        if (flavor === 'lexical') node.setAttribute('dir', 'ltr');
        if (p === '') node.appendChild(document.createElement('br'));
        else if (flavor === 'lexical') {
          var span = document.createElement('span');
          span.setAttribute('data-lexical-text', 'true');
          span.textContent = p;
          node.appendChild(span);
        } else node.appendChild(document.createTextNode(p));
        el.appendChild(node);
      });
      var empty = paragraphs.length === 1 && paragraphs[0] === '';
      if (flavor === 'quill') el.classList.toggle('ql-blank', empty);
      if (flavor === 'prosemirror') {
        var first = el.firstChild;
        if (first && empty) { first.className = 'is-empty is-editor-empty'; first.setAttribute('data-placeholder', el.getAttribute('data-placeholder') || ''); }
      }
      if (caret) placeCaret(caret);
      observer.takeRecords();
      rendering = false;
      commit();
    }

    function caretOf(node, offset) {
      var p = node;
      while (p && p.parentNode !== el) p = p.parentNode;
      if (!p) return { pi: paragraphs.length - 1, off: paragraphs[paragraphs.length - 1].length };
      var pi = Array.prototype.indexOf.call(el.childNodes, p);
      var off = 0;
      var walker = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
      var t;
      while ((t = walker.nextNode())) {
        if (t === node) return { pi: pi, off: off + offset };
        if (node.nodeType === 1 && node.contains(t) && Array.prototype.indexOf.call(node.childNodes, t) >= offset) break;
        off += t.data.length;
      }
      if (node === p && offset === 0) off = 0;
      return { pi: Math.min(pi, paragraphs.length - 1), off: Math.min(off, (paragraphs[pi] || '').length) };
    }

    function placeCaret(c) {
      var p = el.childNodes[c.pi];
      if (!p) return;
      var walker = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
      var t = walker.nextNode();
      var range = document.createRange();
      if (t) range.setStart(t, Math.min(c.off, t.data.length)); else range.setStart(p, 0);
      range.collapse(true);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    }

    function selection() {
      var sel = window.getSelection();
      if (!sel || sel.rangeCount === 0 || !el.contains(sel.anchorNode)) {
        var end = { pi: paragraphs.length - 1, off: paragraphs[paragraphs.length - 1].length };
        return { start: end, end: end };
      }
      var r = sel.getRangeAt(0);
      return { start: caretOf(r.startContainer, r.startOffset), end: caretOf(r.endContainer, r.endOffset) };
    }

    function replaceRange(s, e, inserted) {
      var before = paragraphs.slice(0, s.pi);
      var after = paragraphs.slice(e.pi + 1);
      var head = paragraphs[s.pi].slice(0, s.off);
      var tail = paragraphs[e.pi].slice(e.off);
      var lines = (head + inserted + tail).split('\\n');
      paragraphs = before.concat(lines, after);
      var lastInserted = (head + inserted).split('\\n');
      return { pi: s.pi + lastInserted.length - 1, off: lastInserted[lastInserted.length - 1].length };
    }

    el.addEventListener('beforeinput', function (ev) {
      var sel = selection();
      var s = sel.start, e = sel.end;
      var collapsed = s.pi === e.pi && s.off === e.off;
      var data = ev.data;
      if (data == null && ev.dataTransfer) data = ev.dataTransfer.getData('text/plain');
      var caret = null;
      switch (ev.inputType) {
        case 'insertText':
        case 'insertReplacementText':
        case 'insertFromPaste':
        case 'insertFromDrop':
          caret = replaceRange(s, e, (data || '').replace(/\\r\\n?/g, '\\n'));
          break;
        case 'insertParagraph':
        case 'insertLineBreak':
          caret = replaceRange(s, e, '\\n');
          break;
        case 'deleteContentBackward':
          if (collapsed) {
            if (s.off > 0) s = { pi: s.pi, off: s.off - 1 };
            else if (s.pi > 0) s = { pi: s.pi - 1, off: paragraphs[s.pi - 1].length };
          }
          caret = replaceRange(s, e, '');
          break;
        case 'deleteContentForward':
          if (collapsed) {
            if (e.off < paragraphs[e.pi].length) e = { pi: e.pi, off: e.off + 1 };
            else if (e.pi < paragraphs.length - 1) e = { pi: e.pi + 1, off: 0 };
          }
          caret = replaceRange(s, e, '');
          break;
        default:
          return; // other edits: the browser applies them, the mutation observer reads them back
      }
      ev.preventDefault();
      render(caret);
    });

    var observer = new MutationObserver(function () {
      if (rendering) return;
      if (flavor === 'lexical') { render(null); return; } // Lexical reverts DOM changes it did not make
      var next = [];
      Array.prototype.forEach.call(el.childNodes, function (n) {
        if (n.nodeType === 3) { if (n.data !== '') next.push(n.data); }
        else if (n.nodeType === 1) next.push(n.textContent);
      });
      paragraphs = next.length ? next : [''];
      commit();
    });
    observer.observe(el, { childList: true, subtree: true, characterData: true });
    render(null);
    return { clear: function () { paragraphs = ['']; render(null); } };
  }

  var editor = cfg.input.kind === 'react-textarea' ? mountReactTextarea(input) : mountRichEditor(input, cfg.input.kind);

  function bubble(role, text) {
    var div = document.createElement('div');
    div.className = 'mock-msg ' + role;
    div.setAttribute('data-role', role);
    div.textContent = text;
    list.appendChild(div);
    return div;
  }

  function streamReply(req, target) {
    var wire = document.createElement('pre');
    wire.className = 'mock-wire';
    target.appendChild(wire);
    var decoder = new TextDecoder();
    var received = 0;
    function show(bytes) {
      received += bytes.length;
      wire.textContent += decoder.decode(bytes, { stream: true });
      target.setAttribute('data-bytes', String(received));
    }
    var answer = null;
    var shown = null;
    function finish(ok) {
      if (answer !== null) { wire.style.display = 'none'; renderReply(target, decodeURIComponent(answer)); }
      if (shown) showImages(target, JSON.parse(decodeURIComponent(shown)));
      target.setAttribute('data-done', ok ? 'true' : 'error');
      busy = false;
      updateSend();
    }
    if (cfg.transport === 'xhr') {
      var xhr = new XMLHttpRequest();
      var seen = 0;
      xhr.open(req.method || 'POST', req.url, true);
      Object.keys(req.headers || {}).forEach(function (k) { xhr.setRequestHeader(k, req.headers[k]); });
      xhr.onprogress = function () {
        var t = xhr.responseText;
        wire.textContent += t.slice(seen);
        seen = t.length;
        target.setAttribute('data-bytes', String(seen));
      };
      xhr.onload = function () { xhr.onprogress(); answer = xhr.getResponseHeader('x-mock-answer'); shown = xhr.getResponseHeader('x-mock-images'); finish(xhr.status < 400); };
      xhr.onerror = function () { finish(false); };
      xhr.send(req.body);
      return;
    }
    fetch(req.url, { method: req.method || 'POST', headers: req.headers || {}, body: req.body, credentials: 'include' })
      .then(function (res) {
        answer = res.headers.get('x-mock-answer');
        shown = res.headers.get('x-mock-images');
        var reader = res.body.getReader();
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) { finish(res.ok); return; }
            show(r.value);
            return pump();
          });
        }
        return pump();
      })
      .catch(function () { finish(false); });
  }

  // ---- uploads (cfg.upload): the site's file input with its accept list, drop and paste of files on the
  // composer, a chip per file with a spinner while the site's own upload requests run, an error chip for a
  // file the site refuses (its type, size or count, or the upload failing); send waits for every upload.
  function acceptOk(file) {
    var list = (cfg.upload.accept || '').split(',').map(function (p) { return p.trim().toLowerCase(); }).filter(Boolean);
    if (!list.length) return true;
    var mime = (file.type || '').toLowerCase();
    var ext = (/\\.[^.]+$/.exec(file.name.toLowerCase()) || [''])[0];
    return list.some(function (p) {
      if (p.charAt(0) === '.') return p === ext;
      if (/\\/\\*$/.test(p)) return mime.indexOf(p.slice(0, -1)) === 0;
      return p === mime;
    });
  }
  function uploadTarget() {
    return (cfg.upload.dropZone && document.querySelector(cfg.upload.dropZone)) || input;
  }
  function chipsList() {
    if (uploads.list && uploads.list.isConnected) return uploads.list;
    var u = cfg.upload;
    var attrs = {}; Object.keys(u.list || {}).forEach(function (k) { attrs[k] = u.list[k]; });
    uploads.list = h('div', attrs);
    uploads.list.style.display = 'flex'; uploads.list.style.gap = '6px'; uploads.list.style.flexWrap = 'wrap';
    var anchor = input.closest(u.listBefore || '*') || input;
    anchor.parentNode.insertBefore(uploads.list, anchor);
    return uploads.list;
  }
  function chip(file, cls) {
    var u = cfg.upload;
    var el = h('div', { 'class': cls, title: file.name }, [h('span', { 'class': 'mock-file-name' }, file.name)]);
    el.style.border = '1px solid #ccd'; el.style.borderRadius = '8px'; el.style.padding = '2px 8px'; el.style.fontSize = '12px';
    chipsList().appendChild(el);
    return el;
  }
  function refuse(file, message) {
    var el = chip(file, cfg.upload.errorClass);
    el.appendChild(h('span', { 'class': 'mock-file-error-text' }, ' ' + message));
    el.style.borderColor = '#d33'; el.style.color = '#d33';
  }
  function addFile(file) {
    var u = cfg.upload;
    var m = u.messages || {};
    if (!acceptOk(file)) { refuse(file, m.type || 'unsupported file type'); return; }
    if (u.maxBytes && file.size > u.maxBytes) { refuse(file, m.size || 'file too large'); return; }
    if (u.maxFiles && uploads.done.length + uploads.pending + 1 > u.maxFiles) { refuse(file, m.count || 'too many files'); return; }
    var el = chip(file, u.chipClass);
    var spin = h('span', { 'class': u.busyClass, role: 'progressbar' }, '');
    spin.style.display = 'inline-block'; spin.style.width = '10px'; spin.style.height = '10px'; spin.style.marginLeft = '6px';
    spin.style.border = '2px solid #99a'; spin.style.borderRadius = '50%';
    el.appendChild(spin);
    uploads.pending += 1;
    updateSend();
    uploadFile(file, { uuid: uuid, host: location.hostname }).then(function (res) {
      if (spin.parentNode) spin.parentNode.removeChild(spin);
      el.setAttribute('data-file-id', res.id);
      if (u.doneClass) el.classList.add(u.doneClass);
      // An image the person attached is shown in their own message, as the sites do (never part of the reply).
      var shownAt = /^image\\//.test(file.type) && window.URL && URL.createObjectURL ? URL.createObjectURL(file) : null;
      uploads.done.push({ id: res.id, name: file.name, type: file.type, size: file.size, shownAt: shownAt });
    }, function (err) {
      if (spin.parentNode) spin.parentNode.removeChild(spin);
      el.className = u.errorClass;
      el.appendChild(h('span', { 'class': 'mock-file-error-text' }, ' ' + ((err && err.message) || m.failed || 'upload failed')));
      el.style.borderColor = '#d33'; el.style.color = '#d33';
    }).then(function () { uploads.pending -= 1; updateSend(); });
  }
  function filesOf(list) { return Array.prototype.slice.call(list || []); }
  if (cfg.upload) {
    var hows = [].concat(cfg.upload.how || 'input');
    if (cfg.upload.input) {
      var fileInput = h('input', Object.assign({ type: 'file', multiple: '', accept: cfg.upload.accept || '' }, cfg.upload.input));
      fileInput.style.display = 'none';
      input.parentNode.appendChild(fileInput);
      fileInput.addEventListener('change', function () {
        filesOf(fileInput.files).forEach(addFile);
        fileInput.value = '';
      });
    }
    if (hows.indexOf('drop') !== -1) {
      var zone = uploadTarget();
      ['dragenter', 'dragover'].forEach(function (t) { zone.addEventListener(t, function (ev) { ev.preventDefault(); }); });
      zone.addEventListener('drop', function (ev) {
        var files = filesOf(ev.dataTransfer && ev.dataTransfer.files);
        if (!files.length) return;
        ev.preventDefault();
        files.forEach(addFile);
      });
    }
    if (hows.indexOf('paste') !== -1) {
      input.addEventListener('paste', function (ev) {
        var files = filesOf(ev.clipboardData && ev.clipboardData.files);
        if (!files.length) return;
        ev.preventDefault();
        files.forEach(addFile);
      }, true);
    }
  }

  function submit() {
    if (busy) return;
    if (uploads.pending > 0) return;
    var prompt = model;
    var files = uploads.done.slice();
    if (prompt.trim() === '' && files.length === 0) return;
    turn += 1;
    busy = true;
    editor.clear();
    updateSend();
    var mine = bubble('user', prompt + (files.length ? '\\n📎 ' + files.map(function (f) { return f.name; }).join(', ') : ''));
    files.forEach(function (f) {
      if (!f.shownAt) return;
      var thumb = h('img', { 'class': 'mock-user-upload', src: f.shownAt, alt: f.name, width: '160', height: '120' });
      thumb.style.display = 'block';
      mine.appendChild(thumb);
    });
    uploads.done = [];
    if (uploads.list) { while (uploads.list.firstChild) uploads.list.removeChild(uploads.list.firstChild); }
    updateSend();
    var target = bubble('assistant', '');
    var req = buildRequest(prompt, { uuid: uuid, turn: turn, now: Date.now(), host: location.hostname, files: files });
    if (drift === 'endpoint') req.url = moveEndpoint(req.url);
    streamReply(req, target);
  }

  sendButton.addEventListener('click', function (ev) {
    ev.preventDefault();
    if (sendButton.getAttribute('aria-disabled') === 'true') return;
    submit();
  });
  input.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      submit();
    }
  });
  updateSend();
  window.__mockSite = { get model() { return model; }, get busy() { return busy; }, get uploading() { return uploads.pending; }, get attached() { return uploads.done.slice(); } };
})();
</script>
</body>
</html>
`;
}
