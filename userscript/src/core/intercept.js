/**
 * Network capture in the page: wraps `fetch` and `XMLHttpRequest` (installed at document-start,
 * before the site's code runs) and, for the requests the site's adapter recognises as its chat
 * stream, hands a copy of the response bytes to `onStream`. The page gets its response
 * untouched: fetch responses are cloned (the clone is a tee of the body), XHR is only listened to.
 */

/** Exports a function into the page when the manager runs us in an isolated world (Firefox). */
function pageFunction(win, fn) {
  // eslint-disable-next-line no-undef
  return typeof exportFunction === 'function' ? exportFunction(fn, win) : fn;
}

function absoluteUrl(win, url) {
  try {
    return new win.URL(String(url), win.location.href).href;
  } catch {
    return String(url);
  }
}

function requestInfo(win, input, init) {
  const isRequest = input && typeof input === 'object' && 'url' in input && typeof input.clone === 'function';
  const url = absoluteUrl(win, isRequest ? input.url : input);
  const method = String((init && init.method) || (isRequest && input.method) || 'GET').toUpperCase();
  return { url, method, isRequest };
}

async function bodyText(init, input, isRequest) {
  const body = init && init.body;
  if (typeof body === 'string') return body;
  if (body && typeof body === 'object' && typeof body.toString === 'function' && body.constructor?.name === 'URLSearchParams') {
    return body.toString();
  }
  if (body && typeof body.get === 'function' && typeof body.entries === 'function') {
    return new URLSearchParams([...body.entries()].filter(([, v]) => typeof v === 'string')).toString();
  }
  if (isRequest && !body) {
    try { return await input.clone().text(); } catch { return null; }
  }
  return null;
}

/**
 * Installs the wrappers on `win` (the page window). `matches(url, method)` says whether a request
 * is the chat stream; `onStream({url, method, status, headers, requestBody})` returns a sink
 * `{push(Uint8Array), end(), fail(reason)}` or null.
 */
export function installInterceptors(win, { matches, onStream, log }) {
  patchFetch(win, matches, onStream, log);
  patchXhr(win, matches, onStream, log);
}

function patchFetch(win, matches, onStream, log) {
  const original = win.fetch;
  if (typeof original !== 'function') return;
  const wrapped = function fetch(input, init) {
    let info;
    try {
      info = requestInfo(win, input, init);
      if (!matches(info.url, info.method)) info = null;
    } catch (err) {
      log('warn', `fetch match failed: ${err.message}`);
      info = null;
    }
    if (!info) return original.apply(this, arguments);
    const requestBody = bodyText(init, input, info.isRequest);
    // Clone inside the first reaction, before the page's own code can touch the body.
    return original.apply(this, arguments).then((res) => {
      let copy = null;
      try {
        copy = res.clone();
      } catch (err) {
        log('warn', `cannot clone response: ${err.message}`);
      }
      if (copy) requestBody.then((body) => readFetchCopy(res, copy, { ...info, requestBody: body }, onStream, log));
      return res;
    }, (err) => {
      requestBody.then((body) => {
        const sink = onStream({ ...info, status: 0, contentType: '', requestBody: body });
        sink?.fail(`network error: ${err && err.message}`);
      });
      throw err;
    });
  };
  win.fetch = pageFunction(win, wrapped);
}

async function readFetchCopy(res, copy, info, onStream, log) {
  const sink = onStream({ ...info, status: res.status, contentType: res.headers.get('content-type') || '' });
  if (!sink) return;
  if (!copy.body) {
    sink.end();
    return;
  }
  const reader = copy.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      sink.push(value);
    }
    sink.end();
  } catch (err) {
    sink.fail(`stream interrupted: ${err && err.message}`);
  }
}

function patchXhr(win, matches, onStream, log) {
  const XHR = win.XMLHttpRequest;
  if (!XHR) return;
  const proto = XHR.prototype;
  const originalOpen = proto.open;
  const originalSend = proto.send;
  const requests = new WeakMap();
  proto.open = pageFunction(win, function open(method, url) {
    try {
      const info = { url: absoluteUrl(win, url), method: String(method).toUpperCase() };
      if (matches(info.url, info.method)) requests.set(this, info);
      else requests.delete(this);
    } catch (err) {
      log('warn', `xhr match failed: ${err.message}`);
    }
    return originalOpen.apply(this, arguments);
  });
  proto.send = pageFunction(win, function send(body) {
    const info = requests.get(this);
    if (info) watchXhr(this, { ...info, requestBody: typeof body === 'string' ? body : null }, onStream);
    return originalSend.apply(this, arguments);
  });
}

function watchXhr(xhr, info, onStream) {
  const encoder = new TextEncoder();
  let sink = null;
  let offset = 0;
  let finished = false;
  const textual = () => xhr.responseType === '' || xhr.responseType === 'text';
  const open = () => {
    if (!sink) {
      sink = onStream({ ...info, status: xhr.status, contentType: xhr.getResponseHeader('content-type') || '' });
    }
    return sink;
  };
  const drain = () => {
    if (!textual()) return;
    const text = xhr.responseText;
    if (text.length > offset) {
      const fresh = text.slice(offset);
      offset = text.length;
      open()?.push(encoder.encode(fresh));
    }
  };
  const finish = () => {
    if (finished) return;
    finished = true;
    if (xhr.status === 0) { open()?.fail('network error'); return; }
    if (textual()) drain();
    else if (xhr.response instanceof ArrayBuffer) open()?.push(new Uint8Array(xhr.response));
    else if (xhr.responseType === 'json' && xhr.response != null) open()?.push(encoder.encode(JSON.stringify(xhr.response)));
    open()?.end();
  };
  xhr.addEventListener('readystatechange', () => {
    if (xhr.readyState === 2) open();
    else if (xhr.readyState === 3) drain();
    else if (xhr.readyState === 4) finish();
  });
  xhr.addEventListener('progress', drain);
  xhr.addEventListener('abort', () => { finished = true; open()?.fail('request aborted'); });
}
