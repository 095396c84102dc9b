// Files into tabs (docs/userscript.md "Files and images"), on every mock site with the page-world shim and
// the stand-in hub: a task with an image and a PDF is attached as the site's page takes files (its file input,
// or a drop on Gemini's input area), each upload finished on the site before the text goes, and the site's
// own requests carry the very bytes the hub served and then the prompt with the files' ids; progress is
// `attaching` 0/2, 1/2, 2/2. A file the site refuses (a type outside its accept list, or an upload error the
// page shows) fails the task with `attachment_refused` and nothing is sent. A person's draft is set aside and
// comes back whole. Waits on frames and page state, never on sleeps.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startMockServer, variantHost } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { answerFor, boxTextInPage, loadAdapters } from './fixtures.js';
import { EXE, PDF, PNG } from './files.js';

let mock; let hub; let browser; let adapters;

before(async () => {
  mock = await startMockServer({ csp: false }); // the page-world shim: the manager worlds are in test/worlds
  hub = await startStandInHub();
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await hub?.close();
  await mock?.close();
});

const PROMPT = 'Describe the picture and summarise the PDF / 描述图片并总结文档';
const sha = (b) => createHash('sha256').update(b).digest('hex');

function answeringVariant(site) {
  return (site.variants || ['default']).find((v) => !(site.errorVariants && v in site.errorVariants)) || 'default';
}

async function open(site) {
  const host = variantHost(site, answeringVariant(site));
  const page = await openTab(browser.context, { host, hub });
  const client = await hub.waitClient((c) => c.site === site.name && c.hello.url?.includes(host) && c.connected, { timeoutMs: 10000 });
  return { page, client, host };
}

const updates = (from, id) => hub.frames.slice(from).filter((f) => f.frame.type === 'task_update' && f.frame.task_id === id).map((f) => f.frame);

async function finished(id) {
  return hub.waitFrame((f) => f.frame.type === 'task_update' && f.frame.task_id === id && ['done', 'failed'].includes(f.frame.state),
    { timeoutMs: 30000, what: `${id} done or failed` });
}

test('an image and a PDF reach every site through its own upload, then the prompt that refers to them', async (t) => {
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter?.upload) continue;
    await t.test(site.name, async () => {
      const { page, client } = await open(site);
      try {
        const from = hub.frames.length;
        const uploadsBefore = mock.uploads(site.name).length;
        const requestsBefore = mock.requests(site.name).length;
        const variant = answeringVariant(site);
        const answer = answerFor(site.name, variant);
        mock.next(site.name, { answer, variant });
        const id = `attach-${site.name}`;
        const attachments = [hub.offerFile(client.id, PNG), hub.offerFile(client.id, PDF)];
        hub.send(client.id, { type: 'task', task_id: id, prompt: PROMPT, attachments, timeout_ms: 30000, role: 'worker', priority: 0, retry: 0 });
        const end = await finished(id);
        assert.equal(end.frame.state, 'done', `${site.name}: ${end.frame.error || ''}`);
        const states = updates(from, id).filter((u) => u.state !== 'streaming');
        assert.deepEqual(states.map((u) => (u.state === 'attaching' ? `attaching ${u.done}/${u.of}` : u.state)),
          ['accepted', 'attaching 0/2', 'attaching 1/2', 'attaching 2/2', 'sent', 'done']);
        const turn = hub.frames.slice(from).find((f) => f.frame.type === 'turn_end' && f.frame.task_id === id);
        assert.equal(turn?.frame.text, answer);

        // The site's own upload requests carried exactly the bytes the hub served, in order.
        const got = mock.uploads(site.name).slice(uploadsBefore);
        assert.deepEqual(got.map((u) => u.sha256), [sha(PNG.bytes), sha(PDF.bytes)], 'the site received both files, byte for byte');
        assert.deepEqual(got.map((u) => u.name), [PNG.name, PDF.name]);
        // Then one chat request, after every upload, naming every uploaded file.
        const sent = mock.requests(site.name).slice(requestsBefore);
        assert.equal(sent.length, 1, 'one chat request');
        assert.ok(sent[0].at >= Math.max(...got.map((u) => u.at)), 'the prompt went after the uploads finished');
        for (const u of got) assert.ok(sent[0].body.includes(u.id), `the chat request names ${u.name} (${u.id})`);
        if (adapter.promptFromRequest) assert.equal(adapter.promptFromRequest(sent[0].body), PROMPT);
        // Fetched through the manager's request, with the tab's headers.
        const fetched = hub.fileRequests.filter((r) => attachments.some((a) => a.id === r.id));
        assert.deepEqual(fetched.map((r) => [r.status, r.clientId, r.origin]), [[200, client.id, null], [200, client.id, null]]);
        assert.deepEqual(page.errors.map(String), []);
      } finally {
        await page.close();
        client.connected = false;
      }
    });
  }
});

