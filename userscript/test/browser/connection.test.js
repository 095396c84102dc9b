// The tab's connection: identity kept across a reload, reconnect after a hub restart, the SSE+POST
// fallback when the WebSocket is blocked, site trouble reported as a failed task, and nothing of
// the script (token, helpers) on the page's window.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMockServer } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { loadAdapters } from './fixtures.js';

const HOST = 'sim.aicard.test';
let mock; let browser; let adapters;

before(async () => {
  mock = await startMockServer({ csp: false }); // the page-world shim: fast checks, not the real worlds (test/worlds)
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await mock?.close();
});

function task(id, prompt, extra = {}) {
  return { type: 'task', task_id: id, prompt, auto_send: true, timeout_ms: 15000, role: 'worker', priority: 0, retry: 0, ...extra };
}

test('a reload keeps the client id (sessionStorage), a new tab gets a new one', async () => {
  const hub = await startStandInHub();
  try {
    const page = await openTab(browser.context, { host: HOST, hub });
    const first = await hub.waitClient((c) => c.site === 'sim');
    // The hub knows the tab before the tab has read its welcome: reload only once the page
    // has kept its id, or the reload races the welcome.
    await page.waitForFunction(
      (id) => Object.keys(sessionStorage).some((k) => sessionStorage.getItem(k) === id),
      first.id,
      { timeout: 10000 },
    );
    const helloCount = hub.frames.filter((f) => f.frame.type === 'hello').length;
    await page.reload({ waitUntil: 'domcontentloaded' });
    const again = await hub.waitFrame((f) => f.frame.type === 'hello' && hub.frames.filter((g) => g.frame.type === 'hello').indexOf(f) >= helloCount);
    assert.equal(again.frame.client_id, first.id, 'the reloaded tab resumes its identity');
    const other = await openTab(browser.context, { host: HOST, hub });
    const second = await hub.waitClient((c) => c.site === 'sim' && c.id !== first.id);
    assert.notEqual(second.id, first.id);
    await page.close();
    await other.close();
  } finally {
    await hub.close();
  }
});

test('after a hub restart the tab reconnects with backoff and keeps working', async () => {
  let hub = await startStandInHub();
  const port = new URL(hub.url).port;
  const page = await openTab(browser.context, { host: HOST, hub });
  try {
    const first = await hub.waitClient((c) => c.site === 'sim');
    await hub.close();
    hub = await startStandInHub({ port: Number(port) });
    const back = await hub.waitClient((c) => c.site === 'sim', { timeoutMs: 20000 });
    assert.equal(back.id, first.id, 'same identity after reconnect');
    mock.next('sim', { answer: 'after restart 重连之后' });
    hub.send(back.id, task('r1', 'still there?'));
    const end = await hub.waitFrame((f) => f.frame.type === 'turn_end' && f.frame.task_id === 'r1');
    assert.equal(end.frame.text, 'after restart 重连之后');
  } finally {
    await page.close();
    await hub.close();
  }
});

test('WebSocket blocked: falls back to SSE + POST through GM_xmlhttpRequest', async () => {
  const hub = await startStandInHub({ blockWebSocket: true });
  const page = await openTab(browser.context, { host: HOST, hub });
  try {
    const client = await hub.waitClient((c) => c.site === 'sim' && c.via === 'sse', { timeoutMs: 20000 });
    mock.next('sim', { answer: 'over SSE 经由 SSE 🚚' });
    hub.send(client.id, task('s1', 'fallback?'));
    const end = await hub.waitFrame((f) => f.frame.type === 'turn_end' && f.frame.task_id === 's1', { timeoutMs: 15000 });
    assert.equal(end.frame.text, 'over SSE 经由 SSE 🚚');
    assert.equal(end.via, 'sse');
    await hub.waitFrame((f) => f.frame.task_id === 's1' && f.frame.state === 'done');
    const states = hub.frames.filter((f) => f.frame.task_id === 's1' && f.frame.type === 'task_update').map((f) => f.frame.state);
    assert.deepEqual(states.filter((s) => s !== 'streaming'), ['accepted', 'sent', 'done']);
  } finally {
    await page.close();
    await hub.close();
  }
});

test('site trouble fails the task with a reason: HTTP 429, captcha page', async () => {
  const hub = await startStandInHub();
  const page = await openTab(browser.context, { host: HOST, hub });
  try {
    const client = await hub.waitClient((c) => c.site === 'sim');
    mock.next('sim', { status: 429, body: '{"error":"too many requests"}', contentType: 'application/json' });
    hub.send(client.id, task('t429', 'first'));
    const f1 = await hub.waitFrame((f) => f.frame.task_id === 't429' && f.frame.state === 'failed');
    assert.match(f1.frame.error, /429/);
    mock.next('sim', { status: 403, body: '<html><title>Just a moment...</title><div class="cf-please-wait">Verify you are human</div></html>' });
    hub.send(client.id, task('tcap', 'second'));
    const f2 = await hub.waitFrame((f) => f.frame.task_id === 'tcap' && f.frame.state === 'failed');
    assert.match(f2.frame.error, /captcha/i);
    assert.equal(hub.frames.filter((f) => f.frame.type === 'turn_end').length, 0);
  } finally {
    await page.close();
    await hub.close();
  }
});

