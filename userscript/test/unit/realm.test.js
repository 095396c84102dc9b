// The network hooks' realm plumbing, outside a browser: which mode each world gets, and that the
// page hooks are self-contained (they run from their own source text in a fresh realm, as the
// injected <script> runs them) and hand the page its own promise while we read a clone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import vm from 'node:vm';
import { readFileSync } from 'node:fs';
import { chooseMode, managerWorld, pageWindowOf } from '../../src/core/realm.js';
import { eventBridge, pageHooks } from '../../src/core/page-hooks.js';

test('the manager\'s word comes before the features', () => {
  const wrapper = {}; // a manager's `window` in its sandbox: never the page's window itself
  const page = {};
  const polyfill = (f) => f; // Violentmonkey's exportFunction outside Firefox's sandbox
  const native = Function.prototype.bind.call(function exportFunction() {}, null); // prints as native code
  const vm = (injectInto, browserName) => ({ scriptHandler: 'Violentmonkey', version: '2.47.0', injectInto, platform: { browserName } });
  assert.equal(chooseMode({ win: page, ownWindow: wrapper, exportFn: polyfill, info: vm('page', 'firefox'), hasRuntime: false }), 'page', 'Violentmonkey page mode in Firefox: not the sandbox');
  assert.equal(chooseMode({ win: page, ownWindow: wrapper, exportFn: polyfill, info: vm('page', 'chrome'), hasRuntime: false }), 'page');
  assert.equal(chooseMode({ win: {}, ownWindow: wrapper, exportFn: native, info: vm('content', 'firefox'), hasRuntime: false }), 'xray', 'Violentmonkey content mode / CSP fallback in Firefox');
  assert.equal(chooseMode({ win: {}, ownWindow: wrapper, exportFn: polyfill, info: vm('content', 'chrome'), hasRuntime: false }), 'inject', 'Violentmonkey content mode in Chromium: its runtime is hidden, its exportFunction a polyfill');
  const tm = (sandboxMode) => ({ scriptHandler: 'Tampermonkey', version: '5.4.1', sandboxMode });
  assert.equal(chooseMode({ win: page, ownWindow: wrapper, exportFn: undefined, info: tm('raw'), hasRuntime: false }), 'page');
  assert.equal(chooseMode({ win: page, ownWindow: wrapper, exportFn: native, info: tm('js'), hasRuntime: false }), 'xray', 'Tampermonkey USERSCRIPT_WORLD in Firefox');
  assert.equal(chooseMode({ win: page, ownWindow: wrapper, exportFn: undefined, info: tm('js'), hasRuntime: false }), 'page', 'Tampermonkey "js" is raw outside Firefox');
  assert.equal(chooseMode({ win: wrapper, ownWindow: wrapper, exportFn: undefined, info: tm('dom'), hasRuntime: true }), 'inject');
  const sc = { scriptHandler: 'ScriptCat', version: '1.3.2', sandboxMode: 'raw' };
  assert.equal(chooseMode({ win: wrapper, ownWindow: wrapper, exportFn: undefined, info: sc, hasRuntime: true }), 'inject', 'ScriptCat\'s sandboxMode is always raw: its USER_SCRIPT world is found by the runtime');
  assert.equal(chooseMode({ win: page, ownWindow: page, exportFn: undefined, info: sc, hasRuntime: false }), 'page');
});

test('Violentmonkey\'s content-mode unsafeWindow is the sandbox: the hooks go on wrappedJSObject', () => {
  const pageWin = { fetch: () => {} };
  const sandboxGlobal = { wrappedJSObject: pageWin };
  assert.equal(pageWindowOf(sandboxGlobal), pageWin);
  assert.equal(pageWindowOf(pageWin), pageWin, 'a window that is already the page\'s stays');
});

test('mode per world', () => {
  const own = {};
  const page = {};
  const exportFn = Function.prototype.bind.call(function exportFunction() {}, null);
  assert.equal(chooseMode({ win: page, ownWindow: own, exportFn, info: null, hasRuntime: true }), 'xray', 'Firefox sandbox');
  assert.equal(chooseMode({ win: own, ownWindow: own, exportFn: undefined, info: { injectInto: 'page' }, hasRuntime: false }), 'page');
  assert.equal(chooseMode({ win: own, ownWindow: own, exportFn: undefined, info: { injectInto: 'content' }, hasRuntime: false }), 'inject');
  assert.equal(chooseMode({ win: own, ownWindow: own, exportFn: undefined, info: null, hasRuntime: true }), 'inject', 'an extension runtime is never visible in the page world');
  assert.equal(chooseMode({ win: own, ownWindow: own, exportFn: undefined, info: null, hasRuntime: false }), 'page');
  assert.equal(managerWorld({ sandboxMode: 'raw' }), 'page');
  assert.equal(managerWorld({ sandboxMode: 'js' }), 'sandbox');
  assert.equal(managerWorld({ sandboxMode: 'dom' }), 'isolated');
  assert.equal(managerWorld({ scriptHandler: 'ScriptCat', sandboxMode: 'raw' }), null);
  assert.equal(managerWorld({}), null);
});

