// An agent loop's delivery with files (docs/files.md "Back", docs/agents.md), in the page-world shim against
// the stand-in hub: a `deliver {auto_send, agent, attachments}` is attached through the site's own upload
// (DeepSeek's file input, Gemini's drop) before the results are typed and sent — the site's upload requests
// carry the very bytes the hub served, then one chat request with exactly the results, naming the file;
// progress is `attaching` 0/1, 1/1 under the delivery's `deliver_id`; the person's draft is kept aside and
// comes back whole. A file the site refuses fails the delivery (`task_update {deliver_id, state: "failed",
// trouble: "attachment_refused"}`) and nothing is sent. On the real hub (skipped without a binary): the desk's
// `?<agent task NAME with files=[…] TEXT>!` reaches the agent's DeepSeek tab as the session's first message, the
// site's upload carries the hub's bytes before the primer and task are sent, and the agent's `done` answers the
// desk. Waits on frames and page state, never on sleeps.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startMockServer, variantHost } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { boxTextInPage, loadAdapters } from './fixtures.js';
import { ensureHubBinary, startRealHub } from './real-hub.js';
import { openDesk, until } from './stop-story.js';
import { EXE, PNG } from './files.js';

let mock; let hub; let browser; let adapters;

before(async () => {
  mock = await startMockServer({ csp: false });
  hub = await startStandInHub();
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await hub?.close();
  await mock?.close();
});

const RESULTS = '⟦aicard result 1/1⟧ skill chart → ✓\n[附件 / attachment: 图表 chart.png, attached to this message]\nround 1/25 · 完成后写 / when finished write: ?‹done FINAL›!';
const sha = (b) => createHash('sha256').update(b).digest('hex');

let deliveries = 0;
const deliver = (session, attachments) => ({
  type: 'deliver', text: RESULTS, auto_send: true, deliver_id: `${session}-r1-s${++deliveries}`,
  agent: { session, round: 1, of: 25 }, attachments,
});

function answeringVariant(site) {
  return (site.variants || ['default']).find((v) => !(site.errorVariants && v in site.errorVariants)) || 'default';
}

async function open(siteName) {
  const site = mock.sites.find((s) => s.name === siteName);
  const host = variantHost(site, answeringVariant(site));
  const page = await openTab(browser.context, { host, hub });
  const client = await hub.waitClient((c) => c.site === siteName && c.hello.url?.includes(host) && c.connected, { timeoutMs: 10000 });
  return { page, client, adapter: adapters.get(siteName), site };
}

const deliveryUpdates = (from, id) => hub.frames.slice(from)
  .filter((f) => f.frame.type === 'task_update' && f.frame.deliver_id === id).map((f) => f.frame);

test('a delivery\'s file is attached through the site\'s own upload before the results are sent; the draft kept', async (t) => {
  for (const name of ['deepseek', 'gemini']) {
    await t.test(name, async () => {
      const { page, client, adapter, site } = await open(name);
      try {
        const sel = adapter.input.selectors.join(', ');
        const DRAFT = '我的草稿 not for the model ✍️';
        await page.locator(sel).first().click();
        await page.keyboard.type(DRAFT);
        const from = hub.frames.length;
        const uploadsBefore = mock.uploads(name).length;
        const requestsBefore = mock.requests(name).length;
        const answer = `the model looked at the picture on ${name} ✅`;
        mock.next(name, { answer, variant: answeringVariant(site) });
        const frame = deliver(`s-${name}`, [hub.offerFile(client.id, PNG)]);
        hub.send(client.id, frame);

        const end = await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'turn_end' && hub.frames.indexOf(f) >= from,
          { timeoutMs: 30000, what: `${name} turn_end`});
        assert.equal(end.frame.text, answer);
        const progress = deliveryUpdates(from, frame.deliver_id).filter((u) => u.state !== 'held');
        assert.deepEqual(progress.map((u) => `${u.state} ${u.done}/${u.of}`), ['attaching 0/1', 'attaching 1/1']);
        // The site's own upload carried the bytes the hub served; then one chat request, after it.
        const got = mock.uploads(name).slice(uploadsBefore);
        assert.deepEqual(got.map((u) => [u.name, u.sha256]), [[PNG.name, sha(PNG.bytes)]], 'the site received the file, byte for byte');
        const sent = mock.requests(name).slice(requestsBefore);
        assert.equal(sent.length, 1, 'one chat request');
        assert.ok(sent[0].at >= got[0].at, 'the results went after the upload finished');
        assert.ok(sent[0].body.includes(got[0].id), 'the chat request names the uploaded file');
        assert.equal(adapter.promptFromRequest(sent[0].body), RESULTS, 'exactly the results, not the draft');
        const fetched = hub.fileRequests.filter((r) => r.id === frame.attachments[0].id);
        assert.deepEqual(fetched.map((r) => [r.status, r.clientId]), [[200, client.id]], 'fetched once, with the tab\'s own id');
        assert.deepEqual(hub.frames.slice(from).filter((f) => f.clientId === client.id && f.frame.type === 'user_input'), [],
          'the hub\'s turn is not the person\'s input');
        await page.waitForFunction(`(${boxTextInPage.toString()})(${JSON.stringify(sel)}) === ${JSON.stringify(DRAFT)}`, null, { timeout: 5000 });
        assert.deepEqual(page.errors.map(String), []);
      } finally {
        await page.close();
        client.connected = false;
      }
    });
  }
});

