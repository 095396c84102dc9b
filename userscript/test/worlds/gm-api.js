// The GM_* functions our test extensions give the userscript, with the semantics of the real
// managers rather than of a convenient shim (docs/userscript.md, reference/site-runtime.md §3):
//   - GM_xmlhttpRequest is carried out by the extension (its background / service worker),
//     never by the page: no CORS, no page CSP, no Local Network Access check, no page Origin;
//   - `textMode: 'final'` (ScriptCat, Tampermonkey): `responseText` and `response` stay empty
//     until readyState 4; progress events carry no text. A request that never ends (an event
//     stream) never shows its text;
//   - `textMode: 'growing'` (Violentmonkey): `responseText` grows on progress /
//     readystatechange(3);
//   - `responseType: 'stream'` (Tampermonkey, ScriptCat; `streams: true`): `response` is a
//     ReadableStream of Uint8Array from `onloadstart` / readyState 2 on. With `streams: false`
//     the type is ignored, as a manager that does not know it would;
//   - `responseType: 'arraybuffer'` / `'blob'` (every manager: Tampermonkey's documentation, ScriptCat's
//     gm_xhr.ts, Violentmonkey's requests.js): `response` is the body's bytes as an ArrayBuffer / a Blob
//     at readyState 4, never text (the task attachments, GET /files/ID);
//   - `manager: 'violentmonkey'`: Violentmonkey 2.x as its source has it (src/injected/web/
//     requests.js, src/offscreen/xhr.js, read at 1f882e0; behaviour re-stated, no code copied):
//     the extension sends each event only the text added since the last text it sent, attached
//     to the first event the script listens to; the script side keeps the pieces in a list.
//     `responseText` is that list's only piece, or, with more, a getter that joins them into
//     one; `response` is the same join. A `responseType` it does not know ('stream') is logged
//     as "Unknown responseType" and the request is made as text, but the type given is kept,
//     and with any type set a join also discards the list: later events' `responseText` then
//     holds only the pieces that came after the join. No streams, ever.
//
// `createGmApi` is self-contained (no imports, no closure over this module) because each
// extension stringifies it into the world the userscript runs in; `gmApiSource()` gives that
// text. `link` is the extension's message channel: `{post(msg), onMessage(fn)}`.
//
// Messages, script → extension: {op:'xhr', id, method, url, headers, data, timeout},
// {op:'abort', id}, {op:'setValue', key, value}.
// Extension → script: {op:'head', id, status, statusText, headers, finalUrl},
// {op:'chunk', id, bytes} (bytes: a binary string, one char per byte), {op:'end', id},
// {op:'error', id, error}, {op:'timeout', id}.

