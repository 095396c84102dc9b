// Files into tabs in every manager's world (cells.js: ScriptCat, Violentmonkey page and content,
// Tampermonkey; Chromium and Firefox): two sites each — DeepSeek (its file input) and Gemini (a drop on its
// input area, under Trusted Types) — take an image and a PDF from the stand-in hub, fetched with that
// manager's own GM_xmlhttpRequest (`responseType: 'arraybuffer'`, gm-api.js), and send the prompt only once
// the site's uploads finished. The two worlds that only change how the hub's name resolves are left out.
//   node --test --test-concurrency=1 --test-reporter=spec test/worlds/attach.test.js
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startMockServer } from '../../mock/server.js';
import { servedUserscript } from '../browser/harness.js';
import { startStandInHub } from '../browser/stand-in-hub.js';
import { answerFor } from '../browser/fixtures.js';
import { PDF, PNG } from '../browser/files.js';
import { until } from '../browser/stop-story.js';
import { WORLDS } from './cells.js';

/** In the tab: its client id once the panel shows the hub connection open, else null. */
const connectedId = () => (document.querySelector('aicard-panel')?.dataset.state === 'open' ? sessionStorage.getItem('aicard.client_id') : null);

const SITES = ['deepseek', 'gemini'];
const PROMPT = 'What is in these two files? / 这两个文件里有什么？';
const picked = (process.env.AICARD_WORLDS || '').split(',').filter(Boolean);
const worlds = WORLDS.filter((w) => !w.id.startsWith('no-localhost-names') && (picked.length === 0 || picked.includes(w.id)));
const sha = (b) => createHash('sha256').update(b).digest('hex');

let mock; let hub;
before(async () => {
  mock = await startMockServer();
  hub = await startStandInHub();
});
after(async () => {
  await hub?.close();
  await mock?.close();
});

for (const world of worlds) {
  test(`${world.id}: an image and a PDF into ${SITES.join(' and ')}`, { timeout: 180_000 }, async () => {
    const lna = world.lna[0];
    const browser = await world.launch({ mock, lna: lna === 'none' ? undefined : lna, userscript: servedUserscript(hub.url, hub.token) });
    try {
      for (const name of SITES) {
        const site = mock.sites.find((s) => s.name === name);
        const host = site.hosts[0];
        const tab = await browser.openTab({ host });
        // The tab's own id once its panel says connected (a first channel that failed may have said hello too).
        const clientId = (await until(() => tab.evaluate(connectedId), (v) => Boolean(v), { timeoutMs: 30000, what: `${world.id} ${name} connected` }));
        const client = hub.clients.get(clientId);
        assert.ok(client, `${world.id} ${name}: the hub knows ${clientId}`);
        try {
          const from = hub.frames.length;
          const uploadsBefore = mock.uploads(name).length;
          const requestsBefore = mock.requests(name).length;
          const answer = answerFor(name, 'default');
          mock.next(name, { answer, variant: 'default' });
          const id = `${world.id}-${name}`;
          const attachments = [hub.offerFile(client.id, PNG), hub.offerFile(client.id, PDF)];
          hub.send(client.id, { type: 'task', task_id: id, prompt: PROMPT, attachments, timeout_ms: 60000 });
          const end = await hub.waitFrame((f) => f.frame.type === 'task_update' && f.frame.task_id === id && ['done', 'failed'].includes(f.frame.state),
            { timeoutMs: 60000, what: `${id} finished` });
          assert.equal(end.frame.state, 'done', `${id}: ${end.frame.error || ''}`);
          const progress = hub.frames.slice(from).filter((f) => f.frame.task_id === id && f.frame.state === 'attaching').map((f) => `${f.frame.done}/${f.frame.of}`);
          assert.deepEqual(progress, ['0/2', '1/2', '2/2']);
          const got = mock.uploads(name).slice(uploadsBefore);
          assert.deepEqual(got.map((u) => u.sha256), [sha(PNG.bytes), sha(PDF.bytes)], `${id}: the site got both files byte for byte`);
          const sent = mock.requests(name).slice(requestsBefore);
          assert.equal(sent.length, 1, `${id}: one chat request`);
          for (const u of got) assert.ok(sent[0].body.includes(u.id.split('/').pop()), `${id}: the prompt names ${u.name}`);
          const fetched = hub.fileRequests.filter((r) => attachments.some((a) => a.id === r.id));
          assert.deepEqual(fetched.map((r) => [r.status, r.clientId]), [[200, client.id], [200, client.id]], `${id}: fetched by the manager with the tab's id`);
          const turn = hub.frames.slice(from).find((f) => f.frame.type === 'turn_end' && f.frame.task_id === id);
          assert.equal(turn?.frame.text, answer);
        } finally {
          client.connected = false;
          await tab.close?.();
        }
      }
    } finally {
      await browser.close();
    }
  });
}
