// The SSE channel against the managers' GM_xmlhttpRequest semantics (test/worlds/gm-api.js,
// here with the extension side in the same process): it opens only when the event stream really
// delivers (responseType 'stream', or a growing responseText), never with a manager that hands
// over the text only at the end; and each tab gets its own *.localhost connection group.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseTransport, plainHubUrls, spreadHubUrl, streamPlan } from '../../src/core/transports.js';
import { createGmApi, performRequest } from '../worlds/gm-api.js';
import { startStandInHub } from '../browser/stand-in-hub.js';

/**
 * GM_xmlhttpRequest with a manager's semantics; `*.localhost` and `localhost` resolved as a
 * browser does, or, with `unreachable`, the names it lists refused as a DNS forced elsewhere.
 */
function manager({ textMode, streams, manager: kind = null, unreachable = [], urls = [] }) {
  let deliver = null;
  const link = {
    post: (msg) => {
      if (msg.op === 'abort') return;
      if (msg.op !== 'xhr') return;
      const url = new URL(msg.url);
      urls.push(url.hostname);
      if (unreachable.some((n) => (n.startsWith('*.') ? url.hostname.endsWith(n.slice(1)) : url.hostname === n))) {
        queueMicrotask(() => deliver({ op: 'error', id: msg.id, error: 'NS_ERROR_UNKNOWN_HOST' }));
        return;
      }
      if (url.hostname.endsWith('.localhost') || url.hostname === 'localhost') url.hostname = '127.0.0.1';
      performRequest({ ...msg, url: url.href }, (reply) => deliver(reply));
    },
    onMessage: (fn) => { deliver = fn; },
  };
  return createGmApi({ link, textMode, streams, manager: kind }).GM_xmlhttpRequest;
}

function transport(hub, gmRequest, frames, more = {}) {
  return new SseTransport({
    hubUrl: hub.url, gmRequest, timers: globalThis, log: () => {},
    onFrame: (f) => frames.push(f), onClose: () => {}, ...more,
  });
}

/** The three managers as the test extensions model them, with what each says in GM_info. */
const MANAGERS = [
  ['ScriptCat 1.x', { textMode: 'final', streams: true }, { scriptHandler: 'ScriptCat', version: '1.3.2' }, 'stream'],
  ['Tampermonkey 5', { textMode: 'final', streams: true }, { scriptHandler: 'Tampermonkey', version: '5.4.1' }, 'stream'],
  ['Violentmonkey 2.47', { manager: 'violentmonkey' }, { scriptHandler: 'Violentmonkey', version: '2.47.0', injectInto: 'page' }, 'text'],
];

for (const [name, mode, info, how] of MANAGERS) {
  test(`SSE under ${name}: every frame arrives, in order, read as ${how}`, async () => {
    const hub = await startStandInHub();
    const frames = [];
    const t = transport(hub, manager(mode), frames, { manager: info });
    try {
      const welcome = await t.open(hello(hub));
      assert.equal(t.how, how);
      await hub.waitFrame((f) => f.frame.type === 'ack' && f.frame.received === 'welcome', { what: 'the ack' });
      const texts = Array.from({ length: 40 }, (_, i) => `第${i}条 frame ${i} ${'x'.repeat(i * 7)}`);
      for (const text of texts) hub.send(welcome.client_id, { type: 'deliver', text, auto_send: false });
      const started = Date.now();
      while (frames.length < texts.length && Date.now() - started < 5000) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(frames.map((f) => f.text), texts, 'nothing lost, nothing doubled');
    } finally {
      t.close();
      await hub.close();
    }
  });
}

test('the Violentmonkey model drops joined text when a type it does not know was asked for (the old script\'s loss)', async () => {
  const hub = await startStandInHub();
  const seen = [];
  const req = manager({ manager: 'violentmonkey' });
  const welcome = await new Promise((resolve, reject) => req({
    method: 'POST', url: `${hub.url}/send`, headers: { Authorization: `Bearer ${hub.token}` },
    data: JSON.stringify({ type: 'hello', token: hub.token, site: 'sim', url: 'https://sim.aicard.test/' }),
    onload: (r) => resolve(JSON.parse(r.responseText)), onerror: reject,
  }));
  let ctl;
  await new Promise((resolve) => {
    ctl = req({
      method: 'GET', url: `${hub.url}/events`, responseType: 'stream',
      headers: { Authorization: `Bearer ${hub.token}`, 'X-AIcard-Client': welcome.client_id, Accept: 'text/event-stream' },
      onprogress: (r) => { void r.response; seen.push(r.responseText); if (seen.length === 1) resolve(); },
    });
  });
  try {
    await new Promise((resolve, reject) => req({
      method: 'POST', url: `${hub.url}/send`, headers: { Authorization: `Bearer ${hub.token}`, 'X-AIcard-Client': welcome.client_id },
      data: JSON.stringify({ type: 'ack', received: 'welcome' }), onload: resolve, onerror: reject,
    }));
    for (let i = 0; i < 3; i += 1) hub.send(welcome.client_id, { type: 'deliver', text: `m${i}`, auto_send: false });
    const started = Date.now();
    const lost = () => seen.some((t, i) => i > 0 && t && !t.startsWith(seen[i - 1]));
    while (!lost() && Date.now() - started < 3000) await new Promise((r) => setTimeout(r, 5));
    assert.ok(lost(), `a later responseText no longer holds the earlier text: ${JSON.stringify(seen)}`);
  } finally {
    ctl.abort();
    await hub.close();
  }
});

