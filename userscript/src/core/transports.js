/**
 * The two ways a tab talks to the hub. Both take the same callbacks so the hub client does not
 * care which one is in use, and both resolve `open()` only once a frame from the hub has really
 * arrived over the channel that will carry the hub's frames (docs/userscript.md: a tab that cannot receive
 * is never reported connected):
 *   - WebSocketTransport: `WS /realtime` (+ `WS /heartbeat` for app heartbeats), from the page
 *     or the isolated world. The page's CSP and Chrome's Local Network Access may refuse it;
 *     a refusal fails at once (`refused`), it is never waited out;
 *   - SseTransport: `POST /send` + `GET /events` through GM_xmlhttpRequest, which the manager
 *     performs from its extension (exempt from the page's CSP and from Local Network Access).
 *     The event stream is read as it arrives, the way the manager at hand gives an unfinished
 *     response (`streamPlan`): `responseType: 'stream'` from Tampermonkey and ScriptCat, the
 *     growing `responseText` from Violentmonkey (asked for with no `responseType` at all, and
 *     `.response` never read). Managers that hand over the text only at the end are found out
 *     by the stream's first event, the `welcome`, not arriving.
 */
import { ack, heartbeat, hello, readHubFrame } from './protocol.js';
import { EventStreamReader } from './event-stream.js';

const WELCOME_TIMEOUT_MS = 8000;
/** The hub writes an SSE keep-alive at least every 15 s; this much silence means a dead stream. */
const STREAM_SILENCE_MS = 45_000;

function wsUrl(hubUrl, path) {
  return hubUrl.replace(/^http/, 'ws') + path;
}

/** An error that says the way itself is closed (CSP, permission), not that the hub is down. */
export function refusal(message) {
  const err = new Error(message);
  err.refused = true;
  return err;
}

/**
 * Realtime + heartbeat WebSockets. `WebSocketImpl` and its `send` are captured by the caller at
 * document-start, before page scripts could replace or hook them.
 */
export class WebSocketTransport {
  constructor({ hubUrl, WebSocketImpl, timers, onFrame, onClose, log, doc, openWithinMs }) {
    Object.assign(this, { hubUrl, WebSocketImpl, timers, onFrame, onClose, log, doc, openWithinMs });
    this.name = 'ws';
    this.realtime = null;
    this.heart = null;
    this.closed = false;
    this.wsSend = WebSocketImpl.prototype.send;
  }

  /** Opens `/realtime`, says hello; resolves with the welcome frame. */
  open(helloFields) {
    return new Promise((resolve, reject) => {
      const url = wsUrl(this.hubUrl, '/realtime');
      let welcomed = false;
      let timer = null;
      let ws;
      const fail = (err) => {
        if (welcomed) return;
        this.timers.clearTimeout(timer);
        this.doc?.removeEventListener('securitypolicyviolation', onViolation);
        reject(err);
        this.close();
      };
      // Chromium reports a CSP refusal as an event (and an error before open); either is final.
      const onViolation = (ev) => {
        if (String(ev.blockedURI || '').startsWith(url.replace(/\/realtime$/, ''))) {
          fail(refusal(`the page's Content-Security-Policy refuses ${url} (${ev.violatedDirective})`));
        }
      };
      this.doc?.addEventListener('securitypolicyviolation', onViolation);
      try {
        ws = new this.WebSocketImpl(url);
      } catch (err) {
        fail(refusal(`WebSocket refused: ${err.message}`));
        return;
      }
      this.realtime = ws;
      let opened = false;
      timer = this.timers.setTimeout(() => fail(new Error('no welcome from hub')), WELCOME_TIMEOUT_MS);
      // Not granted Local Network Access: a prompt may hold the socket; do not wait it out.
      const openTimer = this.openWithinMs
        ? this.timers.setTimeout(() => { if (!opened) fail(new Error(`WebSocket did not open within ${this.openWithinMs} ms (Local Network Access?)`)); }, this.openWithinMs)
        : null;
      ws.onopen = () => {
        opened = true;
        this.timers.clearTimeout(openTimer);
        this.wsSend.call(ws, JSON.stringify(hello(helloFields)));
      };
      ws.onmessage = (ev) => {
        const { frame, error } = readHubFrame(String(ev.data));
        if (error) { this.log('warn', error); return; }
        if (!frame) return;
        if (!welcomed && frame.type === 'welcome') {
          welcomed = true;
          this.timers.clearTimeout(timer);
          this.doc?.removeEventListener('securitypolicyviolation', onViolation);
          this.openHeartbeat({ ...helloFields, clientId: frame.client_id }, frame.heartbeat_ms);
          resolve(frame);
          return;
        }
        if (!welcomed && frame.type === 'error') {
          fail(new Error(`hub refused hello: ${frame.message || frame.code}`));
          return;
        }
        this.onFrame(frame);
      };
      // A socket refused by the page's CSP fires error but never close: fail on the error.
      ws.onerror = () => { if (!opened) fail(new Error('WebSocket to hub could not open (hub down, CSP or Local Network Access)')); };
      ws.onclose = () => {
        if (!welcomed) {
          fail(opened ? new Error('WebSocket to hub closed before welcome') : new Error('WebSocket to hub could not open (hub down, CSP or Local Network Access)'));
        } else this.lost();
      };
    });
  }