test('a delivery\'s file the site refuses: the hub is told (attachment_refused) and nothing is sent', async () => {
  const { page, client } = await open('deepseek');
  try {
    const from = hub.frames.length;
    const uploadsBefore = mock.uploads('deepseek').length;
    const requestsBefore = mock.requests('deepseek').length;
    const frame = deliver('s-refused', [hub.offerFile(client.id, EXE)]);
    hub.send(client.id, frame);
    const failed = await hub.waitFrame((f) => f.frame.type === 'task_update' && f.frame.deliver_id === frame.deliver_id && f.frame.state === 'failed',
      { timeoutMs: 20000, what: 'the delivery failed' });
    assert.equal(failed.frame.trouble, 'attachment_refused');
    assert.match(failed.frame.error, /^setup\.exe: /);
    assert.equal(mock.uploads('deepseek').length, uploadsBefore, 'nothing was uploaded');
    assert.equal(mock.requests('deepseek').length, requestsBefore, 'the results were not sent without their file');
    assert.ok(!deliveryUpdates(from, frame.deliver_id).some((u) => u.state === 'sent'));
    // The same delivery again (a hub resending after a crash) is not tried twice.
    hub.send(client.id, frame);
    const again = deliver('s-refused-2', []);
    mock.next('deepseek', { answer: 'next one', variant: 'default' });
    hub.send(client.id, again);
    await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'turn_end' && hub.frames.indexOf(f) >= from,
      { timeoutMs: 20000, what: 'the next delivery answered' });
    assert.equal(deliveryUpdates(from, frame.deliver_id).filter((u) => u.state === 'failed').length, 1);
  } finally {
    await page.close();
    client.connected = false;
  }
});

test('real hub: agent task with files — the agent\'s tab attaches the file before the first message, the answer back', { skip: ensureHubBinary() || false, timeout: 120_000 }, async () => {
  const real = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`), args: ['--agent-gap', '0-0'] });
  mkdirSync(join(real.dataDir, 'files'), { recursive: true });
  writeFileSync(join(real.dataDir, 'files', PNG.name), PNG.bytes);
  const desk = await openDesk(real.url, real.token);
  const site = mock.sites.find((s) => s.name === 'deepseek');
  const label = 'deepseek-agent-files';
  const page = await openTab(browser.context, { host: site.hosts[0], hub: { url: real.url, token: real.token }, gmValues: { label } });
  try {
    await until(() => page.evaluate(() => document.querySelector('aicard-panel')?.dataset.state === 'open'), Boolean, { timeoutMs: 20000, what: 'the tab connected' });
    const made = await desk.run(`agent create looker on ${label}`);
    assert.equal(made.result?.success, true, JSON.stringify(made.result));
    mock.next('deepseek', { answer: '图里是一张图表。?<done 一张图表>!', variant: 'default' });
    const uploadsBefore = mock.uploads('deepseek').length;
    const requestsBefore = mock.requests('deepseek').length;
    const r = await desk.run(`agent task looker with files=["${PNG.name}"] 这张图里有什么？`, 60000);
    assert.equal(r.result?.success, true, JSON.stringify(r.result));
    assert.equal(r.result?.output, '一张图表');
    const got = mock.uploads('deepseek').slice(uploadsBefore);
    assert.deepEqual(got.map((u) => [u.name, u.sha256]), [[PNG.name, sha(PNG.bytes)]], 'the site got the hub\'s bytes');
    const sent = mock.requests('deepseek').slice(requestsBefore);
    assert.equal(sent.length, 1, 'one message: the primer and the task, with the file');
    assert.ok(sent[0].at >= got[0].at && sent[0].body.includes(got[0].id), 'sent after the upload, naming it');
    assert.ok(sent[0].body.includes('这张图里有什么'), 'the task went with it');
  } finally {
    await page.close();
    desk.close();
    await real.close();
  }
});
