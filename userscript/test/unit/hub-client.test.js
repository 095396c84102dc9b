// The hub client outside a browser: frames sent before the connection are queued and flushed in
// order after the welcome; a hub restart is reconnected with the same client id.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { HubClient } from '../../src/core/hub-client.js';
import { chunk, turnEnd } from '../../src/core/protocol.js';
import { startStandInHub } from '../browser/stand-in-hub.js';

/** Resolves when the client reports the `open` state (after the welcome). */
function opened(c) {
  return new Promise((resolve, reject) => {
    if (c.status.state === 'open') { resolve(); return; }
    const timer = setTimeout(() => reject(new Error('client did not open in 10 s')), 10000);
    const off = c.on('state', (s) => { if (s.state === 'open') { clearTimeout(timer); off(); resolve(); } });
  });
}

function memoryIdentity() {
  return { clientId: undefined };
}

function client(hub, identity) {
  return new HubClient({
    hubUrl: hub.url,
    identity,
    WebSocketImpl: WebSocket,
    gmRequest: null,
    timers: globalThis,
    log: () => {},
    policy: { baseMs: 20, maxMs: 200, jitter: 0.5 },
    helloFields: () => ({ token: hub.token, site: 'sim', url: 'https://sim.aicard.test/' }),
  });
}

test('frames queued before the welcome are flushed in order', async () => {
  const hub = await startStandInHub();
  const c = client(hub, memoryIdentity());
  try {
    c.send(chunk('t1', 0, '你'));
    c.send(chunk('t1', 1, '好'));
    c.send(turnEnd('t1', '你好'));
    c.start();
    const end = await hub.waitFrame((f) => f.frame.type === 'turn_end');
    const mine = hub.frames.filter((f) => f.clientId === end.clientId).map((f) => f.frame.type);
    assert.deepEqual(mine, ['hello', 'chunk', 'chunk', 'turn_end']);
    assert.equal(c.status.state, 'open');
    assert.equal(c.status.transport, 'ws');
  } finally {
    c.stop();
    await hub.close();
  }
});

test('a restarted hub is reconnected with the same client id', async () => {
  let hub = await startStandInHub();
  const port = Number(new URL(hub.url).port);
  const identity = memoryIdentity();
  const c = client(hub, identity);
  const states = [];
  c.on('state', (s) => states.push(s.state));
  try {
    c.start();
    await opened(c);
    const first = await hub.waitClient(() => true);
    assert.equal(identity.clientId, first.id, 'client id kept from the welcome');
    await hub.close();
    hub = await startStandInHub({ port });
    const again = await hub.waitClient(() => true, { timeoutMs: 10000 });
    assert.equal(again.hello.client_id, first.id, 'hello resumes the identity');
    assert.ok(states.includes('waiting'), 'went through the backoff state');
    await opened(c);
    c.send(turnEnd('t2', 'after restart'));
    const end = await hub.waitFrame((f) => f.frame.type === 'turn_end');
    assert.equal(end.frame.text, 'after restart');
  } finally {
    c.stop();
    await hub.close();
  }
});
