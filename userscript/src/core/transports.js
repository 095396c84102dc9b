/**
 * The two ways a tab talks to the hub. Both take the same callbacks so the hub client does not
 * care which one is in use:
 *   - WebSocketTransport: `WS /realtime` (+ `WS /heartbeat` for app heartbeats);
 *   - SseTransport: `POST /send` + `GET /events` through GM_xmlhttpRequest, for when the
 *     page may not open a WebSocket to localhost (Chrome's Local Network Access denied).
 */
import { heartbeat, hello, readHubFrame } from './protocol.js';
import { EventStreamReader } from './event-stream.js';

const WELCOME_TIMEOUT_MS = 8000;

function wsUrl(hubUrl, path) {
  return hubUrl.replace(/^http/, 'ws') + path;
}

/**
 * Realtime + heartbeat WebSockets. `WebSocketImpl` and its `send` are captured by the caller at
 * document-start, before page scripts could replace or hook them.
 */
export class WebSocketTransport {
  constructor({ hubUrl, WebSocketImpl, timers, onFrame, onClose, log }) {
    Object.assign(this, { hubUrl, WebSocketImpl, timers, onFrame, onClose, log });
    this.name = 'ws';
    this.realtime = null;
    this.heart = null;
    this.closed = false;
    this.wsSend = WebSocketImpl.prototype.send;
  }

  /** Opens `/realtime`, says hello; resolves with the welcome frame. */
  open(helloFields) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new this.WebSocketImpl(wsUrl(this.hubUrl, '/realtime'));
      } catch (err) {
        reject(err);
        return;
      }
      this.realtime = ws;
      let welcomed = false;
      const timer = this.timers.setTimeout(() => {
        if (!welcomed) { reject(new Error('no welcome from hub')); this.close(); }
      }, WELCOME_TIMEOUT_MS);
      ws.onopen = () => this.wsSend.call(ws, JSON.stringify(hello(helloFields)));
      ws.onmessage = (ev) => {
        const { frame, error } = readHubFrame(String(ev.data));
        if (error) { this.log('warn', error); return; }
        if (!frame) return;
        if (!welcomed && frame.type === 'welcome') {
          welcomed = true;
          this.timers.clearTimeout(timer);
          this.openHeartbeat({ ...helloFields, clientId: frame.client_id }, frame.heartbeat_ms);
          resolve(frame);
          return;
        }
        if (!welcomed && frame.type === 'error') {
          this.timers.clearTimeout(timer);
          reject(new Error(`hub refused hello: ${frame.message || frame.code}`));
          return;
        }
        this.onFrame(frame);
      };
      ws.onerror = () => {};
      ws.onclose = () => {
        this.timers.clearTimeout(timer);
        if (!welcomed) reject(new Error('WebSocket to hub closed before welcome'));
        else this.lost();
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
 * SSE + POST fallback over GM_xmlhttpRequest (which the userscript manager performs outside
 * the page, so Local Network Access does not apply). `gmRequest` is GM_xmlhttpRequest.
 */
export class SseTransport {
  constructor({ hubUrl, gmRequest, onFrame, onClose, log }) {
    Object.assign(this, { hubUrl, gmRequest, onFrame, onClose, log });
    this.name = 'sse';
    this.closed = false;
    this.clientId = null;
    this.token = null;
    this.events = null;
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
        onerror: () => reject(new Error('hub unreachable (POST /send)')),
        ontimeout: () => reject(new Error('hub timed out (POST /send)')),
      });
    });
  }

  async open(helloFields) {
    this.token = helloFields.token;
    const welcome = await this.post(hello(helloFields));
    if (!welcome || welcome.type !== 'welcome') {
      throw new Error(`hub refused hello: ${welcome?.message || welcome?.type}`);
    }
    this.clientId = welcome.client_id;
    this.listen();
    return welcome;
  }

  /** `GET /events`: reads the stream as it grows (onprogress) and hands each frame on. */
  listen() {
    const reader = new EventStreamReader();
    let seen = 0;
    const consume = (res) => {
      const text = res.responseText || '';
      if (text.length <= seen) return;
      const fresh = text.slice(seen);
      seen = text.length;
      for (const data of reader.push(fresh)) {
        const { frame, error } = readHubFrame(data);
        if (error) this.log('warn', error);
        else if (frame) this.onFrame(frame);
      }
    };
    const ended = () => { if (!this.closed) { this.closed = true; this.onClose(); } };
    this.events = this.gmRequest({
      method: 'GET',
      url: `${this.hubUrl}/events`,
      headers: { ...this.headers(), Accept: 'text/event-stream' },
      onprogress: consume,
      onreadystatechange: (res) => { if (res.readyState >= 3) consume(res); },
      onload: (res) => { consume(res); ended(); },
      onerror: ended,
      onabort: ended,
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

  close() {
    this.closed = true;
    try { this.events?.abort?.(); } catch { /* already finished */ }
  }
}