test('nothing leaks to the page: no token, no globals, and no helpers even in debug mode', async () => {
  const hub = await startStandInHub({ token: 'secret-token-7f3a' });
  const plain = await browser.context.newPage();
  await plain.goto(`https://${HOST}/`);
  const baseline = await plain.evaluate(() => Object.getOwnPropertyNames(window));
  await plain.close();
  const page = await openTab(browser.context, { host: HOST, hub });
  try {
    await hub.waitClient((c) => c.site === 'sim');
    const found = await page.evaluate(([token, base]) => {
      const names = Object.getOwnPropertyNames(window).filter((n) => !base.includes(n));
      const values = names.map((n) => { try { return String(window[n]); } catch { return ''; } });
      return {
        names,
        tokenInGlobals: values.some((v) => v.includes(token)),
        tokenInDom: document.documentElement.outerHTML.includes(token),
        tokenInStorage: JSON.stringify({ ...sessionStorage }).includes(token) || JSON.stringify({ ...localStorage }).includes(token),
        panelReachable: Boolean(document.querySelector('aicard-panel')?.shadowRoot),
      };
    }, ['secret-token-7f3a', baseline]);
    assert.deepEqual(found.names, [], 'no new globals');
    assert.equal(found.tokenInGlobals, false);
    assert.equal(found.tokenInDom, false);
    assert.equal(found.tokenInStorage, false);
    assert.equal(found.panelReachable, false, 'the panel\'s shadow root is closed');
    const debugPage = await openTab(browser.context, { host: HOST, hub, gmValues: { debug: true } });
    // Debug mode: the helpers are the manager's menu entries (and panel buttons), never the page's.
    assert.deepEqual(await debugPage.evaluate(() => ['mcpAutoSend', 'mcpSendCmd', 'mcpStatus', 'mcpTest', 'mcpFindButton', 'mcpSimulateInput'].map((n) => typeof window[n])),
      ['undefined', 'undefined', 'undefined', 'undefined', 'undefined', 'undefined']);
    const status = await debugPage.evaluate(() => window.__aicardMenu('mcpStatus'));
    assert.equal(status.site, 'sim');
    assert.equal(JSON.stringify(status).includes('secret-token-7f3a'), false);
    const check = await debugPage.evaluate(() => window.__aicardMenu('mcpTest'));
    assert.equal(check.input, true, JSON.stringify(check));
    assert.equal((await debugPage.evaluate(() => window.__aicardMenu('mcpSimulateInput', 'typed by debug'))).ok, true);
    assert.ok(await debugPage.evaluate(() => window.__aicardMenu('mcpFindButton')), 'the send button is found');
    // The panel shows the helpers as buttons, and the last result.
    const described = await debugPage.evaluate(() => JSON.parse(document.querySelector('aicard-panel').getAttribute('data-describe')));
    assert.ok(described.buttons.some((b) => b.act === 'debug'), JSON.stringify(described.buttons));
    assert.match(described.text, /mcpFindButton: \{/);
    await debugPage.close();
  } finally {
    await page.close();
    await hub.close();
  }
});

test('debug mcpLastStream() records the raw stream for a fixture', async () => {
  const hub = await startStandInHub();
  const page = await openTab(browser.context, { host: HOST, hub, gmValues: { debug: true } });
  try {
    const client = await hub.waitClient((c) => c.site === 'sim');
    const answer = 'fixture 录制 ✅';
    mock.next('sim', { answer, reasoning: 'hmm', variant: 'reasoning' });
    hub.send(client.id, task('rec', 'record me'));
    await hub.waitFrame((f) => f.frame.type === 'turn_end' && f.frame.task_id === 'rec');
    const rec = await page.evaluate(() => window.__aicardMenu('mcpLastStream'));
    const sim = mock.sites.find((s) => s.name === 'sim');
    const expected = Buffer.concat(sim.stream({ answer, reasoning: 'hmm', variant: 'reasoning' }).map((c) => Buffer.from(c)));
    assert.equal(Buffer.from(rec.base64, 'base64').compare(expected), 0, 'raw bytes recorded exactly');
    assert.equal(rec.text, expected.toString('utf8'));
    assert.equal(rec.answer, answer);
    assert.equal(JSON.parse(rec.requestBody).prompt, 'record me');
    assert.match(rec.url, /\/api\/sim\/chat$/);
  } finally {
    await page.close();
    await hub.close();
  }
});

test('no stream captured: the reply is read from the page (DOM fallback)', async () => {
  const hub = await startStandInHub();
  const page = await openTab(browser.context, { host: HOST, hub, path: '/?endpoint=/api/sim/unknown-stream' });
  try {
    const client = await hub.waitClient((c) => c.site === 'sim');
    const answer = 'read from the page 从页面读取 📄';
    mock.next('sim', { answer });
    hub.send(client.id, task('dom1', 'no network capture'));
    const end = await hub.waitFrame((f) => f.frame.type === 'turn_end' && f.frame.task_id === 'dom1', { timeoutMs: 15000 });
    assert.equal(end.frame.text, answer);
    assert.equal(end.frame.source, 'dom');
    await hub.waitFrame((f) => f.frame.task_id === 'dom1' && f.frame.state === 'done');
    // The panel says which path the reply took.
    await page.waitForFunction(() => document.querySelector('aicard-panel')?.dataset.capture === 'dom', null, { timeout: 5000 });
  } finally {
    await page.close();
    await hub.close();
  }
});
