// A probe appended to the userscript's text (so it shares its function scope, its world and its
// GM_* api): the page asks it to do things over DOM CustomEvents (string details, which cross
// worlds) and it reports what it saw the same way. The tests drive it from the page world with
// `probe(tab, cmd)` and read the reports with `probeLog` / `waitProbe`.
//
// Commands: {op:'info'} → {injectInto, scriptHandler, chromeRuntime};
// {op:'xhr', url, method?, data?, headers?, responseType?} → one report per GM callback
// ({ev, readyState, status, textLength, responseKind}), for a 'stream' response one
// {ev:'chunk', text} per read and {ev:'stream-end'}, and {ev:'load', text, status} at the end;
// {op:'fetch', url} / {op:'ws', url} → what the world's own fetch / WebSocket did, with timings.

export const PROBE_EVENT = 'aicard-world-probe';
export const PROBE_GLOBAL = '__aicardWorldProbe';

export function probeSource() {
  return `
;(function aicardWorldProbe() {
  const IN = ${JSON.stringify(`${PROBE_EVENT}:in`)};
  const OUT = ${JSON.stringify(`${PROBE_EVENT}:out`)};
  // A global of the script's world: visible from the page only when that world is the page's.
  window[${JSON.stringify(PROBE_GLOBAL)}] = 'defined by the userscript';
  const emit = (m) => document.dispatchEvent(new CustomEvent(OUT, { detail: JSON.stringify(m) }));
  const kind = (r) => (r === null || r === undefined ? String(r)
    : (typeof ReadableStream === 'function' && r instanceof ReadableStream) ? 'ReadableStream'
      : typeof r);
  const handlers = {
    info(cmd) {
      emit({ id: cmd.id, ev: 'info', injectInto: GM_info.injectInto, scriptHandler: GM_info.scriptHandler,
        chromeRuntime: typeof chrome !== 'undefined' && !!(chrome.runtime && chrome.runtime.connect) });
    },
    xhr(cmd) {
      const t0 = Date.now();
      const report = (ev) => (res) => emit({ id: cmd.id, ev, at: Date.now() - t0, readyState: res.readyState, status: res.status,
        textLength: (res.responseText || '').length, responseKind: kind(res.response) });
      let reading = false;
      const read = (res) => {
        if (reading || kind(res.response) !== 'ReadableStream') return;
        reading = true;
        const reader = res.response.getReader();
        const decoder = new TextDecoder();
        (function pump() {
          reader.read().then(({ done, value }) => {
            if (done) { emit({ id: cmd.id, ev: 'stream-end', at: Date.now() - t0 }); return; }
            emit({ id: cmd.id, ev: 'chunk', at: Date.now() - t0, text: decoder.decode(value, { stream: true }), isBytes: value instanceof Uint8Array });
            pump();
          }, (err) => emit({ id: cmd.id, ev: 'stream-error', error: String(err && err.message) }));
        })();
      };
      GM_xmlhttpRequest({
        method: cmd.method || 'GET', url: cmd.url, data: cmd.data, headers: cmd.headers, responseType: cmd.responseType,
        onloadstart: (res) => { report('loadstart')(res); read(res); },
        onreadystatechange: (res) => { report('readystatechange')(res); read(res); },
        onprogress: report('progress'),
        onerror: (res) => emit({ id: cmd.id, ev: 'error', error: String(res.error || '') }),
        ontimeout: report('timeout'),
        onload: (res) => emit({ id: cmd.id, ev: 'load', at: Date.now() - t0, status: res.status, readyState: res.readyState,
          text: kind(res.response) === 'ReadableStream' ? null : res.responseText, responseKind: kind(res.response) }),
      });
    },
    fetch(cmd) {
      const t0 = Date.now();
      fetch(cmd.url, { method: cmd.method || 'GET' }).then(
        (r) => emit({ id: cmd.id, ev: 'fetch', ok: true, status: r.status, at: Date.now() - t0 }),
        (e) => emit({ id: cmd.id, ev: 'fetch', ok: false, error: String(e && e.message), at: Date.now() - t0 }));
    },
    ws(cmd) {
      const t0 = Date.now();
      let ws;
      try { ws = new WebSocket(cmd.url); } catch (e) { emit({ id: cmd.id, ev: 'ws-throw', error: String(e && e.message), at: 0 }); return; }
      ws.onopen = () => { emit({ id: cmd.id, ev: 'ws-open', at: Date.now() - t0 }); ws.close(); };
      ws.onerror = () => emit({ id: cmd.id, ev: 'ws-error', at: Date.now() - t0 });
      ws.onclose = (e) => emit({ id: cmd.id, ev: 'ws-close', code: e.code, wasClean: e.wasClean, at: Date.now() - t0 });
    },
  };
  document.addEventListener(IN, (e) => {
    if (typeof e.detail !== 'string') return;
    const cmd = JSON.parse(e.detail);
    const fn = handlers[cmd.op];
    if (fn) fn(cmd); else emit({ id: cmd.id, ev: 'unknown-op' });
  });
})();
`;
}

/** Page world: sends `cmd` to the probe (a log listener is installed on first use). Returns its id. */
export async function probe(tab, cmd) {
  return tab.evaluate(({ cmd: c, IN, OUT }) => {
    if (!window.__probeLog) {
      window.__probeLog = [];
      document.addEventListener(OUT, (e) => window.__probeLog.push(JSON.parse(e.detail)));
    }
    window.__probeNext = (window.__probeNext || 0) + 1;
    const id = `p${window.__probeNext}`;
    document.dispatchEvent(new CustomEvent(IN, { detail: JSON.stringify({ ...c, id }) }));
    return id;
  }, { cmd, IN: `${PROBE_EVENT}:in`, OUT: `${PROBE_EVENT}:out` });
}

/** The probe's reports for request `id` so far. */
export function probeLog(tab, id) {
  return tab.evaluate((i) => (window.__probeLog || []).filter((m) => m.id === i), id);
}

/** Waits until the probe reported `ev` for `id`; resolves with that report. */
export function waitProbe(tab, id, ev, { timeout = 15000 } = {}) {
  return tab.waitFor(({ i, e }) => (window.__probeLog || []).find((m) => m.id === i && m.ev === e), { i: id, e: ev }, { timeout });
}
