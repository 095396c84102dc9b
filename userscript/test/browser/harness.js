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
 * GM_* shim around the script: values in memory (seeded per test); GM_xmlhttpRequest performed
 * outside the page, in node, as a userscript manager does it from its extension (no CORS, no
 * Origin header, not subject to the page's Local Network Access). The page side pulls the response
 * through a Playwright binding in pieces, so streams (GET /events) arrive as they grow. Everything
 * else is inside one closure, as in a userscript manager, so nothing reaches the page's globals.
 */
export function initScript(userscript, gmValues = {}) {
  return `(() => {
  if (window.top !== window) return;
  const gm = window.__aicardGm;
  try { delete window.__aicardGm; } catch (e) { /* binding not deletable */ }
  const store = new Map(Object.entries(${JSON.stringify(gmValues)}));
  const GM_getValue = (k, d) => (store.has(k) ? store.get(k) : d);
  const GM_setValue = (k, v) => { store.set(k, v); };
  // The manager's menu. In debug mode the test reaches its entries as a person clicks them;
  // the page itself is given nothing (a real manager's menu is outside the page).
  const menu = new Map();
  const GM_registerMenuCommand = (name, fn) => { menu.set(name.slice(name.lastIndexOf(' ') + 1), fn); return name; };
  if (store.get('debug')) Object.defineProperty(window, '__aicardMenu', { value: (name, arg) => menu.get(name)(arg) });
  const GM_xmlhttpRequest = (d) => {
    let id = null; let aborted = false;
    const res = { readyState: 1, status: 0, responseText: '', finalUrl: d.url };
    const fire = (name) => { try { d[name] && d[name](res); } catch (e) { console.error(e); } };
    (async () => {
      try {
        const binary = d.responseType === 'arraybuffer' || d.responseType === 'blob';
        const parts = [];
        const head = await gm({ op: 'open', method: d.method || 'GET', url: d.url, headers: d.headers || {}, data: d.data ?? null, timeout: d.timeout || 0, binary });
        if (head.error) { fire(head.error === 'timeout' ? 'ontimeout' : 'onerror'); return; }
        id = head.id; res.status = head.status; res.readyState = 2; fire('onreadystatechange');
        if (aborted) { gm({ op: 'abort', id }); return; }
        for (;;) {
          const part = await gm({ op: 'read', id });
          if (aborted) return;
          if (part.error) { fire('onerror'); return; }
          if (part.chunk === null) break;
          if (binary) parts.push(Uint8Array.from(atob(part.chunk), (c) => c.charCodeAt(0)));
          else res.responseText += part.chunk;
          res.readyState = 3; fire('onprogress'); fire('onreadystatechange');
        }
        if (binary) {
          const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
          let at = 0; for (const p of parts) { all.set(p, at); at += p.length; }
          res.response = d.responseType === 'blob' ? new Blob([all]) : all.buffer;
        }
        res.readyState = 4; fire('onreadystatechange'); fire('onload');
      } catch (e) { if (!aborted) fire('onerror'); }
    })();
    return { abort: () => { aborted = true; if (id !== null) gm({ op: 'abort', id }); fire('onabort'); } };
  };
  const unsafeWindow = window;
${userscript}
})();`;
}

/** The node side of GM_xmlhttpRequest: one fetch per request, read by the page in pieces. */
function gmRequestBinding() {
  const open = new Map();
  let next = 0;
  return async (_source, msg) => {
    if (msg.op === 'open') {
      const ctl = new AbortController();
      const timer = msg.timeout ? setTimeout(() => ctl.abort(), msg.timeout) : null;
      try {
        // Browsers resolve every *.localhost name to loopback themselves; node asks the system.
        const target = new URL(msg.url);
        if (target.hostname.endsWith('.localhost')) target.hostname = '127.0.0.1';
        const res = await fetch(target, { method: msg.method, headers: msg.headers, body: msg.data ?? undefined, signal: ctl.signal });
        const id = ++next;
        open.set(id, { reader: res.body.getReader(), decoder: new TextDecoder(), ctl, timer, binary: Boolean(msg.binary) });
        return { id, status: res.status };
      } catch (err) {
        if (timer) clearTimeout(timer);
        return { error: ctl.signal.aborted ? 'timeout' : String(err && err.message) };
      }
    }
    const req = open.get(msg.id);
    if (!req) return { chunk: null };
    if (msg.op === 'abort') { req.ctl.abort(); open.delete(msg.id); return {}; }
    try {
      const { done, value } = await req.reader.read();
      if (done) { if (req.timer) clearTimeout(req.timer); open.delete(msg.id); return { chunk: null }; }
      return { chunk: req.binary ? Buffer.from(value).toString('base64') : req.decoder.decode(value, { stream: true }) };
    } catch (err) {
      open.delete(msg.id);
      return { error: String(err && err.message) };
    }
  };
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
  await context.exposeBinding('__aicardGm', gmRequestBinding());
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