export function createGmApi({ link, values = {}, info = {}, textMode = 'final', streams = true, manager = null }) {
  const store = new Map(Object.entries(values));
  const requests = new Map();
  let nextId = 0;

  const newStream = (start) => {
    try {
      return new ReadableStream({ start });
    } catch (err) {
      // Firefox content scripts: until the sandbox has made a stream of its own, `ReadableStream`
      // is the page's constructor through an Xray and refuses a sandbox-made source ("Permission
      // denied to access property autoAllocateChunkSize"); making a Response body defines the
      // sandbox's own `ReadableStream`, whose streams the script can read (page-realm ones hang
      // on a pending read: "Permission denied to access property then").
      if (typeof Response !== 'function') throw err;
      void new Response('').body;
      return new ReadableStream({ start });
    }
  };

  const toBytes = (s) => {
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i += 1) out[i] = s.charCodeAt(i) & 0xff;
    return out;
  };

  /** The bytes of a binary response, as the type asked for. */
  const binaryOf = (chunks, type) => {
    const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of chunks) { all.set(c, at); at += c.length; }
    return type === 'blob' ? new Blob([all]) : all.buffer;
  };

  link.onMessage((msg) => {
    const req = requests.get(msg && msg.id);
    if (req) req.handle(msg);
  });

  /** Violentmonkey's GM_xmlhttpRequest, for text and the types it knows (see the top). */
  function vmRequest(details) {
    nextId += 1;
    const id = `x${nextId}`;
    const known = { '': 1, text: 1, json: 1, document: 1, arraybuffer: 1, blob: 1 };
    const given = details.responseType;
    if (!((given || '') in known)) console.warn(`Unknown responseType "${given}"`);
    const decoder = new TextDecoder();
    const head = { readyState: 1, status: 0, statusText: '', responseHeaders: '', finalUrl: details.url };
    let pieces = null; // the script side's list of text pieces
    let cached = { responseText: undefined, response: undefined };
    let unsent = ''; // text the extension has but has not attached to an event yet
    let done = false;
    const binaryType = given === 'arraybuffer' || given === 'blob' ? given : null;
    const bytesSeen = [];
    const join = (prop) => {
      if (binaryType) return prop === 'response' && done ? binaryOf(bytesSeen, binaryType) : null;
      if (pieces) {
        const all = pieces.join('');
        pieces = [all];
        cached = { responseText: all, response: details.responseType === 'json' ? safeJson(all) : all };
        if (given) pieces = null; // a type was given: the joined text is let go
      }
      const v = cached[prop];
      return v === undefined ? null : v;
    };
    const safeJson = (t) => { try { return JSON.parse(t); } catch { return null; } };
    const fire = (name, extra = {}) => {
      const fn = details[name];
      if (typeof fn !== 'function') return;
      if (unsent && name !== 'onloadstart') {
        if (!pieces) pieces = [];
        pieces.push(unsent);
        unsent = '';
      }
      const data = { ...head, ...extra, context: details.context };
      if (!pieces || pieces.length <= 1) data.responseText = (pieces && pieces[0]) || '';
      else Object.defineProperty(data, 'responseText', { configurable: true, enumerable: true, get() { const v = join('responseText'); Object.defineProperty(this, 'responseText', { value: v }); return v; } });
      Object.defineProperty(data, 'response', { configurable: true, enumerable: true, get() { const v = join('response'); Object.defineProperty(this, 'response', { value: v }); return v; } });
      try { fn.call(details, data); } catch (err) { console.error(err); }
    };
    const settle = () => { done = true; requests.delete(id); };
    requests.set(id, {
      handle(msg) {
        if (done) return;
        if (msg.op === 'head') {
          Object.assign(head, { status: msg.status, statusText: msg.statusText || '', responseHeaders: msg.headers || '', finalUrl: msg.finalUrl || details.url, readyState: 2 });
          fire('onreadystatechange');
        } else if (msg.op === 'chunk') {
          if (binaryType) bytesSeen.push(toBytes(msg.bytes || ''));
          else unsent += decoder.decode(toBytes(msg.bytes || ''), { stream: true });
          head.readyState = 3;
          fire('onreadystatechange');
          fire('onprogress');
        } else if (msg.op === 'end') {
          settle();
          unsent += decoder.decode();
          head.readyState = 4;
          fire('onreadystatechange');
          fire('onload');
          fire('onloadend');
        } else if (msg.op === 'error' || msg.op === 'timeout') {
          settle();
          head.readyState = 4;
          fire(msg.op === 'error' ? 'onerror' : 'ontimeout', { error: msg.error });
          fire('onloadend');
        }
      },
    });
    link.post({
      op: 'xhr', id, method: details.method || 'GET', url: String(details.url),
      headers: details.headers || {}, data: details.data ?? null, timeout: details.timeout || 0,
    });
    fire('onloadstart');
    return {
      abort() {
        if (done) return;
        settle();
        link.post({ op: 'abort', id });
        fire('onabort');
        fire('onloadend');
      },
    };
  }

  function GM_xmlhttpRequest(details) {
    if (manager === 'violentmonkey') return vmRequest(details);
    nextId += 1;
    const id = `x${nextId}`;
    const wantStream = streams && details.responseType === 'stream';
    const binaryType = details.responseType === 'arraybuffer' || details.responseType === 'blob' ? details.responseType : null;
    const bytesSeen = [];
    const decoder = new TextDecoder();
    let text = '';
    let controller = null;
    let done = false;
    const res = {
      readyState: 1, status: 0, statusText: '', responseHeaders: '', finalUrl: details.url,
      responseText: '', response: wantStream ? null : '', context: details.context,
    };
    const fire = (name) => {
      const fn = details[name];
      if (typeof fn !== 'function') return;
      try { fn.call(details, res); } catch (err) { console.error(err); }
    };
    const settle = () => { done = true; requests.delete(id); };
    const fail = (name, error) => {
      if (done) return;
      settle();
      if (controller) { try { controller.error(new Error(error || name)); } catch { /* closed */ } }
      res.readyState = 4;
      res.error = error;
      fire('onreadystatechange');
      fire(name);
      fire('onloadend');
    };
    requests.set(id, {
      handle(msg) {
        if (done) return;
        if (msg.op === 'head') {
          Object.assign(res, { status: msg.status, statusText: msg.statusText || '', responseHeaders: msg.headers || '', finalUrl: msg.finalUrl || details.url, readyState: 2 });
          if (wantStream) {
            res.response = newStream((c) => { controller = c; });
          }
          fire('onloadstart');
          fire('onreadystatechange');
        } else if (msg.op === 'chunk') {
          const bytes = toBytes(msg.bytes || '');
          if (controller) controller.enqueue(bytes);
          else if (binaryType) bytesSeen.push(bytes);
          else text += decoder.decode(bytes, { stream: true });
          res.readyState = 3;
          if (!wantStream && textMode === 'growing') { res.responseText = text; res.response = text; }
          fire('onreadystatechange');
          fire('onprogress');
        } else if (msg.op === 'end') {
          settle();
          if (controller) { try { controller.close(); } catch { /* cancelled */ } }
          if (binaryType) {
            res.responseText = '';
            res.response = binaryOf(bytesSeen, binaryType);
          } else if (!wantStream) {
            text += decoder.decode();
            res.responseText = text;
            res.response = details.responseType === 'json' ? JSON.parse(text || 'null') : text;
          }
          res.readyState = 4;
          fire('onreadystatechange');
          fire('onload');
          fire('onloadend');
        } else if (msg.op === 'error') fail('onerror', msg.error);
        else if (msg.op === 'timeout') fail('ontimeout', 'timeout');
      },
    });
    link.post({
      op: 'xhr', id, method: details.method || 'GET', url: String(details.url),
      headers: details.headers || {}, data: details.data ?? null, timeout: details.timeout || 0,
    });
    return {
      abort() {
        if (done) return;
        settle();
        link.post({ op: 'abort', id });
        if (controller) { try { controller.error(new Error('aborted')); } catch { /* closed */ } }
        fire('onabort');
        fire('onloadend');
      },
    };
  }

  return {
    GM_xmlhttpRequest,
    GM_getValue: (key, fallback) => (store.has(key) ? store.get(key) : fallback),
    GM_setValue: (key, value) => { store.set(key, value); link.post({ op: 'setValue', key, value }); },
    GM_deleteValue: (key) => { store.delete(key); link.post({ op: 'setValue', key, value: undefined }); },
    GM_info: { scriptHandler: 'AIcard test manager', version: '1.0', ...info },
  };
}

