// A minimal hub speaking HELPERS.md's protocol (hello/welcome on WS /realtime and /heartbeat,
// POST /send + GET /events SSE fallback), recording every frame a tab sends. The browser tests use
// it where they need to see exactly what reached the hub and to hand a tab a task directly.
// Task attachments as the real hub serves them: `offerFile(clientId, {name, mime, bytes})` gives the
// `attachments` entry of a task frame, and `GET /files/ID` answers only that tab (bearer token and its
// `X-AIcard-Client`) with the bytes (Content-Disposition: attachment, nosniff, CSP sandbox), 404 else.
import { createServer } from 'node:http';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { WebSocketServer } from 'ws';

/** Resolves with the first recorded frame matching `pred`, or rejects after `timeoutMs`. */
function makeWaiter(list, listeners) {
  return (pred, { timeoutMs = 15000, what = 'frame' } = {}) => new Promise((resolve, reject) => {
    const hit = list.find(pred);
    if (hit) { resolve(hit); return; }
    const timer = setTimeout(() => { listeners.delete(check); reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)); }, timeoutMs);
    const check = (item) => { if (pred(item)) { clearTimeout(timer); listeners.delete(check); resolve(item); } };
    listeners.add(check);
  });
}

export async function startStandInHub({ token = 'test-token', heartbeatMs = 2000, blockWebSocket = false, port = 0 } = {}) {
  const frames = [];            // {clientId, frame, via}
  const frameListeners = new Set();
  const clients = new Map();    // clientId → {site, role, label, hello, push(frame), via, connected}
  const clientListeners = new Set();
  const sockets = new Set();
  const files = new Map();      // id → {clientId, name, mime, bytes}
  const fileRequests = [];      // {id, clientId, auth, status}

  const record = (clientId, frame, via) => {
    const item = { clientId, frame, via, at: Date.now() };
    frames.push(item);
    for (const l of [...frameListeners]) l(item);
  };
  const register = (hello, via, push) => {
    const id = hello.client_id && clients.has(hello.client_id) ? hello.client_id : (hello.client_id || `c-${randomUUID().slice(0, 8)}`);
    const prev = clients.get(id);
    const client = { id, site: hello.site, role: prev?.role || hello.role || 'worker', label: hello.label, hello, via, push, connected: true, hellos: (prev?.hellos || 0) + 1 };
    clients.set(id, client);
    for (const l of [...clientListeners]) l(client);
    return client;
  };
  const welcome = (c) => ({ type: 'welcome', client_id: c.id, role: c.role, label: c.label, heartbeat_ms: heartbeatMs });

  const server = createServer(async (req, res) => {
    // No CORS headers, like the real hub: GM_xmlhttpRequest is made outside the page.
    const cors = {};
    const auth = req.headers.authorization === `Bearer ${token}`;
    if (req.url === '/send' && req.method === 'POST') {
      let body = '';
      for await (const c of req) body += c;
      let frame;
      try { frame = JSON.parse(body); } catch { res.writeHead(400, cors).end(JSON.stringify({ type: 'error', code: 'bad_json', message: 'bad json' })); return; }
      if (!auth) { res.writeHead(401, cors).end(JSON.stringify({ type: 'error', code: 'auth', message: 'bad token' })); return; }
      res.setHeader('content-type', 'application/json');
      for (const [k, v] of Object.entries(cors)) res.setHeader(k, v);
      if (frame.type === 'hello') {
        const c = register(frame, 'sse', null);
        c.pending = [];
        c.push = (f) => (c.stream ? c.stream.write(`data: ${JSON.stringify(f)}\n\n`) : c.pending.push(f));
        record(c.id, frame, 'sse');
        res.end(JSON.stringify(welcome(c)));
        return;
      }
      const id = req.headers['x-aicard-client'];
      if (!clients.has(id)) { res.writeHead(401).end(JSON.stringify({ type: 'error', code: 'unknown_client', message: 'say hello first' })); return; }
      record(id, frame, 'sse');
      // As the real hub: the stream carries frames only once the tab said it got its welcome.
      const c = clients.get(id);
      if (frame.type === 'ack' && frame.received === 'welcome' && c.opening) {
        c.stream = c.opening;
        c.opening = null;
        for (const f of c.pending.splice(0)) c.push(f);
      }
      res.end(JSON.stringify({ type: 'ack', received: frame.type }));
      return;
    }
    if (req.url === '/events' && req.method === 'GET') {
      const c = clients.get(req.headers['x-aicard-client']);
      if (!auth || !c) { res.writeHead(401, cors).end(); return; }
      res.writeHead(200, { ...cors, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(': ping\n\n');
      res.write(`data: ${JSON.stringify(welcome(c))}\n\n`);
      c.opening = res;
      req.on('close', () => {
        if (c.opening === res) c.opening = null;
        if (c.stream === res) { c.stream = null; c.connected = false; }
      });
      return;
    }
    const fileMatch = /^\/files\/([^/?]+)$/.exec(req.url);
    if (fileMatch && req.method === 'GET') {
      const id = decodeURIComponent(fileMatch[1]);
      const f = files.get(id);
      const clientId = req.headers['x-aicard-client'];
      const ok = auth && f && f.clientId === clientId;
      fileRequests.push({ id, clientId, auth, status: ok ? 200 : (auth ? 404 : 401), origin: req.headers.origin || null });
      if (!auth) { res.writeHead(401).end(); return; }
      if (!ok) { res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ type: 'error', code: 'not_found', message: 'no such file for this tab' })); return; }
      res.writeHead(200, {
        'content-type': f.mime || 'application/octet-stream',
        'content-length': String(f.bytes.length),
        'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(f.name)}`,
        'x-content-type-options': 'nosniff',
        'content-security-policy': 'sandbox',
      });
      res.end(f.bytes);
      return;
    }
    if (req.url === '/healthz') { res.writeHead(200).end('ok'); return; }
    res.writeHead(404).end();
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });

  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    if (blockWebSocket || !['/realtime', '/heartbeat'].includes(req.url)) { socket.destroy(); return; }
    wss.handleUpgrade(req, socket, head, (ws) => {
      let client = null;
      ws.on('message', (data) => {
        let frame;
        try { frame = JSON.parse(String(data)); } catch { ws.send(JSON.stringify({ type: 'error', code: 'bad_json', message: 'malformed JSON' })); return; }
        if (!client) {
          if (frame.type !== 'hello' || frame.token !== token) { ws.close(4001, 'hello with token required'); return; }
          if (req.url === '/heartbeat') { client = { id: frame.client_id }; return; }
          client = register(frame, 'ws', (f) => ws.send(JSON.stringify(f)));
          record(client.id, frame, 'ws');
          ws.send(JSON.stringify(welcome(client)));
          ws.on('close', () => { if (clients.get(client.id)?.push && client.connected) client.connected = false; });
          return;
        }
        if (req.url === '/heartbeat') { ws.send(JSON.stringify({ type: 'heartbeat', time: Date.now() })); return; }
        record(client.id, frame, 'ws');
      });
    });
  });

  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    token,
    frames,
    clients,
    waitFrame: makeWaiter(frames, frameListeners),
    /** Resolves with the first client (connected now or later) matching `pred`. */
    waitClient: (pred, opts) => makeWaiter([...clients.values()], clientListeners)(pred, { what: 'client', ...opts }),
    fileRequests,
    /** Keeps `bytes` for `clientId`'s next task; returns its `attachments` entry. */
    offerFile(clientId, { name, mime, bytes, sha256 }) {
      const id = randomBytes(12).toString('hex');
      const buf = Buffer.from(bytes);
      files.set(id, { clientId, name, mime, bytes: buf });
      return { id, name, mime, size: buf.length, sha256: sha256 || createHash('sha256').update(buf).digest('hex') };
    },
    send(clientId, frame) {
      const c = clients.get(clientId);
      if (!c) throw new Error(`no client ${clientId}`);
      c.push(frame);
    },
    close: () => new Promise((r) => { for (const c of wss.clients) c.terminate(); for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}
