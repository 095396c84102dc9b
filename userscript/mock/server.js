// Mock chat sites for the browser tests: one node http server that serves every site's page at its
// real hostname (chosen by the Host header; the browser maps the real names to this server with
// --host-resolver-rules) and answers each site's real stream endpoint with the stream from the
// site's mock definition, one chunk per write with small delays.
//
// Served over https with a throwaway self-signed certificate (chatgpt.com is HSTS-preloaded), or
// plain http with `tls: false` / `--http`.
// Each HTML page carries its site's Content-Security-Policy header (the site definition's `csp`, with a
// fresh nonce per response that the page's inline <script> also carries), so a page-world userscript meets
// what it meets on the real site: nonce-only script-src, a connect-src that refuses 127.0.0.1, Trusted
// Types on Gemini. `csp: false` / `--no-csp` / AICARD_MOCK_CSP=0 drops the header (and the nonce).
// The server listens on 127.0.0.1, which Chromium counts as loopback, so Local Network Access never fires
// for the page's own requests; launch Chromium with publicAddressFlag(mock) to make the mock sites public.
// Run on its own: `node mock/server.js [--port 8100] [--http] [--no-csp]` — prints the hosts it serves.
// Control routes (any host): POST /__mock/next {site, answer, reasoning?, variant?, status?, body?}
// queues the next reply of `site`; GET /__mock/requests?site=S lists the bodies the site received.
// Drift (sites/lib/drift.js): a reply with `drift: 'field' | 'json'` is sent renamed or as plain JSON;
// a page loaded with `?mock_drift=endpoint` posts to the moved endpoint. A drifted reply (or one with
// `render: true`) also carries its answer (`x-mock-answer`) for the page to render as the site's markup.
// With nothing queued, a prompt that asks for the agent script gets it (./agent-model.js), else
// DEFAULT_ANSWER.
// Images (docs/files.md "Back / 回传"): a reply with `images: [{url, alt}]` carries them in the site's stream
// as the real site does (the site's `stream({images})`; a site whose stream has no image form ignores them)
// and the page shows them in the reply (`x-mock-images`, after `imagesDelayMs`, as a site that fetches the
// image's address later does). A GET on a site's `imageHosts` or `imagePaths` answers a PNG.
import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cspHeader, newNonce } from './sites/lib/csp.js';
import { driftChunks, MOVED_PREFIX, unmovedPath } from './sites/lib/drift.js';
import { agentReply } from './agent-model.js';
import { parseMultipart, sha256, UPLOAD_DELAY_MS } from './sites/lib/upload.js';
import { solidPng } from './sites/lib/png.js';

const here = dirname(fileURLToPath(import.meta.url));
const SITES_DIR = join(here, 'sites');
const SIM_MOCK = join(here, '..', 'src', 'core-test-site', 'sim-mock.js');
const CHUNK_DELAY_MS = 4;

export const DEFAULT_ANSWER = 'Hello from the mock site. 你好，我是模拟站点 🤖';

/**
 * A throwaway self-signed certificate (openssl), so the mock sites are served over https like the
 * real ones (chatgpt.com is HSTS-preloaded: Chromium refuses it over http). The browser is started
 * with --ignore-certificate-errors; nothing is trusted system-wide.
 */