/** The text of `createGmApi`, to inline into a content script or a registered user script. */
export function gmApiSource() {
  return `(${createGmApi.toString()})`;
}

/**
 * The extension side of one request, for the background page / service worker: performs the
 * request with fetch and reports it through `post` in the messages above. Returns
 * `{abort()}`. Also self-contained, for the same reason.
 */
export function performRequest(msg, post) {
  const ctl = new AbortController();
  let timer = null;
  let timedOut = false;
  if (msg.timeout) timer = setTimeout(() => { timedOut = true; ctl.abort(); }, msg.timeout);
  const binary = (u8) => {
    let s = '';
    for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
    return s;
  };
  (async () => {
    try {
      const res = await fetch(msg.url, {
        method: msg.method, headers: msg.headers, body: msg.data ?? undefined, signal: ctl.signal,
        credentials: 'omit', cache: 'no-store',
      });
      const headers = [...res.headers].map(([k, v]) => `${k}: ${v}`).join('\r\n');
      post({ op: 'head', id: msg.id, status: res.status, statusText: res.statusText, headers, finalUrl: res.url });
      if (res.body) {
        const reader = res.body.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          post({ op: 'chunk', id: msg.id, bytes: binary(value) });
        }
      }
      post({ op: 'end', id: msg.id });
    } catch (err) {
      if (timedOut) post({ op: 'timeout', id: msg.id });
      else if (!ctl.signal.aborted) post({ op: 'error', id: msg.id, error: String(err && err.message) });
    } finally {
      if (timer) clearTimeout(timer);
    }
  })();
  return { abort: () => ctl.abort() };
}

