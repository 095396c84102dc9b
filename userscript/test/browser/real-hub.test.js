// The userscript against the REAL hub (`aicard serve`), with a recording proxy in front of it:
// the hub serves the bundle with its URL and token filled in; a tab on every mock site says hello,
// gets a welcome, and its replies reach the hub as `chunk`s and an exact `turn_end` without the hub
// objecting; a reloaded tab gets its identity back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startMockServer, variantHost } from '../../mock/server.js';
import { launchBrowser, openTab, ROOT, servedUserscript } from './harness.js';
import { answerFor, loadAdapters, personTypesAndSends } from './fixtures.js';
import { ensureHubBinary, startRealHub, startRecordingProxy } from './real-hub.js';

const unavailable = ensureHubBinary();
let mock; let browser; let adapters; let hub; let proxy;

before(async () => {
  if (unavailable) return;
  mock = await startMockServer({ csp: false }); // the page-world shim: fast checks, not the real worlds (test/worlds)
  hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`) });
  proxy = await startRecordingProxy(hub.url);
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await proxy?.close();
  await hub?.close();
  await mock?.close();
});

const tabHub = () => ({ url: proxy.url, token: hub.token });
const opts = { skip: unavailable ? `real hub unavailable: ${unavailable}` : false };

test('the hub serves the committed bundle with its URL and token filled in', opts, async () => {
  // The token only for a request that holds it (or a one-time install link): docs/security.md.
  const plain = await (await fetch(`${hub.url}/aicard.user.js`)).text();
  assert.ok(!plain.includes(hub.token), 'the plain script carries no token');
  const res = await fetch(`${hub.url}/aicard.user.js`, { headers: { Authorization: `Bearer ${hub.token}` } });
  assert.equal(res.status, 200);
  const served = await res.text();
  assert.ok(!served.includes('__AICARD_TOKEN__') && !served.includes('__AICARD_HUB_URL__'), 'placeholders replaced');
  const committed = readFileSync(join(ROOT, 'dist', 'aicard.user.js'), 'utf8');
  assert.ok(served === servedUserscript(hub.url, hub.token) || served === committed.replaceAll('__AICARD_HUB_URL__', hub.url).replaceAll('__AICARD_TOKEN__', hub.token),
    'the hub embeds the current dist/aicard.user.js (rebuild the hub after npm run build)');
  assert.match(served, new RegExp(`@updateURL +${hub.url.replace(/[.]/g, '\\.')}/aicard\\.user\\.js`));
});

test('the plain script (no token): "not paired" and no hello; after an update it uses the stored token', opts, async () => {
  const site = mock.sites.find((s) => s.name === 'deepseek') || mock.sites[0];
  const { initScript } = await import('./harness.js');
  const plain = await (await fetch(`${hub.url}/aicard.user.js`)).text();
  const open = async (gmValues) => {
    const page = await browser.context.newPage();
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(e));
    // As served, but pointed at the recording proxy (the URL the hub filled in is its own).
    await page.addInitScript({ content: initScript(plain.replaceAll(hub.url, proxy.url), gmValues) });
    await page.goto(`https://${site.hosts[0]}/`, { waitUntil: 'domcontentloaded' });
    return page;
  };
  const seen = proxy.frames.length;
  const unpaired = await open({});
  try {
    await unpaired.waitForFunction(() => document.querySelector('aicard-panel')?.dataset.state === 'unpaired', null, { timeout: 10000 });
    assert.equal(proxy.frames.slice(seen).filter((f) => f.frame?.type === 'hello').length, 0, 'no hello without a token');
    assert.deepEqual(unpaired.errors.map(String), []);
  } finally {
    await unpaired.close();
  }
  // An update fetches the plain URL again: the token the install link stored is used.
  const updated = await open({ token: hub.token });
  try {
    const hello = await proxy.waitFrame((f) => proxy.frames.indexOf(f) >= seen && f.dir === 'up' && f.frame?.type === 'hello' && f.frame.site === site.name,
      { what: 'hello with the stored token' });
    await proxy.waitFrame((f) => f.conn === hello.conn && f.dir === 'down' && f.frame?.type === 'welcome', { what: 'welcome' });
  } finally {
    await updated.close();
  }
});