  /** `/heartbeat` socket: hello, then an app heartbeat every `intervalMs`; lost answers close both. */
  openHeartbeat(helloFields, intervalMs) {
    const every = Math.max(1000, Number(intervalMs) || 15000);
    let lastAnswer = Date.now();
    const ws = new this.WebSocketImpl(wsUrl(this.hubUrl, '/heartbeat'));
    this.heart = ws;
    ws.onopen = () => this.wsSend.call(ws, JSON.stringify(hello(helloFields)));
    ws.onmessage = () => { lastAnswer = Date.now(); };
    ws.onerror = () => {};
    this.heartTimer = this.timers.setInterval(() => {
      if (Date.now() - lastAnswer > every * 3) { this.log('warn', 'hub heartbeat lost'); this.lost(); return; }
      if (ws.readyState === 1) this.wsSend.call(ws, JSON.stringify(heartbeat(this.heartbeatState?.() || {})));
    }, every);
  }

  send(frame) {
    if (!this.realtime || this.realtime.readyState !== 1) return false;
    this.wsSend.call(this.realtime, JSON.stringify(frame));
    return true;
  }

  lost() {
    if (this.closed) return;
    this.close();
    this.onClose();
  }

  close() {
    this.closed = true;
    if (this.heartTimer) this.timers.clearInterval(this.heartTimer);
    for (const ws of [this.realtime, this.heart]) {
      if (ws) { ws.onclose = null; ws.onmessage = null; try { ws.close(); } catch { /* already closed */ } }
    }
  }
}

/**
 * Browsers keep at most 6 HTTP/1.1 connections per host, for every page and extension of the
 * profile together, and each tab's event stream holds one open: with the hub at one address, the
 * seventh tab on the SSE channel could never connect. Every subdomain of `localhost` is loopback
 * (RFC 6761; Chromium and Firefox resolve it themselves, without DNS) and its own connection
 * group, so each tab talks to the hub as `aicard-<random>.localhost`. The hub's Host check accepts
 * those names; a hub URL that is not loopback is used as it is.
 */
export function spreadHubUrl(hubUrl, random = Math.random) {
  let url;
  try { url = new URL(hubUrl); } catch { return hubUrl; }
  if (!LOOPBACK_NAMES.includes(url.hostname)) return hubUrl;
  url.hostname = `aicard-${Math.floor(random() * 0xffffffff).toString(16).padStart(8, '0')}.localhost`;
  return url.href.replace(/\/+$/, '');
}

const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]'];
/** How long a tab remembers (for every tab, in the manager's storage) that *.localhost failed. */
const SPREAD_BROKEN_MS = 10 * 60_000;

/**
 * The hub's plain loopback addresses, for when the per-tab `*.localhost` names cannot be
 * reached (a browser whose DNS is forced elsewhere, a proxy that takes them): `127.0.0.1` and
 * `localhost` are two hosts, so two connection groups of 6; `slot` (a counter shared by the tabs)
 * puts every other tab on the other one first. Each tab tries the other when its first fails.
 */
export function plainHubUrls(hubUrl, slot = 0) {
  let url;
  try { url = new URL(hubUrl); } catch { return [hubUrl]; }
  if (!LOOPBACK_NAMES.includes(url.hostname) && !url.hostname.endsWith('.localhost')) return [hubUrl];
  const names = ['127.0.0.1', 'localhost'];
  if (slot % 2 === 1) names.reverse();
  return names.map((name) => { url.hostname = name; return url.href.replace(/\/+$/, ''); });
}

/**
 * How a manager's GM_xmlhttpRequest gives a response that has not ended, from its source and
 * documentation (docs/userscript.md has the table):
 *   - 'stream': ask `responseType: 'stream'`, read `response` (a ReadableStream) from
 *     `onloadstart` on — Tampermonkey (documented type), ScriptCat 1.x (its MV3 rewrite);
 *   - 'text': ask no `responseType` and read the growing `responseText`, never `response` —
 *     Violentmonkey 2.x, which knows no 'stream' (it warns `Unknown responseType`, falls back
 *     to text, and, with a type set, a read of `response` or of a joined `responseText`
 *     discards the text it had joined, so later reads hold only the newer chunks);
 *   - 'probe' (a manager not in the table): text first, 'stream' once text proved buffered.
 */