test('streamPlan: a stream only from a manager that has one', () => {
  assert.equal(streamPlan({ scriptHandler: 'Violentmonkey', version: '2.47.0' }), 'text');
  assert.equal(streamPlan({ scriptHandler: 'Tampermonkey', version: '5.4.1' }), 'stream');
  assert.equal(streamPlan({ scriptHandler: 'ScriptCat', version: '1.3.2' }), 'stream');
  assert.equal(streamPlan({ scriptHandler: 'ScriptCat', version: '0.16.0' }), 'probe');
  assert.equal(streamPlan({ scriptHandler: 'Greasemonkey', version: '4.13' }), 'probe');
  assert.equal(streamPlan(null), 'probe');
});

test('an unreachable *.localhost name falls back to the plain loopback addresses, and every tab is told', async () => {
  const hub = await startStandInHub();
  const memo = new Map();
  const shared = { get: (k, d) => (memo.has(k) ? memo.get(k) : d), set: (k, v) => memo.set(k, v) };
  const urls = [];
  const gm = manager({ manager: 'violentmonkey', unreachable: ['*.localhost'], urls });
  const info = { scriptHandler: 'Violentmonkey', version: '2.47.0' };
  const frames = [];
  const a = transport(hub, gm, frames, { manager: info, memo: shared });
  let b = null;
  try {
    const welcome = await a.open(hello(hub));
    b = transport(hub, gm, [], { manager: info, memo: shared });
    assert.ok(urls[0].endsWith('.localhost'), 'the per-tab name was tried first');
    assert.match(a.hubUrl, /^http:\/\/(127\.0\.0\.1|localhost):\d+$/);
    assert.ok(Number(memo.get('sse_spread_broken')) > 0, 'the other tabs are told');
    hub.send(welcome.client_id, { type: 'deliver', text: 'after the fallback', auto_send: false });
    const started = Date.now();
    while (!frames.length && Date.now() - started < 5000) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(frames.map((f) => f.text), ['after the fallback']);
    assert.ok(!b.hubUrl.includes('.localhost'), 'a tab opened later starts on a plain address');
    assert.notEqual(new URL(b.hubUrl).hostname, new URL(a.hubUrl).hostname, 'and the next tab takes the other host (its own 6 connections)');
  } finally {
    a.close();
    b?.close();
    await hub.close();
  }
});

test('a hub that is down does not mark the per-tab names broken', async () => {
  const memo = new Map();
  const shared = { get: (k, d) => (memo.has(k) ? memo.get(k) : d), set: (k, v) => memo.set(k, v) };
  const t = new SseTransport({
    hubUrl: 'http://127.0.0.1:9', gmRequest: manager({ manager: 'violentmonkey' }), timers: globalThis, log: () => {},
    onFrame: () => {}, onClose: () => {}, manager: { scriptHandler: 'Violentmonkey' }, memo: shared,
  });
  await assert.rejects(t.open({ token: 't', site: 'sim', url: 'https://sim.aicard.test/' }), /unreachable/);
  assert.equal(memo.get('sse_spread_broken'), undefined);
  t.close();
});

test('plain addresses alternate between two hosts', () => {
  assert.deepEqual(plainHubUrls('http://127.0.0.1:8027', 0), ['http://127.0.0.1:8027', 'http://localhost:8027']);
  assert.deepEqual(plainHubUrls('http://127.0.0.1:8027', 1), ['http://localhost:8027', 'http://127.0.0.1:8027']);
  assert.deepEqual(plainHubUrls('https://hub.example.org', 1), ['https://hub.example.org']);
});

const hello = (hub) => ({ token: hub.token, site: 'sim', url: 'https://sim.aicard.test/' });

test('a manager not in the table is read as text first, and asked for a stream once text proved buffered', async () => {
  const hub = await startStandInHub();
  const gm = manager({ textMode: 'final', streams: true });
  const info = { scriptHandler: 'SomeNewMonkey', version: '1.0' };
  const first = transport(hub, gm, [], { manager: info });
  try {
    assert.equal(first.plan, 'text');
    await assert.rejects(first.open(hello(hub)), /does not stream responses/);
  } finally { first.close(); }
  const frames = [];
  const second = transport(hub, gm, frames, { manager: info });
  try {
    assert.equal(second.plan, 'stream');
    const welcome = await second.open(hello(hub));
    assert.equal(second.how, 'stream');
    await hub.waitFrame((f) => f.frame.type === 'ack' && f.frame.received === 'welcome' && f.clientId === welcome.client_id, { what: 'the ack' });
    hub.send(welcome.client_id, { type: 'deliver', text: '你好 🌏', auto_send: false });
    const started = Date.now();
    while (!frames.length && Date.now() - started < 5000) await new Promise((r) => setImmediate(r));
    assert.deepEqual(frames.map((f) => f.text), ['你好 🌏']);
  } finally {
    second.close();
    await hub.close();
  }
});

test('a manager that fills responseText only at the end is never reported connected', async () => {
  const hub = await startStandInHub();
  const t = transport(hub, manager({ textMode: 'final', streams: false }), []);
  try {
    await assert.rejects(t.open(hello(hub)), /does not stream responses/);
    assert.ok(!hub.frames.some((f) => f.frame.type === 'ack'), 'the hub was never told the stream works');
  } finally {
    t.close();
    await hub.close();
  }
});

test('each tab reaches a loopback hub under its own *.localhost name', () => {
  const a = spreadHubUrl('http://127.0.0.1:8027', () => 0.25);
  const b = spreadHubUrl('http://127.0.0.1:8027', () => 0.75);
  assert.match(a, /^http:\/\/aicard-[0-9a-f]{8}\.localhost:8027$/);
  assert.notEqual(a, b);
  assert.equal(spreadHubUrl('https://hub.example.org:9000'), 'https://hub.example.org:9000', 'a remote hub is used as it is');
  assert.match(spreadHubUrl('http://localhost:8027'), /\.localhost:8027$/);
});
