/**
 * The network hooks that must live in the page's own realm: wrappers around `fetch` and
 * `XMLHttpRequest.prototype.open/send` that hand a copy of the chat stream's bytes to a bridge
 * while the page keeps its own response untouched (fetch: the page gets its own promise and
 * Response, we read a clone; XHR: we only listen).
 *
 * Both functions here are **self-contained** (no imports, no outer names): `realm.js` either
 * calls them directly (the script already runs in the page's realm, or in Firefox's sandbox,
 * with `wrap` = `exportFunction`), or stringifies them into a `<script>` that runs in the page
 * (Chromium's isolated / USER_SCRIPT world). Every object the page touches is the page's own:
 * the wrappers return the page's promise, never one made in our realm (Firefox's Xrays refuse
 * `then` on those).
 *
 * `bridge`: `{matches(url, method) → bool, open(info) → sink|null}`; a sink is
 * `{push(Uint8Array), end(), fail(reason)}`. `wrap(fn)` makes `fn` callable by the page;
 * `give(obj)` makes an object with methods usable by the page (Firefox: `cloneInto` with
 * functions). The page's own functions are always called with spread arguments, never
 * `apply(…, arguments)`: Firefox refuses the page a look at the sandbox's arguments object.
 */
export function pageHooks(win, bridge, wrap, give) {
  'use strict';
  const absolute = (url) => {
    try { return new URL(String(url), win.location.href).href; } catch (e) { return String(url); }
  };
  const describe = (input, init) => {
    const isRequest = Boolean(input && typeof input === 'object' && 'url' in input && typeof input.clone === 'function');
    const method = String((init && init.method) || (isRequest && input.method) || 'GET').toUpperCase();
    return { url: absolute(isRequest ? input.url : input), method, isRequest };
  };
  const offer = give || ((obj) => obj);
  const bodyText = async (input, init, isRequest) => {
    try { return await bodyTextOf(input, init, isRequest); } catch (e) { return null; }
  };
  const bodyTextOf = async (input, init, isRequest) => {
    const body = init && init.body;
    if (typeof body === 'string') return body;
    if (body && typeof body === 'object' && typeof body.entries === 'function' && typeof body.get === 'function') {
      const pairs = [];
      for (const [k, v] of body.entries()) if (typeof v === 'string') pairs.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
      return pairs.join('&');
    }
    if (body && typeof body === 'object' && typeof body.toString === 'function' && String(body).includes('=')) return String(body);
    if (isRequest && !body) {
      try { return await input.clone().text(); } catch (e) { return null; }
    }
    return null;
  };

  const origFetch = win.fetch;
  if (typeof origFetch === 'function') {
    // The copy is read by the page's own machinery (pipeTo into the page's WritableStream):
    // a sandbox may not await a read of a stream of the page's realm.
    const readCopy = (res, copy, info) => {
      const sink = bridge.open({ ...info, status: res.status, contentType: res.headers.get('content-type') || '' });
      if (!sink) return;
      if (!copy.body) { sink.end(); return; }
      let over = false;
      const writer = offer({
        write: (chunk) => { sink.push(chunk); },
        close: () => { if (!over) { over = true; sink.end(); } },
        abort: (err) => { if (!over) { over = true; sink.fail(`stream interrupted: ${err && err.message}`); } },
      });
      try {
        copy.body.pipeTo(new win.WritableStream(writer)).then(undefined, wrap((err) => {
          if (!over) { over = true; sink.fail(`stream interrupted: ${err && err.message}`); }
        }));
      } catch (err) {
        over = true;
        sink.fail(`cannot read the stream: ${err && err.message}`);
      }
    };
    const hooked = function fetch(...args) {
      const [input, init] = args;
      let info = null;
      try {
        info = describe(input, init);
        if (!bridge.matches(info.url, info.method)) info = null;
      } catch (e) {
        info = null;
      }
      const promise = origFetch.call(this === undefined || this === null ? win : this, ...args);
      if (!info) return promise;
      const body = bodyText(input, init, info.isRequest);
      // Registered before the page sees the promise, so the clone is taken before the page's
      // own reaction can read the body.
      promise.then(wrap((res) => {
        let copy = null;
        try { copy = res.clone(); } catch (e) { return; }
        body.then((requestBody) => readCopy(res, copy, { url: info.url, method: info.method, requestBody }), () => {});
      }), wrap((err) => {
        body.then((requestBody) => {
          const sink = bridge.open({ url: info.url, method: info.method, requestBody, status: 0, contentType: '' });
          if (sink) sink.fail(`network error: ${err && err.message}`);
        }, () => {});
      }));
      return promise;
    };
    win.fetch = wrap(hooked);
  }

  const XHR = win.XMLHttpRequest;
  if (XHR && XHR.prototype) {
    const proto = XHR.prototype;
    const origOpen = proto.open;
    const origSend = proto.send;
    const pending = new WeakMap();
    const watch = (xhr, info) => {
      let sink = null;
      let offset = 0;
      let finished = false;
      const encoder = new TextEncoder();
      const textual = () => xhr.responseType === '' || xhr.responseType === 'text';
      const open = () => {
        if (!sink) sink = bridge.open({ ...info, status: xhr.status, contentType: xhr.getResponseHeader('content-type') || '' });
        return sink;
      };
      const drain = () => {
        if (!textual()) return;
        const text = xhr.responseText;
        if (text.length > offset) {
          const fresh = text.slice(offset);
          offset = text.length;
          const s = open();
          if (s) s.push(encoder.encode(fresh));
        }
      };
      const finish = () => {
        if (finished) return;
        finished = true;
        if (xhr.status === 0) { const s = open(); if (s) s.fail('network error'); return; }
        if (textual()) drain();
        else {
          const s = open();
          const r = xhr.response;
          if (s && r && typeof r.byteLength === 'number') s.push(new Uint8Array(r));
          else if (s && xhr.responseType === 'json' && r != null) s.push(encoder.encode(JSON.stringify(r)));
        }
        const s = open();
        if (s) s.end();
      };
      xhr.addEventListener('readystatechange', wrap(() => {
        if (xhr.readyState === 2) open();
        else if (xhr.readyState === 3) drain();
        else if (xhr.readyState === 4) finish();
      }));
      xhr.addEventListener('progress', wrap(drain));
      xhr.addEventListener('abort', wrap(() => { finished = true; const s = open(); if (s) s.fail('request aborted'); }));
    };
    proto.open = wrap(function open(...args) {
      const [method, url] = args;
      try {
        const info = { url: absolute(url), method: String(method).toUpperCase() };
        if (bridge.matches(info.url, info.method)) pending.set(this, info);
        else pending.delete(this);
      } catch (e) { /* never break the page's request */ }
      return origOpen.call(this, ...args);
    });
    proto.send = wrap(function send(...args) {
      const body = args[0];
      const info = pending.get(this);
      if (info) {
        try { watch(this, { ...info, requestBody: typeof body === 'string' ? body : null }); } catch (e) { /* as above */ }
      }
      return origSend.call(this, ...args);
    });
  }
}

