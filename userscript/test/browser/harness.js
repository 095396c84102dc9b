// Browser harness: Debian's chromium (never a downloaded browser) driven by playwright-core, the
// real site hostnames mapped to the mock server, and the built userscript injected at
// document-start with a small GM_* shim, as a userscript manager would.
import { chromium } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(here, '..', '..');
export const CHROMIUM = process.env.AICARD_CHROMIUM || '/usr/bin/chromium';
export const RESULTS = join(ROOT, 'test-results');

/** The built userscript as the hub serves it: placeholders replaced. */
export function servedUserscript(hubUrl, token) {
  const text = readFileSync(join(ROOT, 'dist', 'aicard.user.js'), 'utf8');
  return text.replaceAll('__AICARD_HUB_URL__', hubUrl).replaceAll('__AICARD_TOKEN__', token);
}

/**
 * GM_* shim around the script: values in memory (seeded per test), GM_xmlhttpRequest through the
 * page's original fetch with the response text growing as it streams. Everything is inside one
 * closure, as in a userscript manager, so nothing reaches the page's globals.
 */
export function initScript(userscript, gmValues = {}) {
  return `(() => {
  if (window.top !== window) return;
  const store = new Map(Object.entries(${JSON.stringify(gmValues)}));
  const GM_getValue = (k, d) => (store.has(k) ? store.get(k) : d);
  const GM_setValue = (k, v) => { store.set(k, v); };
  const pageFetch = window.fetch.bind(window);
  const GM_xmlhttpRequest = (d) => {
    const ctl = new AbortController();
    const res = { readyState: 1, status: 0, responseText: '', finalUrl: d.url };
    (async () => {
      try {
        const r = await pageFetch(d.url, { method: d.method || 'GET', headers: d.headers || {}, body: d.data, signal: ctl.signal, cache: 'no-store' });
        res.status = r.status; res.readyState = 2; d.onreadystatechange && d.onreadystatechange(res);
        const reader = r.body.getReader(); const dec = new TextDecoder();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          res.responseText += dec.decode(value, { stream: true }); res.readyState = 3;
          d.onprogress && d.onprogress(res); d.onreadystatechange && d.onreadystatechange(res);
        }
        res.readyState = 4; d.onreadystatechange && d.onreadystatechange(res); d.onload && d.onload(res);
      } catch (e) {
        if (e && e.name === 'AbortError') { d.onabort && d.onabort(res); return; }
        d.onerror && d.onerror(res);
      }
    })();
    return { abort: () => ctl.abort() };
  };
  const unsafeWindow = window;
${userscript}
})();`;
}

/** `MAP host 127.0.0.1:port` for every mock host. */
export function resolverRules(hosts, port) {
  return hosts.map((h) => `MAP ${h} 127.0.0.1:${port}`).join(', ');
}

/** Launches chromium with the mock hosts mapped; returns `{context, close}`. */
export async function launchBrowser({ mock }) {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} missing: run userscript/install-test-deps.sh`);
  const profile = mkdtempSync(join(tmpdir(), 'aicard-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1100, height: 760 },
    ignoreHTTPSErrors: true,
    args: [
      `--host-resolver-rules=${resolverRules(mock.hosts, mock.port)}`,
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      // The mock sites' certificate is self-signed (only the mapped hosts reach it).
      '--ignore-certificate-errors',
    ],
  });
  return {
    context,
    scheme: mock.scheme || 'http',
    close: async () => { await context.close(); rmSync(profile, { recursive: true, force: true }); },
  };
}

/**
 * Opens `https://host/` in a new page of `context` with the userscript injected at document-start.
 * Page errors are collected on `page.errors` so tests can assert the page kept working.
 */
export async function openTab(context, { host, hub, gmValues = {}, path = '/', scheme = 'https' }) {
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e));
  await page.addInitScript({ content: initScript(servedUserscript(hub.url, hub.token), gmValues) });
  await page.goto(`${scheme}://${host}${path}`, { waitUntil: 'domcontentloaded' });
  return page;
}
