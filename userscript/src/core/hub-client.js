/**
 * The tab's connection to the hub: picks a transport, says hello (resuming the tab's client id),
 * queues frames while disconnected, and reconnects with backoff through ReconnectMachine. Its
 * `status` is the truth the panel shows: `open` only once a hub frame arrived over the channel
 * that carries the hub's frames.
 */
import { ReconnectMachine } from './backoff.js';
import { SseTransport, WebSocketTransport } from './transports.js';

const MAX_QUEUED_FRAMES = 2000;

export class HubClient {
  /**
   * @param {object} o
   * @param {string} o.hubUrl           e.g. http://127.0.0.1:8027
   * @param {() => object} o.helloFields token, site, url, title, label, role, version
   * @param {TabIdentity} o.identity    keeps client_id across reloads
   * @param {Function} o.WebSocketImpl  captured at document-start
   * @param {Function} o.gmRequest      GM_xmlhttpRequest, for the SSE fallback
   * @param {object} [o.manager]        GM_info: how the manager streams (transports.js streamPlan)
   * @param {object} [o.memo]           `{get, set}` in the manager's storage, shared by the tabs
   * @param {string[]} [o.transports]   what this world can use, in order (default ws, sse)
   * @param {() => Promise<object|null>} [o.wsCheck] null when nothing stands in a WebSocket's way;
   *   else `{notice, openWithinMs}` (Local Network Access not granted): the WebSocket gets only
   *   that long to open, since a pending permission prompt would hold it, and the notice is
   *   shown when it fails
   */
  constructor(o) {
    this.o = o;
    const kinds = o.transports || ['ws', ...(o.gmRequest ? ['sse'] : [])];
    this.machine = new ReconnectMachine(o.policy, o.random, kinds);
    this.transport = null;
    this.queue = [];
    this.welcome = null;
    this.listeners = { frame: new Set(), state: new Set() };
    this.status = { state: 'idle', transport: null, error: null };
    this.timers = o.timers;
  }

  on(kind, fn) {
    this.listeners[kind].add(fn);
    return () => this.listeners[kind].delete(fn);
  }

  emitState(patch) {
    this.status = { ...this.status, ...patch };
    for (const fn of this.listeners.state) fn(this.status);
  }

  start() {
    this.attempt();
  }

  stop() {
    this.machine.stop();
    this.transport?.close();
    this.emitState({ state: 'stopped' });
  }

  async attempt() {
    const kind = this.machine.connect();
    if (!kind) return;
    const caution = kind === 'ws' && this.o.wsCheck && this.machine.usable.length > 1 ? await this.o.wsCheck() : null;
    this.emitState({ state: 'connecting', transport: kind });
    const common = {
      hubUrl: this.o.hubUrl,
      timers: this.timers,
      log: this.o.log,
      onFrame: (frame) => this.dispatch(frame),
      onClose: () => this.lost(transport, 'connection closed'),
    };
    const transport = kind === 'ws'
      ? new WebSocketTransport({ ...common, WebSocketImpl: this.o.WebSocketImpl, doc: this.o.doc, openWithinMs: caution?.openWithinMs })
      : new SseTransport({ ...common, gmRequest: this.o.gmRequest, manager: this.o.manager, memo: this.o.memo });
    transport.heartbeatState = this.o.heartbeatState;
    this.transport = transport;
    try {
      const fields = { ...this.o.helloFields(), clientId: this.o.identity.clientId };
      const welcome = await transport.open(fields);
      if (this.transport !== transport) { transport.close(); return; }
      this.welcome = welcome;
      this.o.identity.clientId = welcome.client_id;
      this.machine.open();
      this.emitState({ state: 'open', transport: kind, error: null, clientId: welcome.client_id, role: welcome.role });
      this.dispatch(welcome);
      this.flush();
    } catch (err) {
      if (err.refused) this.machine.block(kind);
      if (caution?.notice) this.emitState({ notice: caution.notice });
      this.lost(transport, err.message);
    }
  }

  lost(transport, reason) {
    if (transport !== this.transport) return;
    transport.close();
    this.transport = null;
    const next = this.machine.lost();
    if (!next) return;
    this.emitState({ state: 'waiting', error: reason, retryInMs: next.delayMs, transport: next.transport });
    this.timers.setTimeout(() => this.attempt(), next.delayMs);
  }

  dispatch(frame) {
    for (const fn of this.listeners.frame) {
      try {
        fn(frame);
      } catch (err) {
        this.o.log('error', `frame handler failed: ${err.message}`);
      }
    }
  }

  get connected() {
    return this.status.state === 'open';
  }

  /** Sends now when connected, else queues (bounded: the oldest `chunk` frames go first). */
  send(frame) {
    if (this.connected && this.queue.length === 0 && this.transport?.send(frame)) return;
    this.queue.push(frame);
    if (this.queue.length > MAX_QUEUED_FRAMES) {
      const i = this.queue.findIndex((f) => f.type === 'chunk');
      this.queue.splice(i === -1 ? 0 : i, 1);
    }
    if (this.connected) this.flush();
  }

  /**
   * One of this tab's task attachments from the hub (`GET /files/ID`), through the manager's own
   * request function as bytes (`responseType: 'arraybuffer'`): the token and the client id go in
   * its headers, never into the page. Resolves with what the manager gave as the response
   * (ArrayBuffer, Blob, …; attach.js `bytesOf`); rejects on anything but 200.
   */
  fetchFile(id, { timeoutMs = 120_000 } = {}) {
    const request = this.o.gmRequest;
    if (!request) return Promise.reject(new Error('the userscript manager gives no GM_xmlhttpRequest / 脚本管理器未提供 GM_xmlhttpRequest'));
    const base = this.transport?.hubUrl || this.o.hubUrl;
    const clientId = this.status.clientId || this.o.identity?.clientId;
    const headers = { Authorization: `Bearer ${this.o.helloFields().token}` };
    if (clientId) headers['X-AIcard-Client'] = clientId;
    return new Promise((resolve, reject) => {
      const fail = (why) => reject(new Error(`GET /files/${id}: ${why}`));
      try {
        request({
          method: 'GET',
          url: `${base}/files/${encodeURIComponent(id)}`,
          headers,
          responseType: 'arraybuffer',
          timeout: timeoutMs,
          onload: (res) => {
            if (res.status !== 200) fail(`HTTP ${res.status}${res.status === 404 ? ' (unknown to the hub or not this tab\'s task)' : ''}`);
            else resolve(res.response ?? null);
          },
          onerror: () => fail('hub unreachable'),
          ontimeout: () => fail('timed out'),
        });
      } catch (err) {
        fail(err.message);
      }
    });
  }

  flush() {
    while (this.queue.length && this.connected) {
      if (!this.transport.send(this.queue[0])) return;
      this.queue.shift();
    }
  }
}