export function selfSignedCert() {
  const dir = mkdtempSync(join(tmpdir(), 'aicard-mock-tls-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=aicard-mock-sites',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Loads every mock site definition (mock/sites/index.js's `sites` plus the core's own `sim`). */
export async function loadSites({ includeSim = true } = {}) {
  const sites = [];
  const index = join(SITES_DIR, 'index.js');
  if (existsSync(index)) sites.push(...(await import(pathToFileURL(index).href)).sites);
  if (includeSim) sites.push((await import(pathToFileURL(SIM_MOCK).href)).default);
  return sites.filter((def) => def && def.name && Array.isArray(def.hosts) && typeof def.page === 'function');
}

/** The host a variant is served from (sites with several front ends list it in variantMeta). */
export function variantHost(def, variant) {
  return def.variantMeta?.[variant]?.hosts?.[0] || def.hosts[0];
}

function pathMatches(path, method, pathWithQuery, wantMethod) {
  if (wantMethod && wantMethod.toUpperCase() !== method) return false;
  const pathOnly = pathWithQuery.split('?')[0];
  if (path instanceof RegExp) return path.test(pathWithQuery) || path.test(pathOnly);
  return path === pathOnly || path === pathWithQuery;
}

/** True when the request is the site's stream endpoint (or a variant's own endpoint path). */
function endpointMatches(def, method, rawPathWithQuery) {
  const pathWithQuery = unmovedPath(rawPathWithQuery);
  const ep = def.endpoint;
  if (!ep) return false;
  if (pathMatches(ep.path, method, pathWithQuery, ep.method)) return true;
  return Object.values(def.variantMeta || {}).some((m) => m.path && pathMatches(m.path, method, pathWithQuery, ep.method));
}

/** Hostnames a site serves, every variant's and cross-origin API hosts included. */
export function siteHosts(def) {
  const variantHosts = Object.values(def.variantMeta || {}).flatMap((m) => m.hosts || []);
  return [...new Set([...(def.hosts || []), ...variantHosts, ...(def.apiHosts || []), ...(def.endpoint?.hosts || [])])];
}

function readBytes(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function corsHeaders(req) {
  const origin = req.headers.origin;
  if (!origin) return {};
  return {
    'access-control-allow-origin': origin,
    'access-control-allow-credentials': 'true',
    'access-control-allow-headers': req.headers['access-control-request-headers'] || '*',
    'access-control-allow-methods': 'GET, POST, OPTIONS',
  };
}

/**
 * The Chromium flag that makes the mock server a public address, so a page on a mock site meets Local
 * Network Access when it reaches 127.0.0.1/localhost (as the real sites do): `--ip-address-space-overrides`
 * takes a comma-separated `IP:PORT=space` list; the port is this server's actual port.
 */
export function publicAddressFlag(mock) {
  return `--ip-address-space-overrides=127.0.0.1:${mock.port}=public`;
}

/** The headers of a site's HTML page and the nonce its inline script gets (none without a CSP). */
function pageHeaders(def, csp) {
  const headers = { 'content-type': 'text/html; charset=utf-8' };
  if (!csp || !def.csp) return { headers, nonce: undefined };
  const nonce = newNonce();
  headers['content-security-policy'] = cspHeader(def.csp, nonce);
  return { headers, nonce };
}

/**
 * Starts the server. Returns `{port, url, csp, sites, hosts, next(site, reply), requests(site), close()}`.
 * `csp: false` serves the pages without their Content-Security-Policy (for the fast shim tests); the
 * default is on unless the environment says AICARD_MOCK_CSP=0.
 */
export async function startMockServer({ port = 0, sites, tls = true, csp = process.env.AICARD_MOCK_CSP !== '0' } = {}) {
  const defs = sites || (await loadSites());
  const byHost = new Map();
  // Pages and APIs, and the hosts that only serve a site's images (not pages: no CSP, no composer).
  for (const def of defs) for (const h of [...siteHosts(def), ...(def.imageHosts || [])]) byHost.set(h.toLowerCase(), def);
  const queues = new Map();   // site name → queued replies
  const received = new Map(); // site name → request bodies
  const sockets = new Set();
  const holds = new Map();    // hold name → {reached, release}: a reply paused mid-stream
  const uploads = new Map();  // site name → files the site's upload requests carried
  const uploadOutcomes = new Map(); // site name → queued outcomes for the next uploads ({status, message})
  const kept = new Map();     // site name → the upload routes' own state (ids handed out, …)
  let uploadSeq = 0;

  /** A reply with `hold: NAME` stops after half its chunks until `release(NAME)`. */
  const hold = (name) => {
    if (!holds.has(name)) {
      const h = {};
      h.reached = new Promise((r) => { h.reach = r; });
      h.released = new Promise((r) => { h.release = r; });
      holds.set(name, h);
    }
    return holds.get(name);
  };

  const next = (site, reply) => {
    if (!defs.some((d) => d.name === site)) throw new Error(`unknown mock site ${site}`);
    if (!queues.has(site)) queues.set(site, []);
    queues.get(site).push(reply);
  };

  async function streamReply(def, req, res) {
    const body = await readBody(req);
    if (!received.has(def.name)) received.set(def.name, []);
    received.get(def.name).push({ path: req.url, body, at: Date.now() });
    const reply = queues.get(def.name)?.shift() || agentReply(body) || { answer: DEFAULT_ANSWER };
    if (reply.status && reply.status >= 400) {
      res.writeHead(reply.status, { 'content-type': reply.contentType || 'text/html; charset=utf-8', ...corsHeaders(req) });
      res.end(reply.body || `<html><body>HTTP ${reply.status}</body></html>`);
      return;
    }
    const variant = reply.variant || 'default';
    const moved = req.url.startsWith(`${MOVED_PREFIX}/`);
    const images = Array.isArray(reply.images) ? reply.images : [];
    let chunks = def.stream({ answer: reply.answer, reasoning: reply.reasoning || '', variant, seed: reply.seed ?? 1, images });
    let contentType = def.variantMeta?.[variant]?.contentType || def.contentType || 'text/event-stream; charset=utf-8';
    if (reply.drift) ({ chunks, contentType } = driftChunks(def.name, reply.drift, chunks, { answer: reply.answer ?? DEFAULT_ANSWER, contentType }));
    const render = reply.drift || moved || reply.render
      ? { 'x-mock-answer': encodeURIComponent(reply.answer ?? DEFAULT_ANSWER), 'access-control-expose-headers': 'x-mock-answer' }
      : {};
    const shown = images.length
      ? { 'x-mock-images': encodeURIComponent(JSON.stringify({ images, delayMs: reply.imagesDelayMs ?? 0 })), 'access-control-expose-headers': 'x-mock-answer, x-mock-images' }
      : {};
    res.writeHead(200, {
      'content-type': contentType,
      'cache-control': 'no-cache',
      ...render,
      ...shown,
      ...corsHeaders(req),
    });
    res.flushHeaders();
    const pauseAt = reply.hold ? Math.max(1, Math.floor(chunks.length / 2)) : -1;
    for (const [i, c] of chunks.entries()) {
      if (res.destroyed) return;
      if (i === pauseAt) {
        const h = hold(reply.hold);
        h.reach();
        await h.released;
      }
      res.write(Buffer.from(c));
      await new Promise((r) => setTimeout(r, CHUNK_DELAY_MS));
    }
    res.end();
  }

  /** One of the site's upload routes (`def.upload.api`), or null. */
  const uploadRoute = (def, method, pathname) => def.upload?.api?.find((r) => r.method === method && r.path.test(pathname)) || null;

  async function uploadReply(def, route, req, res, url) {
    const body = await readBytes(req);
    if (!kept.has(def.name)) kept.set(def.name, new Map());
    const store = kept.get(def.name);
    let delay = false;
    const ctx = {
      method: req.method, path: url.pathname, query: url.searchParams, headers: req.headers, body,
      json: () => JSON.parse(body.toString('utf8') || 'null'),
      multipart: () => parseMultipart(body, req.headers['content-type']),
      id: () => `${def.name}-file-${++uploadSeq}`,
      keep: (k, v) => store.set(k, v),
      kept: (k) => store.get(k),
      take: ({ id, name, type, bytes }) => {
        delay = true;
        const outcome = uploadOutcomes.get(def.name)?.shift() || null;
        if (!outcome) {
          if (!uploads.has(def.name)) uploads.set(def.name, []);
          uploads.get(def.name).push({ id, name, type, size: bytes.length, sha256: sha256(bytes), path: url.pathname, at: Date.now() });
        }
        return outcome;
      },
    };
    const out = route.handle(ctx) || {};
    if (delay) await new Promise((r) => setTimeout(r, UPLOAD_DELAY_MS));
    res.writeHead(out.status || 200, { 'content-type': 'application/json', ...corsHeaders(req) });
    res.end(out.json === undefined ? '' : JSON.stringify(out.json));
  }

  async function control(req, res, url) {
    if (req.method === 'POST' && url.pathname === '/__mock/next') {
      const reply = JSON.parse(await readBody(req));
      next(reply.site, reply);
      res.writeHead(204).end();
    } else if (url.pathname === '/__mock/uploads') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(uploads.get(url.searchParams.get('site')) || []));
    } else if (url.pathname === '/__mock/requests') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(received.get(url.searchParams.get('site')) || []));
    } else {
      res.writeHead(404).end();
    }
  }

  const handler = async (req, res) => {
    try {
      req.socket.setNoDelay(true);
      const host = String(req.headers.host || '').replace(/:\d+$/, '').toLowerCase();
      const url = new URL(req.url, `https://${host || 'localhost'}`);
      if (url.pathname.startsWith('/__mock/')) return await control(req, res, url);
      const def = byHost.get(host);
      if (!def) { res.writeHead(404, { 'content-type': 'text/plain' }).end(`no mock site for host ${host}`); return; }
      if (req.method === 'OPTIONS') { res.writeHead(204, corsHeaders(req)).end(); return; }
      if (req.method === 'GET' && ((def.imageHosts || []).includes(host) || (def.imagePaths || []).some((p) => p.test(url.pathname)))) {
        res.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'no-store', 'access-control-allow-origin': '*' });
        res.end(solidPng());
        return;
      }
      if (endpointMatches(def, req.method, req.url)) return await streamReply(def, req, res);
      const route = uploadRoute(def, req.method, url.pathname);
      if (route) return await uploadReply(def, route, req, res, url);
      if (req.method === 'GET' && (url.pathname === '/' || !url.pathname.includes('.') || url.pathname.endsWith('.html'))) {
        if (url.pathname === '/favicon.ico') { res.writeHead(404).end(); return; }
        const { headers, nonce } = pageHeaders(def, csp);
        res.writeHead(200, headers);
        res.end(nonce ? def.page({ nonce }) : def.page());
        return;
      }
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    } catch (err) {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err && err.stack));
    }
  };
  const server = tls ? createTlsServer(selfSignedCert(), handler) : createServer(handler);
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  const actual = server.address().port;
  return {
    port: actual,
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${actual}`,
    scheme: tls ? 'https' : 'http',
    csp,
    sites: defs,
    hosts: [...byHost.keys()],
    next,
    requests: (site) => received.get(site) || [],
    /** The files `site`'s upload requests carried: {id, name, type, size, sha256, path}. */
    uploads: (site) => uploads.get(site) || [],
    /** The next upload to `site` fails as the site's server refuses it: `{status, message}`. */
    nextUpload: (site, outcome) => {
      if (!uploadOutcomes.has(site)) uploadOutcomes.set(site, []);
      uploadOutcomes.get(site).push(outcome);
    },
    /** Resolves once a reply queued with `hold: name` is paused mid-stream. */
    held: (name) => hold(name).reached,
    /** Lets the reply paused as `name` finish. */
    release: (name) => hold(name).release(),
    close: () => new Promise((resolve) => { for (const h of holds.values()) h.release(); for (const s of sockets) s.destroy(); server.close(() => resolve()); }),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const i = process.argv.indexOf('--port');
  const m = await startMockServer({ port: i > 0 ? Number(process.argv[i + 1]) : 0, tls: !process.argv.includes('--http'), ...(process.argv.includes('--no-csp') ? { csp: false } : {}) });
  console.log(`mock sites listening on ${m.url}${m.csp ? '' : ' (no CSP)'}; public to Chromium with ${publicAddressFlag(m)}`);
  for (const def of m.sites) console.log(`  ${def.name}: ${siteHosts(def).join(', ')}`);
}
