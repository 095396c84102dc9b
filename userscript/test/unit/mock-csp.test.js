// The mock sites are as hostile as the real ones (shared/reference/site-runtime.md §1b, "What this means
// for the userscript" 11; docs/userscript.md): each HTML page carries its site's CSP with a per-response nonce that its
// own inline script carries too, no connect-src admits the hub on 127.0.0.1, Gemini enforces Trusted Types.
// In Chromium: every mock page still works under its own policy, a page-world innerHTML throws on Gemini,
// page-world fetch/WebSocket to 127.0.0.1 are refused by CSP, and with publicAddressFlag(mock) Local Network
// Access refuses them too until the permission is granted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { createServer } from 'node:http';
import { existsSync } from 'node:fs';
import { publicAddressFlag, siteHosts, startMockServer } from '../../mock/server.js';
import { sites } from '../../mock/sites/index.js';

const CHROMIUM = process.env.AICARD_CHROMIUM || '/usr/bin/chromium';
const HUB_URLS = ['ws://127.0.0.1:8027/ws', 'http://127.0.0.1:8027/events', 'ws://127.0.0.1:1/', 'http://127.0.0.1:1/'];

let mock;
before(async () => { mock = await startMockServer({ tls: true, csp: true }); });
after(async () => { await mock?.close(); });

/** GET `path` from the mock server as `host` (SNI and Host header set; the certificate is self-signed). */
function get(server, host, path = '/') {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: server.port, path, servername: host, headers: { host }, rejectUnauthorized: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A CSP header as a map: directive → sources (first occurrence wins, as in browsers). */
function parseCsp(header) {
  const map = new Map();
  for (const part of String(header || '').split(';')) {
    const [name, ...sources] = part.trim().split(/\s+/);
    if (name && !map.has(name.toLowerCase())) map.set(name.toLowerCase(), sources);
  }
  return map;
}

/**
 * Whether a source list admits `url` from a page at `pageOrigin` — erring towards "admits" (ports and
 * paths ignored, http/ws schemes treated as interchangeable), so a pass here means refused for sure.
 */
function admits(sources, url, pageOrigin) {
  const u = new URL(url);
  const scheme = u.protocol.slice(0, -1);
  const insecure = (s) => s === 'http' || s === 'ws';
  const schemeOk = (src) => src === scheme || insecure(src) || (!insecure(scheme) && !insecure(src));
  return sources.some((raw) => {
    const s = raw.toLowerCase();
    if (s === '*') return true;
    if (s === "'self'") return u.hostname === new URL(pageOrigin).hostname;
    if (s.startsWith("'")) return false; // 'none', nonces, hashes, keywords
    const schemeOnly = /^([a-z][a-z0-9+.-]*):$/.exec(s);
    if (schemeOnly) return schemeOk(schemeOnly[1]);
    const m = /^(?:([a-z][a-z0-9+.-]*):\/\/)?([^/:]+)(?::(\d+|\*))?/.exec(s);
    if (!m) return false;
    if (m[1] && !schemeOk(m[1])) return false;
    const host = m[2];
    if (host === '*') return true;
    if (host.startsWith('*.')) return u.hostname.endsWith(host.slice(1));
    return u.hostname === host;
  });
}

test('admits() reads source lists the way the browser does, or more loosely', () => {
  const page = 'https://chatgpt.com';
  assert.equal(admits(["'self'"], 'ws://127.0.0.1:8027/', page), false);
  assert.equal(admits(['http://localhost:*'], 'ws://127.0.0.1:8027/', page), false);
  assert.equal(admits(['http://127.0.0.1:*'], 'ws://127.0.0.1:8027/', page), true);
  assert.equal(admits(['ws:'], 'http://127.0.0.1:1/', page), true);
  assert.equal(admits(['*'], 'ws://127.0.0.1:1/', page), true);
  assert.equal(admits(['127.0.0.1'], 'ws://127.0.0.1:1/', page), true);
  assert.equal(admits(['https://*.chatgpt.com', 'wss://*.chatgpt.com'], 'ws://127.0.0.1:1/', page), false);
});

for (const site of sites) {
  test(`${site.name}: every page carries its CSP, the inline script its nonce, and connect-src refuses 127.0.0.1`, async () => {
    assert.ok(site.csp, `${site.name} defines its csp`);
    const nonces = new Set();
    for (const host of siteHosts(site)) {
      const res = await get(mock, host);
      assert.equal(res.status, 200, host);
      const header = res.headers['content-security-policy'];
      assert.ok(header, `${host}: content-security-policy header`);
      const csp = parseCsp(header);
      const scriptSrc = csp.get('script-src') || csp.get('default-src');
      assert.ok(scriptSrc, `${host}: script-src`);
      assert.ok(!scriptSrc.includes("'unsafe-inline'") || scriptSrc.some((s) => s.startsWith("'nonce-")), `${host}: inline script not open to all`);
      const nonce = scriptSrc.map((s) => /^'nonce-(.+)'$/.exec(s)?.[1]).find(Boolean);
      assert.ok(nonce, `${host}: script-src has a nonce: ${scriptSrc.join(' ')}`);
      const tags = [...res.body.matchAll(/<script\b[^>]*>/g)].map((m) => m[0]);
      assert.ok(tags.length >= 1, `${host}: inline script`);
      for (const tag of tags) assert.equal(/\bnonce="([^"]*)"/.exec(tag)?.[1], nonce, `${host}: ${tag} carries the header's nonce`);
      nonces.add(nonce);
      const connectSrc = csp.get('connect-src') || csp.get('default-src');
      assert.ok(connectSrc, `${host}: connect-src`);
      for (const url of HUB_URLS) assert.equal(admits(connectSrc, url, `https://${host}`), false, `${host}: connect-src admits ${url}: ${connectSrc.join(' ')}`);
      if (site.name === 'gemini') {
        assert.deepEqual(csp.get('require-trusted-types-for'), ["'script'"], `${host}: Trusted Types required`);
        assert.ok(csp.get('trusted-types')?.length, `${host}: trusted-types allowlist`);
      }
    }
    const again = parseCsp((await get(mock, site.hosts[0])).headers['content-security-policy']).get('script-src');
    assert.ok(!again.some((s) => nonces.has(/^'nonce-(.+)'$/.exec(s)?.[1])), 'a fresh nonce per response');
    const stream = (await get(mock, site.hosts[0], '/no-such-page.js'));
    assert.equal(stream.headers['content-security-policy'], undefined, 'the policy is on HTML pages only');
  });
}