/** A fake page realm: its own globals, a fetch that streams two chunks. */
function pageRealm() {
  const chunks = ['data: {"a":1}\n\n', 'data: {"b":"你好"}\n\n'];
  const realm = vm.createContext({ URL, TextEncoder, Response, ReadableStream, WritableStream, console });
  const fetch = () => Promise.resolve(new Response(new ReadableStream({
    start(c) { for (const t of chunks) c.enqueue(new TextEncoder().encode(t)); c.close(); },
  }), { headers: { 'content-type': 'text/event-stream' } }));
  realm.win = { fetch, location: { href: 'https://chat.deepseek.com/' }, XMLHttpRequest: undefined, WritableStream };
  return { realm, text: chunks.join('') };
}

test('page hooks run from their source text alone and tee the stream', async () => {
  const { realm, text } = pageRealm();
  const original = realm.win.fetch;
  const got = [];
  let ended;
  const done = new Promise((r) => { ended = r; });
  realm.bridge = {
    matches: (url, method) => url.endsWith('/api/v0/chat/completion') && method === 'POST',
    open: (info) => {
      got.push(info);
      return { push: (u8) => got.push(new TextDecoder().decode(u8)), end: () => ended(), fail: (r) => ended(r) };
    },
  };
  vm.runInContext(`(${pageHooks.toString()})(win, bridge, function (f) { return f; }, function (o) { return o; })`, realm);
  assert.notEqual(realm.win.fetch, original, 'fetch is wrapped');
  const res = await realm.win.fetch('/api/v0/chat/completion', { method: 'POST', body: '{"prompt":"hi"}' });
  assert.equal(await res.text(), text, 'the page reads its whole body');
  assert.equal(await done, undefined, 'the copy ended cleanly');
  assert.equal(got[0].url, 'https://chat.deepseek.com/api/v0/chat/completion');
  assert.equal(got[0].requestBody, '{"prompt":"hi"}');
  assert.equal(got.slice(1).join(''), text, 'the copy saw every byte');
  const other = await realm.win.fetch('/other');
  assert.equal(await other.text(), text, 'unmatched requests pass untouched');
  assert.equal(got.length, 3, 'and are not captured');
});

test('the page gets the promise its own fetch made', () => {
  const { realm } = pageRealm();
  const made = [];
  const inner = realm.win.fetch;
  realm.win.fetch = (...a) => { const p = inner(...a); made.push(p); return p; };
  realm.bridge = { matches: () => true, open: () => null };
  vm.runInContext(`(${pageHooks.toString()})(win, bridge, function (f) { return f; }, function (o) { return o; })`, realm);
  const p = realm.win.fetch('/x', { method: 'POST' });
  assert.equal(p, made[0], 'no promise of ours reaches the page');
});

test('the event bridge is self-contained and carries bytes as binary strings', () => {
  const events = [];
  const realm = vm.createContext({ JSON, String, Uint8Array });
  realm.win = {
    CustomEvent: class { constructor(type, init) { this.type = type; this.detail = init.detail; this.cancelable = init.cancelable; } },
    document: { dispatchEvent(ev) { events.push(ev); return !(ev.cancelable && JSON.parse(ev.detail).url === 'yes'); } },
  };
  vm.runInContext(`var b = (${eventBridge.toString()})(win, 'aicard-x');`, realm);
  const b = realm.b;
  assert.equal(b.matches('yes', 'POST'), true, 'cancelled = matched');
  assert.equal(b.matches('no', 'POST'), false);
  const sink = b.open({ url: 'u' });
  sink.push(new Uint8Array([0, 200, 255, 65]));
  const data = JSON.parse(events.at(-1).detail);
  assert.equal(data.op, 'data');
  assert.deepEqual([...data.bytes].map((c) => c.charCodeAt(0)), [0, 200, 255, 65]);
});

test('no HTML string sinks anywhere in the userscript', () => {
  const bundle = readFileSync(new URL('../../dist/aicard.user.js', import.meta.url), 'utf8');
  assert.doesNotMatch(bundle, /\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write\(/);
});