export function streamPlan(info) {
  let name = '';
  let version = '';
  try {
    name = String((info && info.scriptHandler) || '').toLowerCase();
    version = String((info && info.version) || '');
  } catch { /* a hostile or odd GM_info: unknown manager */ }
  const major = Number.parseInt(version, 10);
  if (name === 'violentmonkey') return 'text';
  if (name === 'tampermonkey') return 'stream';
  if (name === 'scriptcat') return major >= 1 ? 'stream' : 'probe';
  return 'probe';
}

/** What a probing tab learned: the manager buffers text, so ask it for a stream. */
let probedBuffered = false;

/** True for a ReadableStream from any realm (no `instanceof`: the manager's realm is not ours). */
function isStream(value) {
  return Boolean(value && typeof value === 'object' && typeof value.getReader === 'function');
}

/**
 * SSE + POST over GM_xmlhttpRequest. `gmRequest` is GM_xmlhttpRequest (or GM.xmlHttpRequest).
 * `open()` resolves only after the event stream delivered its first event (the hub's `welcome`)
 * and the hub was told so (`ack`), which is when the hub starts handing this tab frames.
 */
export class SseTransport {
  /**
   * `manager`: GM_info (picks `streamPlan`). `memo`: `{get(key, fallback), set(key, value)}`,
   * the manager's storage shared by the tabs (remembers that *.localhost failed, and deals the
   * plain addresses out in turn); in memory when absent.
   */
  constructor({ hubUrl, gmRequest, onFrame, onClose, log, timers, manager = null, memo = null, random = Math.random }) {
    Object.assign(this, { baseUrl: hubUrl, gmRequest, onFrame, onClose, log, timers, memo: memo || memoryMemo() });
    const brokenAt = Number(this.memo.get('sse_spread_broken', 0)) || 0;
    this.spread = Date.now() - brokenAt > SPREAD_BROKEN_MS;
    this.hubUrl = this.spread ? spreadHubUrl(hubUrl, random) : this.plainUrls()[0];
    this.plan = streamPlan(manager);
    if (this.plan === 'probe') this.plan = probedBuffered ? 'stream' : 'text';
    this.name = 'sse';
    this.closed = false;
    this.clientId = null;
    this.token = null;
    this.events = null;
    this.how = null; // 'stream' | 'text': how the manager gives us the event stream
  }

  /** The plain loopback addresses, this tab's turn first (a counter in the shared memo). */
  plainUrls() {
    if (!this.slot) {
      const n = Number(this.memo.get('sse_plain_slot', 0)) || 0;
      this.memo.set('sse_plain_slot', (n + 1) % 1024);
      this.slot = { n };
    }
    return plainHubUrls(this.baseUrl, this.slot.n);
  }

  headers() {
    const h = { 'Content-Type': 'application/json', Authorization: `Bearer ${this.token}` };
    if (this.clientId) h['X-AIcard-Client'] = this.clientId;
    return h;
  }

  post(frame) {
    return new Promise((resolve, reject) => {
      this.gmRequest({
        method: 'POST',
        url: `${this.hubUrl}/send`,
        headers: this.headers(),
        data: JSON.stringify(frame),
        timeout: WELCOME_TIMEOUT_MS,
        onload: (res) => {
          const { frame: reply, error } = readHubFrame(res.responseText || '');
          if (res.status >= 400 || error) reject(new Error(`hub answered ${res.status}: ${error || reply?.message || ''}`));
          else resolve(reply);
        },
        onerror: () => reject(Object.assign(new Error(`hub unreachable (POST ${this.hubUrl}/send)`), { unreachable: true })),
        ontimeout: () => reject(Object.assign(new Error(`hub timed out (POST ${this.hubUrl}/send)`), { unreachable: true })),
      });
    });
  }

  async open(helloFields) {
    this.token = helloFields.token;
    const welcome = await this.hello(helloFields);
    if (!welcome || welcome.type !== 'welcome') {
      throw new Error(`hub refused hello: ${welcome?.message || welcome?.type}`);
    }
    this.clientId = welcome.client_id;
    await this.listen();
    await this.post(ack('welcome'));
    return welcome;
  }

  /**
   * `hello` over `POST /send`. When the per-tab name cannot be reached (no answer at all, not an
   * HTTP error), the hub's plain addresses are tried in turn, and every tab is told (memo) to
   * start there for a while.
   */
  async hello(helloFields) {
    const urls = [...new Set(this.spread ? [this.hubUrl, ...this.plainUrls()] : this.plainUrls())];
    let last = null;
    for (const [i, url] of urls.entries()) {
      this.hubUrl = url;
      try {
        const welcome = await this.post(hello(helloFields));
        if (i > 0 && this.spread) {
          // Only now is it the name, not the hub being down.
          this.spread = false;
          this.memo.set('sse_spread_broken', Date.now());
        }
        return welcome;
      } catch (err) {
        if (!err.unreachable) throw err;
        if (i === 0 && this.spread) this.log('warn', `${err.message}: trying the plain loopback addresses (is *.localhost sent elsewhere by DNS or a proxy?) / 改用 127.0.0.1 / localhost 连接 hub`);
        last = err;
      }
    }
    this.hubUrl = urls[0];
    throw last;
  }

