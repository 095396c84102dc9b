// The userscript as Chromium managers run it (./chromium.js): registered by our own MV3 test
// extension with chrome.userScripts, in the page (MAIN) world as ScriptCat does by default and in
// the USER_SCRIPT world (`@inject-into content`), with Local Network Access in force (the mock
// sites count as public) and the permission granted or not. Checks the world and the GM
// semantics, not reply capture. One browser per world; the LNA mode is switched with the
// context's permissions.
//   node --test --test-concurrency=1 --test-reporter=spec test/worlds/chromium.test.js
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { startMockServer } from '../../mock/server.js';
import { servedUserscript } from '../browser/harness.js';
import { ensureHubBinary, startRealHub, startRecordingProxy } from '../browser/real-hub.js';
import { launchChromium } from './chromium.js';
import { PROBE_GLOBAL, probe, probeLog, probeSource, waitProbe } from './probe.js';

/**
 * Streams two chunks per GET /stream?key=K: the first at once, the second only once the test
 * calls `release(K)` (after it saw the first arrive in the world). Any other path answers `ok`
 * and is recorded with its headers (no CORS headers: only an extension can read it cross-origin).
 */
async function startStreamServer() {
  const gates = new Map();
  const gate = (key) => {
    if (!gates.has(key)) {
      const g = {};
      g.arrived = new Promise((r) => { g.arrive = r; });
      g.released = new Promise((r) => { g.release = r; });
      gates.set(key, g);
    }
    return gates.get(key);
  };
  const seen = [];
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    for await (const _ of req) { /* drain */ }
    seen.push({ method: req.method, path: url.pathname, key: url.searchParams.get('key'), headers: req.headers });
    if (url.pathname === '/stream') {
      const g = gate(url.searchParams.get('key'));
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
      res.flushHeaders();
      res.write('first-chunk;');
      g.arrive();
      await g.released;
      res.end('second-chunk');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
  const sockets = new Set();
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    seen,
    arrived: (key) => gate(key).arrived,
    release: (key) => gate(key).release(),
    close: () => new Promise((r) => { for (const g of gates.values()) g.release(); for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}

const unavailable = ensureHubBinary();
const opts = { skip: unavailable ? `real hub unavailable: ${unavailable}` : false };
let mock; let hub; let proxy; let stream; let host; let userscript;

before(async () => {
  if (unavailable) return;
  mock = await startMockServer();
  hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`) });
  proxy = await startRecordingProxy(hub.url);
  stream = await startStreamServer();
  host = mock.sites.find((s) => s.name === 'deepseek').hosts[0];
  userscript = servedUserscript(proxy.url, hub.token) + probeSource();
});

after(async () => {
  await stream?.close();
  await proxy?.close();
  await hub?.close();
  await mock?.close();
});

/** In the page world: what a WebSocket to `url` does (first settled event, and the close). */
function pageWebSocket(url) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const events = [];
    const ws = new WebSocket(url);
    const at = () => Math.round(performance.now() - t0);
    ws.onopen = () => { events.push({ ev: 'open', at: at() }); resolve(events); ws.close(); };
    ws.onerror = () => events.push({ ev: 'error', at: at() });
    ws.onclose = (e) => { events.push({ ev: 'close', code: e.code, wasClean: e.wasClean, at: at() }); resolve(events); };
  });
}

for (const world of ['MAIN', 'USER_SCRIPT']) {
  describe(`chromium ${world} world`, opts, () => {
    let browser;
    const wsUrl = () => `${proxy.url.replace(/^http/, 'ws')}/realtime`;
    const pageOrigin = () => `${mock.scheme || 'https'}://${host}`;

    before(async () => {
      if (unavailable) return;
      browser = await launchChromium({ mock, world, lna: 'granted', userscript, gm: { textMode: 'final', streams: true } });
    });
    after(async () => { await browser?.close(); });

    for (const lna of ['granted', 'denied']) {
      test(`LNA ${lna}: runs in ${world}, hello reaches the hub, GM requests come from the extension`, async (t) => {
        if (lna === 'granted') t.diagnostic(`launch (browser + extension + user scripts on + registration): ${browser.launchMs} ms`);
        await browser.setLna(lna);
        const label = `${world}-${lna}`;
        const seen = proxy.frames.length;
        const tab = await browser.openTab({ host, values: { label, role: 'worker', debug: true } });
        const check = await browser.openTab({ host, path: '/lna-check.txt' }); // public origin, no CSP
        try {
          // Ran, in the intended world.
          await tab.waitFor(() => !!document.querySelector('aicard-panel'), null, { timeout: 10000 });
          const info = await waitProbe(tab, await probe(tab, { op: 'info' }), 'info');
          assert.equal(info.injectInto, world === 'MAIN' ? 'page' : 'content');
          assert.equal(info.scriptHandler, 'ScriptCat', 'without a manager named, the model is ScriptCat\'s');
          const globalSeen = await tab.evaluate((g) => typeof window[g], PROBE_GLOBAL);
          assert.equal(globalSeen, world === 'MAIN' ? 'string' : 'undefined', 'the script\'s global is page-visible only from MAIN');
          t.diagnostic(`debug helper window.mcpStatus from the page (must be undefined): ${await tab.evaluate(() => typeof window.mcpStatus)}`);

          // LNA is in force: a page-world WebSocket to the loopback hub opens only with the grant.
          const pageWs = await check.evaluate(pageWebSocket, wsUrl());
          t.diagnostic(`page-world ws://127.0.0.1 (${lna}): ${JSON.stringify(pageWs)}`);
          if (lna === 'granted') assert.equal(pageWs[0].ev, 'open');
          else {
            assert.deepEqual(pageWs.map((e) => e.ev), ['error', 'close']);
            assert.equal(pageWs[1].code, 1006);
            assert.ok(check.errors.some((e) => /ERR_BLOCKED_BY_LOCAL_NETWORK_ACCESS_CHECKS/.test(String(e))), 'blocked by LNA, not by something else');
          }
          // The world's own WebSocket: USER_SCRIPT is exempt from the page CSP, not from LNA; MAIN
          // meets the mock page's connect-src (a CSP refusal fires error, and no close follows).
          const wsId = await probe(tab, { op: 'ws', url: wsUrl() });
          const worldWs = await tab.waitFor(({ i }) => (window.__probeLog || []).find((m) => m.id === i && /ws-(open|error|throw)/.test(m.ev)), { i: wsId });
          t.diagnostic(`${world}-world ws://127.0.0.1 (${lna}): ${worldWs.ev} after ${worldWs.at} ms`);
          if (world === 'USER_SCRIPT') assert.equal(worldWs.ev, lna === 'granted' ? 'ws-open' : 'ws-error');

          // hello reaches the real hub through the recording proxy.
          const hello = await proxy.waitFrame((f) => proxy.frames.indexOf(f) >= seen && f.dir === 'up' && f.frame?.type === 'hello' && f.frame.label === label,
            { what: `${label} hello`, timeoutMs: 15000 });
          assert.equal(hello.frame.site, 'deepseek');
          assert.equal(hello.frame.role, 'worker', 'per-tab GM values reach the script');
          t.diagnostic(`hello over ${hello.path}`);
          if (hello.path === '/send') {
            // The SSE channel reaches the hub as aicard-<random>.localhost (one connection group per tab).
            const hubPort = new URL(proxy.url).port;
            const sends = (await browser.requests()).filter((r) => { const u = new URL(r.url); return u.pathname === '/send' && u.port === hubPort; });
            assert.ok(sends.length, 'POST /send was made by the extension');
            t.diagnostic(`hub answered the extension's POST /send with ${[...new Set(sends.map((r) => r.status).filter((s) => s !== null))].join(', ')}`);
          }
          if (lna === 'denied') assert.equal(hello.path, '/send', 'with loopback blocked, only GM_xmlhttpRequest (the extension) can reach the hub');

          // A GM request from the world is made by the extension: it reaches loopback with LNA
          // denied, cross-origin without CORS headers, and carries no page Origin.
          const key = `echo-${label}`;
          const echo = await probe(tab, { op: 'xhr', method: 'POST', url: `${stream.url}/echo?key=${key}`, data: '{"ping":1}', headers: { 'content-type': 'application/json' } });
          const load = await waitProbe(tab, echo, 'load');
          assert.equal(load.status, 200);
          assert.equal(load.text, 'ok');
          const req = stream.seen.find((r) => r.key === key);
          assert.notEqual(req.headers.origin, pageOrigin(), 'no page Origin');
          assert.ok(!req.headers.origin || req.headers.origin.startsWith('chrome-extension://'), `Origin ${req.headers.origin}`);
          assert.ok((await browser.requests()).some((r) => r.url.includes(`key=${key}`)), 'the service worker performed it');
          const pageFetch = await check.evaluate((u) => fetch(u, { mode: 'no-cors' }).then(() => 'reached', (e) => `failed: ${e.message}`), `${stream.url}/echo?key=page-${key}`);
          assert.equal(pageFetch, lna === 'granted' ? 'reached' : 'failed: Failed to fetch');
          assert.deepEqual(tab.errors.filter((e) => !/console\.error/.test(String(e))).map(String), [], 'no page errors');
        } finally {
          await check.close();
          await tab.close();
        }
      });
    }

    test('GM semantics (final, streams): responseText only at readyState 4; responseType stream yields bytes before the end', async () => {
      const tab = await browser.openTab({ host, values: { label: `${world}-gm` } });
      try {
        // Text mode: the first chunk reached the world (readyState 3), its text did not.
        const k1 = `final-${world}`;
        const id = await probe(tab, { op: 'xhr', url: `${stream.url}/stream?key=${k1}` });
        await stream.arrived(k1);
        const progress = await tab.waitFor(({ i }) => (window.__probeLog || []).find((m) => m.id === i && m.readyState === 3), { i: id });
        assert.equal(progress.textLength, 0, 'no responseText at readyState 3');
        const before4 = await probeLog(tab, id);
        assert.ok(before4.every((m) => m.readyState < 4 && m.textLength === 0), JSON.stringify(before4));
        stream.release(k1);
        const load = await waitProbe(tab, id, 'load');
        assert.equal(load.readyState, 4);
        assert.equal(load.text, 'first-chunk;second-chunk');

        // Stream mode: a ReadableStream of bytes from readyState 2; the first chunk is read while
        // the server still holds the request open.
        const k2 = `stream-${world}`;
        const sid = await probe(tab, { op: 'xhr', url: `${stream.url}/stream?key=${k2}`, responseType: 'stream' });
        const first = await waitProbe(tab, sid, 'chunk');
        assert.equal(first.text, 'first-chunk;');
        assert.equal(first.isBytes, true, 'chunks are Uint8Array');
        const early = await probeLog(tab, sid);
        assert.ok(!early.some((m) => m.ev === 'stream-end' || m.ev === 'load'), 'not ended before the server sent the rest');
        assert.ok(early.some((m) => m.ev === 'loadstart' && m.responseKind === 'ReadableStream'), 'response is a ReadableStream at loadstart');
        stream.release(k2);
        await waitProbe(tab, sid, 'stream-end');
        const all = await probeLog(tab, sid);
        assert.equal(all.filter((m) => m.ev === 'chunk').map((m) => m.text).join(''), 'first-chunk;second-chunk');
      } finally {
        await tab.close();
      }
    });

    test('GM semantics per tab (growing, no streams): text grows; responseType stream is ignored', async () => {
      const tab = await browser.openTab({ host, values: { label: `${world}-vm` }, gm: { textMode: 'growing', streams: false } });
      try {
        const k = `growing-${world}`;
        const id = await probe(tab, { op: 'xhr', url: `${stream.url}/stream?key=${k}`, responseType: 'stream' });
        await stream.arrived(k);
        const progress = await tab.waitFor(({ i }) => (window.__probeLog || []).find((m) => m.id === i && m.readyState === 3), { i: id });
        assert.equal(progress.textLength, 'first-chunk;'.length);
        assert.equal(progress.responseKind, 'string');
        stream.release(k);
        const load = await waitProbe(tab, id, 'load');
        assert.equal(load.text, 'first-chunk;second-chunk');
      } finally {
        await tab.close();
      }
    });
  });
}
