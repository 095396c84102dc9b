// The real hub for the browser tests: the `aicard` binary (`cargo build --bin aicard` first, unless
// AICARD_BIN names a binary), started on port 0 with a temp data dir, plus a
// recording WebSocket proxy in front of it so a test sees exactly the frames the hub received
// and sent while the real hub does the work.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket, { WebSocketServer } from 'ws';
import { ROOT } from './harness.js';

const REPO = join(ROOT, '..');
const TARGET = process.env.CARGO_TARGET_DIR || join(REPO, 'target');
export const HUB_BIN = process.env.AICARD_BIN || join(TARGET, 'debug', 'aicard');

/**
 * Makes sure the hub binary exists and embeds the current bundle. Returns null when it is ready,
 * else the reason it is not (no cargo, build failed, the hub has no `serve` yet).
 */
export function ensureHubBinary() {
  if (process.env.AICARD_BIN) return existsSync(HUB_BIN) ? null : `AICARD_BIN=${HUB_BIN} does not exist`;
  // Always ask cargo (a no-op when fresh): with a target dir shared between checkouts, the binary
  // there may embed another checkout's bundle.
  {
    const built = spawnSync('cargo', ['build', '--bin', 'aicard'], { cwd: REPO, stdio: 'inherit', timeout: 20 * 60_000, env: { ...process.env, CARGO_TARGET_DIR: TARGET } });
    if (built.error) return `cargo not available: ${built.error.message}`;
    if (built.status !== 0) return `cargo build --bin aicard failed (exit ${built.status})`;
  }
  const help = spawnSync(HUB_BIN, ['serve', '--help'], { encoding: 'utf8' });
  if (help.status !== 0 || !/--allow-origin/.test(help.stdout)) return 'this aicard binary has no `serve --allow-origin` yet';
  return null;
}

/** Starts `aicard serve --port 0` and resolves once it prints its address. */
export async function startRealHub({ origins = [], token = 'real-hub-test-token', args = [] } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'aicard-hub-'));
  const argv = ['serve', '--port', '0', '--data-dir', dataDir, '--token', token, ...origins.flatMap((o) => ['--allow-origin', o]), ...args];
  const child = spawn(HUB_BIN, argv, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'warn' } });
  const output = [];
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hub did not start in 20 s:\n${output.join('')}`)), 20000);
    const onData = (d) => {
      output.push(String(d));
      const m = /listening on (http:\/\/\S+)/.exec(output.join(''));
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (d) => output.push(String(d)));
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`hub exited with ${code}:\n${output.join('')}`)); });
  });
  return {
    url,
    token,
    dataDir,
    output,
    close: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A WebSocket proxy in front of the real hub that records every frame: `{dir: 'up'|'down', path,
 * conn, frame}` ('up' = tab → hub). The tab's Origin is passed on, so the hub's checks still apply.
 */
export async function startRecordingProxy(hubUrl) {
  const frames = [];
  const listeners = new Set();
  let conn = 0;
  const record = (item) => { frames.push(item); for (const l of [...listeners]) l(item); };
  // HTTP (the SSE fallback's POST /send and GET /events) is forwarded too, recorded frame by frame.
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    delete headers['content-length'];
    const id = `http:${req.headers['x-aicard-client'] || 'new'}`;
    if (req.method === 'POST' && body) {
      try { record({ dir: 'up', path: req.url, conn: id, frame: JSON.parse(body) }); } catch { record({ dir: 'up', path: req.url, conn: id, raw: body }); }
    }
    let upstream;
    try {
      upstream = await fetch(hubUrl + req.url, { method: req.method, headers, body: req.method === 'POST' ? body : undefined });
    } catch (err) {
      res.writeHead(502).end(String(err));
      return;
    }
    res.writeHead(upstream.status, Object.fromEntries(upstream.headers));
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of upstream.body) {
      res.write(chunk);
      buffer += decoder.decode(chunk, { stream: true });
      if (req.url === '/events') {
        const events = buffer.split(/\r?\n\r?\n/);
        buffer = events.pop();
        for (const ev of events) {
          const data = ev.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
          if (data) { try { record({ dir: 'down', path: '/events', conn: id, frame: JSON.parse(data) }); } catch { /* not JSON */ } }
        }
      }
    }
    if (req.url !== '/events' && buffer) {
      try { record({ dir: 'down', path: req.url, conn: id, frame: JSON.parse(buffer) }); } catch { /* not JSON */ }
    }
    res.end();
  });
  const wss = new WebSocketServer({ noServer: true });
  const sockets = new Set();
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (tab) => {
      const id = ++conn;
      const headers = req.headers.origin ? { origin: req.headers.origin } : {};
      const hub = new WebSocket(hubUrl.replace(/^http/, 'ws') + req.url, { headers });
      const pending = [];
      tab.on('message', (data) => {
        const text = String(data);
        try { record({ dir: 'up', path: req.url, conn: id, frame: JSON.parse(text) }); } catch { record({ dir: 'up', path: req.url, conn: id, raw: text }); }
        if (hub.readyState === WebSocket.OPEN) hub.send(text); else pending.push(text);
      });
      hub.on('open', () => { for (const t of pending.splice(0)) hub.send(t); });
      hub.on('message', (data) => {
        const text = String(data);
        try { record({ dir: 'down', path: req.url, conn: id, frame: JSON.parse(text) }); } catch { record({ dir: 'down', path: req.url, conn: id, raw: text }); }
        if (tab.readyState === WebSocket.OPEN) tab.send(text);
      });
      const closeBoth = () => { tab.close(); hub.close(); };
      hub.on('close', closeBoth);
      hub.on('error', closeBoth);
      tab.on('close', closeBoth);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    frames,
    /** Resolves with the first recorded frame (now or later) matching `pred`. */
    waitFrame: (pred, { timeoutMs = 15000, what = 'frame' } = {}) => new Promise((resolve, reject) => {
      const hit = frames.find(pred);
      if (hit) { resolve(hit); return; }
      const timer = setTimeout(() => { listeners.delete(check); reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)); }, timeoutMs);
      const check = (item) => { if (pred(item)) { clearTimeout(timer); listeners.delete(check); resolve(item); } };
      listeners.add(check);
    }),
    close: () => new Promise((r) => { for (const c of wss.clients) c.terminate(); for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}