/** The text of `performRequest`, for a generated background script. */
export function performRequestSource() {
  return `(${performRequest.toString()})`;
}

// ---------------------------------------------------------------------------------------------
// The managers' globals: what a userscript sees besides GM_*, per manager and world. Each entry
// is code text put before the userscript, inside a block, with `__page` = the page's window (page
// worlds) or this world's `window`, and `__global` = this world's global object.

/**
 * A manager's sandbox `window` (Violentmonkey's and Tampermonkey's, whenever a script has grants):
 * not the window itself; `window`, `self`, `globalThis` and, in the top frame, `top` and
 * `parent` give the wrapper back; functions are bound to the real window; writes stay in the
 * wrapper. Self-contained (stringified into the worlds).
 */
export function managerWindow(real) {
  const own = Object.create(null);
  const isTop = real.top === real;
  const proxy = new Proxy(real, {
    get(t, k) {
      if (k in own) return own[k];
      if (k === 'window' || k === 'self' || k === 'globalThis' || (isTop && (k === 'top' || k === 'parent'))) return proxy;
      const v = t[k];
      return typeof v === 'function' && typeof k === 'string' && /^[a-z]/.test(k) ? v.bind(t) : v;
    },
    set(t, k, v) { own[k] = v; return true; },
    has(t, k) { return k in own || k in t; },
  });
  return proxy;
}

/** Violentmonkey's `exportFunction` / `cloneInto` where Firefox gives none (page mode, Chromium). */
const VM_POLYFILLS = `const exportFunction = function (fn, target, options) { if (options && options.defineAs) target[options.defineAs] = fn; return fn; };
const cloneInto = function (obj) { return obj; };`;

/**
 * `{info, gm, prelude}` for a manager in a world. `manager`: 'scriptcat' | 'violentmonkey' |
 * 'tampermonkey'; `world`: 'page' (the page's realm), 'content' (Chromium's USER_SCRIPT /
 * isolated world) or 'sandbox' (Firefox's content-script sandbox); `browserName` as
 * GM_info.platform says it.
 */
export function managerGlobals(manager, world, browserName) {
  const wrap = `const window = (${managerWindow.toString()})(__page);`;
  switch (manager) {
    case 'violentmonkey': {
      const info = { scriptHandler: 'Violentmonkey', version: '2.47.0', injectInto: world === 'page' ? 'page' : 'content', platform: { browserName, os: 'linux', arch: 'x86-64' } };
      const gm = { manager: 'violentmonkey' };
      if (world === 'page') return { info, gm, prelude: `const unsafeWindow = __page;\n${VM_POLYFILLS}\n${wrap}` };
      // Content mode: `unsafeWindow` is this world's own global (in Firefox the sandbox, whose
      // `wrappedJSObject` is the page's window); Chromium's runtime is hidden from the script.
      if (world === 'content') return { info, gm, prelude: `try { __global.chrome = undefined; __global.browser = undefined; } catch (e) {}\nconst unsafeWindow = __global;\n${VM_POLYFILLS}\n${wrap}` };
      return { info, gm, prelude: `const unsafeWindow = __global;\n${wrap}` };
    }
    case 'tampermonkey': {
      const info = { scriptHandler: 'Tampermonkey', version: '5.4.1', sandboxMode: world === 'sandbox' ? 'js' : world === 'content' ? 'dom' : 'raw' };
      const gm = { textMode: 'final', streams: true };
      // USERSCRIPT_WORLD (Firefox, @sandbox JavaScript or a CSP fallback): `unsafeWindow` is the
      // page's window, `exportFunction` / `cloneInto` are Firefox's own.
      if (world === 'sandbox') return { info, gm, prelude: `const unsafeWindow = __page.wrappedJSObject;\nconst window = (${managerWindow.toString()})(__page);` };
      return { info, gm, prelude: `const unsafeWindow = __page;\n${wrap}` };
    }
    default: {
      // ScriptCat: MAIN world by default (USER_SCRIPT with @inject-into content); its
      // sandboxMode is always 'raw'; no injectInto.
      const info = { scriptHandler: 'ScriptCat', version: '1.3.2', sandboxMode: 'raw' };
      return { info, gm: { textMode: 'final', streams: true }, prelude: 'const unsafeWindow = __page;' };
    }
  }
}
