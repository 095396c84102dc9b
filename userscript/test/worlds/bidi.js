// A minimal WebDriver BiDi client over the `ws` package: commands as promises, events as
// listeners, and the LocalValue / RemoteValue conversions script.callFunction needs.
// Spec: https://w3c.github.io/webdriver-bidi/ (Firefox implements it natively; no driver binary).
import WebSocket from 'ws';

export class BiDi {
  /** Connects to a BiDi endpoint (e.g. `ws://127.0.0.1:PORT/session`). */
  static connect(url) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 512 * 1024 * 1024 });
      ws.once('open', () => resolve(new BiDi(ws)));
      ws.once('error', reject);
    });
  }

  constructor(ws) {
    this.ws = ws;
    this.nextId = 0;
    this.pending = new Map();
    this.listeners = new Map();
    this.closed = false;
    ws.on('message', (data) => this.#receive(JSON.parse(String(data))));
    ws.on('close', () => {
      this.closed = true;
      for (const { reject, method } of this.pending.values()) reject(new Error(`BiDi connection closed during ${method}`));
      this.pending.clear();
    });
    ws.on('error', () => { /* surfaced through close */ });
  }

  #receive(msg) {
    if (msg.type === 'event') {
      for (const fn of [...(this.listeners.get(msg.method) || [])]) {
        try { fn(msg.params); } catch (err) { console.error(err); }
      }
      return;
    }
    const call = this.pending.get(msg.id);
    if (!call) return;
    this.pending.delete(msg.id);
    if (msg.type === 'error') {
      const err = new Error(`${call.method}: ${msg.error}: ${msg.message}`);
      err.bidiError = msg.error;
      call.reject(err);
    } else call.resolve(msg.result);
  }

  /** Sends one command; resolves with its result, rejects with its error. */
  send(method, params = {}) {
    if (this.closed) return Promise.reject(new Error(`BiDi connection closed (${method})`));
    this.nextId += 1;
    const id = this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Adds a listener for an event (subscribe to it with session.subscribe too); returns an off(). */
  on(event, fn) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event).add(fn);
    return () => this.listeners.get(event)?.delete(fn);
  }

  close() {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => { this.ws.once('close', resolve); this.ws.close(); });
  }
}

/** A reference to a page node (a BiDi shared id), as returned by fromRemoteValue. */
export class NodeRef {
  constructor(sharedId, nodeType, localName) {
    this.sharedId = sharedId;
    this.nodeType = nodeType;
    this.localName = localName;
  }
}

/** A JS value → BiDi LocalValue. NodeRefs and `{sharedId}` objects (references) pass through. */
export function toLocalValue(v) {
  if (v === undefined) return { type: 'undefined' };
  if (v === null) return { type: 'null' };
  switch (typeof v) {
    case 'string': return { type: 'string', value: v };
    case 'boolean': return { type: 'boolean', value: v };
    case 'bigint': return { type: 'bigint', value: String(v) };
    case 'number':
      if (Number.isNaN(v)) return { type: 'number', value: 'NaN' };
      if (Object.is(v, -0)) return { type: 'number', value: '-0' };
      if (v === Infinity) return { type: 'number', value: 'Infinity' };
      if (v === -Infinity) return { type: 'number', value: '-Infinity' };
      return { type: 'number', value: v };
    default: break;
  }
  if (Array.isArray(v)) return { type: 'array', value: v.map(toLocalValue) };
  if (v instanceof Date) return { type: 'date', value: v.toISOString() };
  if (v instanceof RegExp) return { type: 'regexp', value: { pattern: v.source, flags: v.flags } };
  if (v instanceof Map) return { type: 'map', value: [...v].map(([k, x]) => [typeof k === 'string' ? k : toLocalValue(k), toLocalValue(x)]) };
  if (v instanceof Set) return { type: 'set', value: [...v].map(toLocalValue) };
  if (v instanceof NodeRef) return { sharedId: v.sharedId };
  if (typeof v === 'object' && typeof v.sharedId === 'string' && Object.keys(v).every((k) => k === 'sharedId' || k === 'handle')) return v;
  if (typeof v === 'function') throw new TypeError('functions cannot be passed to the page');
  return { type: 'object', value: Object.entries(v).map(([k, x]) => [k, toLocalValue(x)]) };
}

/**
 * A BiDi RemoteValue → a JS value. Nodes become NodeRefs `{sharedId, nodeType, localName}`
 * (usable as arguments again); windows, functions, promises … become `{type}` descriptions.
 */
export function fromRemoteValue(r) {
  if (!r) return undefined;
  switch (r.type) {
    case 'undefined': return undefined;
    case 'null': return null;
    case 'string': case 'boolean': return r.value;
    case 'number':
      if (typeof r.value === 'number') return r.value;
      return { NaN, '-0': -0, Infinity, '-Infinity': -Infinity }[r.value];
    case 'bigint': return BigInt(r.value);
    case 'array': case 'set': case 'nodelist': case 'htmlcollection':
      return r.value ? r.value.map(fromRemoteValue) : [];
    case 'object':
      return Object.fromEntries((r.value || []).map(([k, x]) => [typeof k === 'string' ? k : String(fromRemoteValue(k)), fromRemoteValue(x)]));
    case 'map':
      return new Map((r.value || []).map(([k, x]) => [typeof k === 'string' ? k : fromRemoteValue(k), fromRemoteValue(x)]));
    case 'date': return new Date(r.value);
    case 'regexp': return new RegExp(r.value.pattern, r.value.flags || '');
    case 'node': return new NodeRef(r.sharedId, r.value?.nodeType, r.value?.localName);
    case 'error': return Object.assign(new Error('page error object'), { remote: r });
    default: return { type: r.type };
  }
}

/** The message of a script.callFunction / script.evaluate exception result. */
export function exceptionText(result) {
  const d = result.exceptionDetails || {};
  const frames = (d.stackTrace?.callFrames || []).slice(0, 4).map((f) => `    at ${f.functionName || '<anon>'} (${f.url}:${f.lineNumber + 1}:${f.columnNumber + 1})`);
  return [d.text || 'page exception', ...frames].join('\n');
}