test('every site: hello → welcome from the real hub, turn_end reaches it exactly', opts, async (t) => {
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter) continue;
    const variant = (site.variants || ['default']).find((v) => !(site.errorVariants && v in site.errorVariants)) || 'default';
    const host = variantHost(site, variant);
    await t.test(site.name, async () => {
      const seen = proxy.frames.length;
      const page = await openTab(browser.context, { host, hub: tabHub() });
      try {
        const hello = await proxy.waitFrame((f, i = proxy.frames.indexOf(f)) => i >= seen && f.dir === 'up' && f.path === '/realtime' && f.frame?.type === 'hello' && f.frame.site === site.name,
          { what: `${site.name} hello` });
        const welcome = await proxy.waitFrame((f) => f.conn === hello.conn && f.dir === 'down' && f.frame?.type === 'welcome', { what: `${site.name} welcome` });
        assert.ok(welcome.frame.client_id, 'welcome carries a client id');
        assert.ok(['worker', 'master', 'foreman'].includes(welcome.frame.role));
        const answer = answerFor(site.name, variant);
        mock.next(site.name, { answer, variant });
        await personTypesAndSends(page, adapter, `real hub question ${site.name}`);
        const end = await proxy.waitFrame((f) => f.conn === hello.conn && f.dir === 'up' && f.frame?.type === 'turn_end', { what: `${site.name} turn_end` });
        assert.equal(end.frame.text, answer);
        // Whatever the hub makes of the frames, it must not call them malformed or unknown.
        const errors = proxy.frames.filter((f) => f.conn === hello.conn && f.dir === 'down' && f.frame?.type === 'error'
          && /malformed|unknown|invalid|bad/i.test(`${f.frame.code} ${f.frame.message}`));
        assert.deepEqual(errors.map((e) => e.frame), []);
        assert.deepEqual(page.errors.map(String), []);
      } finally {
        await page.close();
      }
    });
  }
});

test('a reloaded tab resumes its client id with the real hub', opts, async () => {
  const site = mock.sites[0];
  const seen = proxy.frames.length;
  const page = await openTab(browser.context, { host: site.hosts[0], hub: tabHub() });
  try {
    const first = await proxy.waitFrame((f) => proxy.frames.indexOf(f) >= seen && f.dir === 'down' && f.path === '/realtime' && f.frame?.type === 'welcome');
    // The welcome passing the proxy is not the page having read it: wait for the kept id.
    await page.waitForFunction(
      (id) => Object.keys(sessionStorage).some((k) => sessionStorage.getItem(k) === id),
      first.frame.client_id,
      { timeout: 10000 },
    );
    const mark = proxy.frames.length;
    await page.reload({ waitUntil: 'domcontentloaded' });
    const hello = await proxy.waitFrame((f) => proxy.frames.indexOf(f) >= mark && f.dir === 'up' && f.path === '/realtime' && f.frame?.type === 'hello');
    assert.equal(hello.frame.client_id, first.frame.client_id);
    const again = await proxy.waitFrame((f) => f.conn === hello.conn && f.dir === 'down' && f.frame?.type === 'welcome');
    assert.equal(again.frame.client_id, first.frame.client_id, 'same identity after reload');
  } finally {
    await page.close();
  }
});

test('WebSocket blocked: the tab falls back to the real hub\'s SSE + POST transport', opts, async () => {
  const site = mock.sites.find((s) => s.name === 'chatgpt') || mock.sites[0];
  const adapter = adapters.get(site.name);
  const page = await browser.context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e));
  // As if the Local Network Access prompt had been denied: every WebSocket to the hub fails.
  await page.routeWebSocket(/\/(realtime|heartbeat)$/, (ws) => ws.close({ code: 1006, reason: 'blocked' }));
  const seen = proxy.frames.length;
  await page.addInitScript({ content: (await import('./harness.js')).initScript(servedUserscript(proxy.url, hub.token)) });
  try {
    await page.goto(`https://${site.hosts[0]}/`, { waitUntil: 'domcontentloaded' });
    const hello = await proxy.waitFrame((f) => proxy.frames.indexOf(f) >= seen && f.dir === 'up' && f.path === '/send' && f.frame?.type === 'hello',
      { timeoutMs: 20000, what: 'hello over POST /send' });
    assert.equal(hello.frame.site, site.name);
    const welcome = await proxy.waitFrame((f) => proxy.frames.indexOf(f) > proxy.frames.indexOf(hello) && f.dir === 'down' && f.frame?.type === 'welcome');
    const answer = answerFor(site.name, 'sse-fallback');
    mock.next(site.name, { answer });
    await personTypesAndSends(page, adapter, 'over the fallback');
    const end = await proxy.waitFrame((f) => f.dir === 'up' && f.path === '/send' && f.conn === `http:${welcome.frame.client_id}` && f.frame?.type === 'turn_end',
      { what: 'turn_end over POST /send' });
    assert.equal(end.frame.text, answer);
    const refused = proxy.frames.filter((f) => f.conn === `http:${welcome.frame.client_id}` && f.dir === 'down' && f.frame?.type === 'error');
    assert.deepEqual(refused.map((f) => f.frame), [], 'the hub accepted every frame');
    assert.deepEqual(page.errors.map(String), []);
  } finally {
    await page.close();
  }
});
