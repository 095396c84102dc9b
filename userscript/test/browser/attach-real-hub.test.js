// Files into tabs on the real hub (docs/files.md): the person's desk says `?<to TAB with files=[…]: …>!`, the
// hub hands the tab a task with `attachments`, the tab fetches each from the hub's GET /files/ID through the
// manager's request (the page-world shim here), the site's own upload carries the same bytes, and the answer
// comes back to the desk. A file the site refuses ends the command with `attachment_refused` and nothing sent.
// Skipped without a hub that serves files (`aicard serve --files`).
//   AICARD_BIN=/work/main/target/debug/aicard node --test --test-reporter=spec test/browser/attach-real-hub.test.js
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startMockServer } from '../../mock/server.js';
import { launchBrowser, openTab } from './harness.js';
import { answerFor } from './fixtures.js';
import { ensureHubBinary, HUB_BIN, startRealHub, startRecordingProxy } from './real-hub.js';
import { openDesk, until } from './stop-story.js';
import { EXE, PDF, PNG } from './files.js';

function filesUnavailable() {
  const missing = ensureHubBinary();
  if (missing) return missing;
  const help = spawnSync(HUB_BIN, ['serve', '--help'], { encoding: 'utf8' });
  return /--files/.test(help.stdout || '') ? null : 'this aicard binary serves no files (`serve --files`) yet';
}

const unavailable = filesUnavailable();
const opts = { skip: unavailable || false, timeout: 120_000 };
const sha = (b) => createHash('sha256').update(b).digest('hex');
let mock; let hub; let proxy; let browser; let desk;

before(async () => {
  if (unavailable) return;
  mock = await startMockServer({ csp: false });
  hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`) });
  mkdirSync(join(hub.dataDir, 'files'), { recursive: true });
  for (const f of [PNG, PDF, EXE]) writeFileSync(join(hub.dataDir, 'files', f.name), f.bytes);
  proxy = await startRecordingProxy(hub.url);
  browser = await launchBrowser({ mock });
  desk = await openDesk(hub.url, hub.token);
});

after(async () => {
  desk?.close();
  await browser?.close();
  await proxy?.close();
  await hub?.close();
  await mock?.close();
});

const connected = () => document.querySelector('aicard-panel')?.dataset.state === 'open';

for (const name of ['deepseek', 'gemini']) {
  test(`real hub: an image and a PDF into ${name}, the answer back to the desk`, opts, async () => {
    const label = `${name}-files`;
    const page = await openTab(browser.context, { host: mock.sites.find((s) => s.name === name).hosts[0], hub: { url: proxy.url, token: hub.token }, gmValues: { label } });
    try {
      await until(() => page.evaluate(connected), Boolean, { timeoutMs: 20000, what: `${name} connected` });
      const answer = answerFor(name, 'default');
      mock.next(name, { answer, variant: 'default' });
      const uploadsBefore = mock.uploads(name).length;
      const requestsBefore = mock.requests(name).length;
      const r = await desk.run(`to ${label} with files=["${PNG.name}", "${PDF.name}"]: 这两个文件说了什么 / what do these say`, 60000);
      assert.notEqual(r.result?.success, false, JSON.stringify(r.result));
      assert.ok(String(r.result?.output ?? '').includes(answer.slice(0, 12)), `the answer came back: ${r.result?.output}`);
      const got = mock.uploads(name).slice(uploadsBefore);
      assert.deepEqual(got.map((u) => u.sha256), [sha(PNG.bytes), sha(PDF.bytes)], 'the site got the hub\'s bytes');
      const sent = mock.requests(name).slice(requestsBefore);
      assert.equal(sent.length, 1);
      for (const u of got) assert.ok(sent[0].body.includes(u.id.split('/').pop()), `the prompt names ${u.name}`);
      const attaching = proxy.frames.filter((f) => f.dir === 'up' && f.frame?.type === 'task_update' && f.frame.state === 'attaching').map((f) => `${f.frame.done}/${f.frame.of}`);
      assert.deepEqual(attaching.slice(-3), ['0/2', '1/2', '2/2']);
    } finally {
      await page.close();
    }
  });
}

test('real hub: a file the site refuses ends the command with attachment_refused; nothing is sent', opts, async () => {
  const label = 'deepseek-refuses';
  const page = await openTab(browser.context, { host: 'chat.deepseek.com', hub: { url: proxy.url, token: hub.token }, gmValues: { label } });
  try {
    await until(() => page.evaluate(connected), Boolean, { timeoutMs: 20000, what: 'connected' });
    const requestsBefore = mock.requests('deepseek').length;
    const r = await desk.run(`to ${label} with files=["${EXE.name}"]: run this`, 60000);
    const text = JSON.stringify(r.result);
    assert.equal(r.result?.success, false, text);
    assert.match(text, /setup\.exe/);
    const failed = proxy.frames.find((f) => f.dir === 'up' && f.frame?.type === 'task_update' && f.frame.state === 'failed' && f.frame.trouble === 'attachment_refused');
    assert.ok(failed, 'the tab reported attachment_refused');
    assert.equal(mock.requests('deepseek').length, requestsBefore, 'nothing was sent');
  } finally {
    await page.close();
  }
});