test('csp: false serves the pages without a policy and without a nonce', async () => {
  const plain = await startMockServer({ tls: true, csp: false });
  try {
    for (const site of sites) {
      const res = await get(plain, site.hosts[0]);
      assert.equal(res.headers['content-security-policy'], undefined, site.name);
      assert.match(res.body, /<script>/, site.name);
    }
  } finally {
    await plain.close();
  }
});

test('publicAddressFlag names the server\'s own port as public', () => {
  assert.equal(publicAddressFlag({ port: 4433 }), '--ip-address-space-overrides=127.0.0.1:4433=public');
  assert.equal(publicAddressFlag(mock), `--ip-address-space-overrides=127.0.0.1:${mock.port}=public`);
});

// ---- in Chromium ----------------------------------------------------------------------------------

const noBrowser = existsSync(CHROMIUM) ? false : `${CHROMIUM} missing (userscript/install-test-deps.sh)`;

async function launch(server, extraArgs = []) {
  const { chromium } = await import('playwright-core');
  const rules = server.hosts.map((h) => `MAP ${h} 127.0.0.1:${server.port}`).join(', ');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--ignore-certificate-errors', `--host-resolver-rules=${rules}`, ...extraArgs],
  });
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  // Runs before the page's scripts whatever the CSP (CDP), in the page world: records what the policy refused.
  await context.addInitScript(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__violations.push({ directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample });
    });
  });
  return { browser, context };
}

/** The page runtime's config (composer selectors) as rendered into the page. */
function pageConfig(site) {
  return JSON.parse(/var cfg = (.*);\n/.exec(site.page())[1]);
}

/**
 * In the page world: try a WebSocket and a fetch to `base` (no trailing slash); report how each ended and
 * after how long. A WebSocket refused by CSP is CLOSED at once and fires `error` but never `close`.
 */