/**
 * The page half of the bridge when the hooks run in an injected `<script>`: DOM events with
 * string details on a random event name (strings cross worlds everywhere). `matches` is a
 * synchronous cancelable event: the script's world calls `preventDefault()` on a match.
 * Bytes travel as binary strings (one char per byte), so binary framings survive.
 */
export function eventBridge(win, name) {
  'use strict';
  const doc = win.document;
  const Custom = win.CustomEvent;
  const dispatch = doc.dispatchEvent.bind(doc);
  const stringify = JSON.stringify;
  const fromCharCode = String.fromCharCode;
  let next = 0;
  const send = (msg, cancelable) => dispatch(new Custom(name, { detail: stringify(msg), cancelable: Boolean(cancelable) }));
  const binary = (u8) => {
    let s = '';
    for (let i = 0; i < u8.length; i += 0x8000) s += fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
    return s;
  };
  return {
    matches: (url, method) => !send({ op: 'match', url, method }, true),
    open(info) {
      next += 1;
      const id = next;
      send({ op: 'open', id, info });
      return {
        push: (u8) => send({ op: 'data', id, bytes: binary(u8) }),
        end: () => send({ op: 'end', id }),
        fail: (reason) => send({ op: 'fail', id, reason: String(reason) }),
      };
    },
    ready: () => send({ op: 'ready' }),
  };
}