test('a file the site refuses fails the task with attachment_refused, and nothing is sent', async (t) => {
  const byName = (n) => mock.sites.find((s) => s.name === n);
  await t.test('a type outside the accept list (deepseek)', async () => {
    const { page, client } = await open(byName('deepseek'));
    try {
      const requestsBefore = mock.requests('deepseek').length;
      const uploadsBefore = mock.uploads('deepseek').length;
      const id = 'refused-type';
      hub.send(client.id, { type: 'task', task_id: id, prompt: PROMPT, attachments: [hub.offerFile(client.id, PNG), hub.offerFile(client.id, EXE)], timeout_ms: 20000 });
      const end = await finished(id);
      assert.equal(end.frame.state, 'failed');
      assert.equal(end.frame.trouble, 'attachment_refused');
      assert.match(end.frame.error, /^setup\.exe: /);
      assert.equal(mock.uploads('deepseek').length, uploadsBefore, 'nothing was uploaded');
      assert.equal(mock.requests('deepseek').length, requestsBefore, 'nothing was sent');
    } finally {
      await page.close();
      client.connected = false;
    }
  });
  for (const name of ['claude', 'gemini']) {
    await t.test(`the page shows an upload error (${name})`, async () => {
      const { page, client } = await open(byName(name));
      try {
        const requestsBefore = mock.requests(name).length;
        const reason = 'This file could not be processed / 文件无法处理';
        mock.nextUpload(name, { status: 400, message: reason });
        const id = `refused-upload-${name}`;
        hub.send(client.id, { type: 'task', task_id: id, prompt: PROMPT, attachments: [hub.offerFile(client.id, PDF)], timeout_ms: 20000 });
        const end = await finished(id);
        assert.equal(end.frame.state, 'failed');
        assert.equal(end.frame.trouble, 'attachment_refused');
        assert.equal(end.frame.error, `${PDF.name}: ${reason}`, 'the file\'s name and the site\'s own words');
        assert.equal(mock.requests(name).length, requestsBefore, 'nothing was sent');
        assert.ok(!updates(0, id).some((u) => u.state === 'sent'));
      } finally {
        await page.close();
        client.connected = false;
      }
    });
  }
});

test('a file while the person has a draft: the draft is set aside and comes back whole', async (t) => {
  for (const name of ['qianwen', 'yuanbao', 'gemini']) {
    await t.test(name, async () => {
      const site = mock.sites.find((s) => s.name === name);
      const adapter = adapters.get(name);
      const { page, client } = await open(site);
      try {
        const sel = adapter.input.selectors.join(', ');
        const DRAFT = '我的草稿 draft ✍️';
        await page.locator(sel).first().click();
        await page.keyboard.type(DRAFT);
        const requestsBefore = mock.requests(name).length;
        const variant = answeringVariant(site);
        mock.next(name, { answer: answerFor(name, variant), variant });
        const id = `draft-${name}`;
        hub.send(client.id, { type: 'task', task_id: id, prompt: PROMPT, attachments: [hub.offerFile(client.id, PNG)], timeout_ms: 30000 });
        const end = await finished(id);
        assert.equal(end.frame.state, 'done', end.frame.error);
        const sent = mock.requests(name).slice(requestsBefore);
        assert.equal(sent.length, 1);
        if (adapter.promptFromRequest) assert.equal(adapter.promptFromRequest(sent[0].body), PROMPT, 'the draft was not sent');
        await page.waitForFunction(`(${boxTextInPage.toString()})(${JSON.stringify(sel)}) === ${JSON.stringify(DRAFT)}`, null, { timeout: 5000 });
      } finally {
        await page.close();
        client.connected = false;
      }
    });
  }
});

test('a file the hub no longer has (404) or whose bytes do not match fails the task; nothing is attached', async () => {
  const site = mock.sites.find((s) => s.name === 'kimi');
  const { page, client } = await open(site);
  try {
    const uploadsBefore = mock.uploads('kimi').length;
    const requestsBefore = mock.requests('kimi').length;
    hub.send(client.id, { type: 'task', task_id: 'gone', prompt: PROMPT, attachments: [{ id: 'no-such-file', name: 'gone.png', mime: 'image/png', size: 3, sha256: sha(Buffer.from('abc')) }], timeout_ms: 20000 });
    const gone = await finished('gone');
    assert.equal(gone.frame.state, 'failed');
    assert.match(gone.frame.error, /gone\.png: .*404/);
    const wrong = hub.offerFile(client.id, { ...PNG, sha256: sha(Buffer.from('something else')) });
    hub.send(client.id, { type: 'task', task_id: 'tampered', prompt: PROMPT, attachments: [wrong], timeout_ms: 20000 });
    const tampered = await finished('tampered');
    assert.equal(tampered.frame.state, 'failed');
    assert.match(tampered.frame.error, /SHA-256/);
    assert.equal(mock.uploads('kimi').length, uploadsBefore);
    assert.equal(mock.requests('kimi').length, requestsBefore);
  } finally {
    await page.close();
    client.connected = false;
  }
});
