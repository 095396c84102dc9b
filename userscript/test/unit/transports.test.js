// The SSE channel against the managers' GM_xmlhttpRequest semantics (test/worlds/gm-api.js,
// here with the extension side in the same process): it opens only when the event stream really
// delivers (responseType 'stream', or a growing responseText), never with a manager that hands
// over the text only at the end; and each tab gets its own *.localhost connection group.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseTransport, spreadHubUrl } from '../../src/core/transports.js';
import { createGmApi, performRequest } from '../worlds/gm-api.js';
import { startStandInHub } from '../browser/stand-in-hub.js';

/** GM_xmlhttpRequest with a manager's semantics; `*.localhost` resolved as a browser does. */
function manager({ textMode, streams }) {
  let deliver = null;
  const link = {
    post: (msg) => {
      if (msg.op !== 'xhr') return;
      const url = new URL(msg.url);
      if (url.hostname.endsWith('.localhost')) url.hostname = '127.0.0.1';
      performRequest({ ...msg, url: url.href }, (reply) => deliver(reply));
    },
    onMessage: (fn) => { deliver = fn; },
  };
  return createGmApi({ link, textMode, streams }).GM_xmlhttpRequest;
}

function transport(hub, gmRequest, frames) {
  return new SseTransport({
    hubUrl: hub.url, gmRequest, timers: globalThis, log: () => {},
    onFrame: (f) => frames.push(f), onClose: () => {},
  });
}

const hello = (hub) => ({ token: hub.token, site: 'sim', url: 'https://sim.aicard.test/' });

for (const [name, mode] of [['responseType stream (Tampermonkey, ScriptCat)', { textMode: 'final', streams: true }], ['growing text (Violentmonkey)', { textMode: 'growing', streams: false }]]) {
  test(`SSE opens and receives with ${name}`, async () => {
    const hub = await startStandInHub();
    const frames = [];
    const t = transport(hub, manager(mode), frames);
    try {
      const welcome = await t.open(hello(hub));
      assert.equal(welcome.type, 'welcome');
      assert.equal(t.how, mode.streams ? 'stream' : 'text');
      await hub.waitFrame((f) => f.frame.type === 'ack' && f.frame.received === 'welcome', { what: 'the ack' });
      hub.send(welcome.client_id, { type: 'deliver', text: '你好 🌏', auto_send: false });
      const started = Date.now();
      while (!frames.length && Date.now() - started < 5000) await new Promise((r) => setImmediate(r));
      assert.deepEqual(frames.map((f) => f.text), ['你好 🌏'], 'a frame sent after the ack arrives');
    } finally {
      t.close();
      await hub.close();
    }
  });
}

test('a manager that fills responseText only at the end is never reported connected', async () => {
  const hub = await startStandInHub();
  const t = transport(hub, manager({ textMode: 'final', streams: false }), []);
  try {
    await assert.rejects(t.open(hello(hub)), /does not stream responses/);
    assert.ok(!hub.frames.some((f) => f.frame.type === 'ack'), 'the hub was never told the stream works');
  } finally {
    t.close();
    await hub.close();
  }
});

test('each tab reaches a loopback hub under its own *.localhost name', () => {
  const a = spreadHubUrl('http://127.0.0.1:8027', () => 0.25);
  const b = spreadHubUrl('http://127.0.0.1:8027', () => 0.75);
  assert.match(a, /^http:\/\/aicard-[0-9a-f]{8}\.localhost:8027$/);
  assert.notEqual(a, b);
  assert.equal(spreadHubUrl('https://hub.example.org:9000'), 'https://hub.example.org:9000', 'a remote hub is used as it is');
  assert.match(spreadHubUrl('http://localhost:8027'), /\.localhost:8027$/);
});