function tryLoopback(base) {
  return new Promise((resolve) => {
    const out = {};
    const t0 = performance.now();
    const done = (key, value) => {
      if (key in out) return;
      out[key] = value;
      out[`${key}Ms`] = Math.round(performance.now() - t0);
      if ('ws' in out && 'fetch' in out) resolve(out);
    };
    try {
      const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/`);
      const timer = setTimeout(() => { done('ws', `pending readyState=${ws.readyState}`); ws.close(); }, 5000);
      ws.onopen = () => { clearTimeout(timer); done('ws', 'open'); ws.close(); };
      ws.onerror = () => { clearTimeout(timer); done('ws', 'error'); };
      ws.onclose = (e) => { clearTimeout(timer); done('ws', `closed ${e.code}`); };
    } catch (e) {
      done('ws', `threw ${e.name}`);
    }
    fetch(`${base}/`).then((r) => r.text()).then((t) => done('fetch', `ok ${t}`), (e) => done('fetch', `failed ${e.name}`));
  });
}

/** One mock page under its CSP: the nonced runtime runs and streams a reply; loopback is refused by CSP. */
async function checkPage(context, site, host) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`https://${host}/`);
  assert.equal(await page.evaluate(() => typeof window.__mockSite), 'object', `${host}: the nonced inline runtime ran`);
  await page.locator(pageConfig(site).input.selector).click();
  await page.keyboard.type('hi 你好');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('[data-role="assistant"]')?.hasAttribute('data-done'), null, { timeout: 10_000 });
  assert.equal(await page.locator('[data-role="assistant"]').getAttribute('data-done'), 'true', `${host}: the page's own stream request passed its connect-src`);
  assert.deepEqual(await page.evaluate(() => window.__violations), [], `${host}: the page itself breaks none of its policy`);
  const r = await page.evaluate(tryLoopback, 'http://127.0.0.1:1');
  assert.match(r.fetch, /^failed/, `${host}: fetch to 127.0.0.1`);
  assert.match(r.ws, /^(threw|error|closed)/, `${host}: WebSocket to 127.0.0.1`);
  const refused = (await page.evaluate(() => window.__violations)).filter((v) => v.directive === 'connect-src').map((v) => v.blocked);
  assert.ok(refused.some((u) => u.startsWith('ws://127.0.0.1')), `${host}: CSP refused the WebSocket (${refused})`);
  assert.ok(refused.some((u) => u.startsWith('http://127.0.0.1')), `${host}: CSP refused the fetch (${refused})`);
  assert.deepEqual(errors, [], `${host}: no page errors`);
  await page.close();
}

test('in Chromium: every mock page works under its own CSP; page-world fetch/WebSocket to 127.0.0.1 are refused', { skip: noBrowser, timeout: 120_000 }, async () => {
  const { browser, context } = await launch(mock);
  try {
    const pages = sites.flatMap((site) => siteHosts(site).map((host) => [site, host]));
    for (let i = 0; i < pages.length; i += 4) await Promise.all(pages.slice(i, i + 4).map(([site, host]) => checkPage(context, site, host)));
  } finally {
    await browser.close();
  }
});

test('in Chromium: the Gemini mock enforces Trusted Types in the page world', { skip: noBrowser, timeout: 60_000 }, async () => {
  const { browser, context } = await launch(mock);
  try {
    const page = await context.newPage();
    await page.goto('https://gemini.google.com/');
    const r = await page.evaluate(() => {
      const out = {};
      try { document.body.innerHTML = 'x'; out.innerHTML = 'assigned'; } catch (e) { out.innerHTML = `${e.name}: ${e.message}`; }
      try { document.createElement('div').insertAdjacentHTML('beforeend', 'x'); out.insertAdjacentHTML = 'assigned'; } catch (e) { out.insertAdjacentHTML = e.name; }
      try { window.trustedTypes.createPolicy('mock-page', { createHTML: (s) => s }); out.ownPolicy = 'created'; } catch (e) { out.ownPolicy = e.name; }
      try { window.trustedTypes.createPolicy('default', { createHTML: (s) => s }); out.defaultPolicy = 'created'; } catch (e) { out.defaultPolicy = e.name; }
      return out;
    });
    assert.match(r.innerHTML, /^TypeError: .*TrustedHTML/, r.innerHTML);
    assert.equal(r.insertAdjacentHTML, 'TypeError');
    assert.equal(r.ownPolicy, 'created', "the page's own policy name is allowed");
    assert.equal(r.defaultPolicy, 'TypeError', "a 'default' policy is refused by the trusted-types allowlist");
    assert.ok((await page.evaluate(() => window.__violations)).some((v) => v.directive === 'require-trusted-types-for'));
  } finally {
    await browser.close();
  }
});

test('in Chromium with publicAddressFlag: Local Network Access refuses 127.0.0.1 until local-network-access is granted', { skip: noBrowser, timeout: 60_000 }, async () => {
  const plain = await startMockServer({ tls: true, csp: false }); // no CSP: only LNA stands in the way
  const hits = [];
  const local = createServer((req, res) => { hits.push(req.url); res.writeHead(200, { 'access-control-allow-origin': '*' }).end('local'); });
  local.on('upgrade', (req, socket) => { hits.push('upgrade'); socket.destroy(); });
  await new Promise((r) => local.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${local.address().port}`;
  const { browser, context } = await launch(plain, [publicAddressFlag(plain)]);
  try {
    const page = await context.newPage();
    await page.goto('https://chatgpt.com/');
    const state = () => page.evaluate(async () => (await navigator.permissions.query({ name: 'loopback-network' })).state);
    assert.equal(await state(), 'prompt');
    const denied = await page.evaluate(tryLoopback, base);
    assert.equal(denied.fetch, 'failed TypeError', JSON.stringify(denied));
    assert.match(denied.ws, /^(error|closed 1006)$/, JSON.stringify(denied));
    assert.ok(denied.fetchMs < 3000 && denied.wsMs < 3000, `refused at once, not held: ${JSON.stringify(denied)}`);
    assert.deepEqual(hits, [], 'nothing reached the local server');
    assert.notEqual(await state(), 'granted'); // headless answers the prompt with a denial: 'denied' from now on

    // playwright-core's name; Chromium 148 gets localNetworkAccess/localNetwork/loopbackNetwork over CDP
    await context.grantPermissions(['local-network-access'], { origin: 'https://chatgpt.com' });
    assert.equal(await state(), 'granted');
    const granted = await page.evaluate(tryLoopback, base);
    assert.equal(granted.fetch, 'ok local', JSON.stringify(granted));
    assert.ok(hits.includes('/') && hits.includes('upgrade'), `fetch and WebSocket reached the local server: ${hits}`);
  } finally {
    await browser.close();
    local.close();
    await plain.close();
  }
});