  /**
   * `GET /events`, read as it arrives. Resolves when the stream's first event (the welcome)
   * came through; rejects when none does in time, which is what a manager that buffers the
   * whole response looks like.
   */
  listen() {
    return new Promise((resolve, reject) => {
      const reader = new EventStreamReader();
      const decoder = new TextDecoder();
      let seen = 0;
      let first = true;
      let lastByte = Date.now();
      const timer = this.timers.setTimeout(() => {
        first = false; // the abort below must not report a different cause
        if (this.plan === 'text' && seen === 0) probedBuffered = true; // next time: ask for a stream
        this.timers.setTimeout(() => this.closeStream(), 0);
        reject(new Error(`no event from GET /events in ${WELCOME_TIMEOUT_MS / 1000} s: this userscript manager does not stream responses (it needs responseType 'stream' or a growing responseText) / 用户脚本管理器不支持流式响应`));
      }, WELCOME_TIMEOUT_MS);
      const text = (fresh) => {
        lastByte = Date.now();
        for (const data of reader.push(fresh)) {
          const { frame, error } = readHubFrame(data);
          if (error) { this.log('warn', error); continue; }
          if (!frame) continue;
          if (first) {
            first = false;
            this.timers.clearTimeout(timer);
            if (frame.type === 'welcome') resolve(frame);
            else reject(new Error(`the event stream began with ${frame.type}, not welcome`));
            continue;
          }
          this.onFrame(frame);
        }
      };
      const readStream = async (stream) => {
        const r = stream.getReader();
        try {
          for (;;) {
            const { done, value } = await r.read();
            if (done || this.closed) break;
            text(decoder.decode(value, { stream: true }));
          }
        } catch (err) {
          if (!this.closed) this.log('warn', `event stream broke: ${err && err.message}`);
        }
        ended();
      };
      const seeResponse = (res) => {
        if (!res) return;
        // Only a manager asked for a stream is asked for `response` before the end: reading it
        // is what makes Violentmonkey drop the text it had joined.
        if (this.plan === 'stream' && this.how === null && isStream(res.response)) {
          this.how = 'stream';
          readStream(res.response);
          return;
        }
        if (this.how === 'stream') return;
        const t = typeof res.responseText === 'string' ? res.responseText : '';
        if (t.length > seen) {
          this.how = 'text';
          const fresh = t.slice(seen);
          seen = t.length;
          text(fresh);
        }
      };
      const ended = () => {
        this.timers.clearTimeout(timer);
        if (first) { first = false; reject(new Error('GET /events ended before its first event')); return; }
        if (!this.closed) { this.close(); this.onClose(); }
      };
      this.events = this.gmRequest({
        method: 'GET',
        url: `${this.hubUrl}/events`,
        headers: { ...this.headers(), Accept: 'text/event-stream' },
        ...(this.plan === 'stream' ? { responseType: 'stream' } : {}),
        onloadstart: seeResponse,
        onreadystatechange: (res) => { if (res.readyState >= 2) seeResponse(res); },
        onprogress: seeResponse,
        onload: (res) => { if (this.how !== 'stream') { seeResponse(res); ended(); } },
        onerror: ended,
        onabort: ended,
        ontimeout: ended,
      });
      this.watchdog = this.timers.setInterval(() => {
        if (!first && Date.now() - lastByte > STREAM_SILENCE_MS) {
          this.log('warn', 'event stream silent: reconnecting');
          this.closeStream();
          ended();
        }
      }, 5000);
    });
  }

  send(frame) {
    if (this.closed || !this.clientId) return false;
    // One POST at a time, so the hub sees frames in the order they were sent.
    this.chain = (this.chain || Promise.resolve()).then(() => this.post(frame)).then((reply) => {
      if (reply && reply.type === 'error') this.log('warn', `hub error: ${reply.message}`);
    }, (err) => this.log('warn', err.message));
    return true;
  }

  closeStream() {
    const events = this.events;
    this.events = null;
    try { events?.abort?.(); } catch { /* already finished */ }
  }

  close() {
    this.closed = true;
    if (this.watchdog) this.timers.clearInterval(this.watchdog);
    this.closeStream();
  }
}

/** A memo in this tab only, for when no manager storage is given. */
function memoryMemo() {
  const m = new Map();
  return { get: (k, d) => (m.has(k) ? m.get(k) : d), set: (k, v) => { m.set(k, v); } };
}
