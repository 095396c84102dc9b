// Test (2): a hub `task` is typed into every site's input box and sent as a person would, the reply
// comes back as `turn_end` with the task id, the task moves accepted → sent → done, and the
// person's own draft is back in the box afterwards. A `deliver` without auto_send puts its block
// into the box between the draft's parts (the protected block).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMockServer, variantHost } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { answerFor, boxTextInPage, loadAdapters } from './fixtures.js';

let mock; let hub; let browser; let adapters;

before(async () => {
  mock = await startMockServer({ csp: false }); // the page-world shim: fast checks, not the real worlds (test/worlds)
  hub = await startStandInHub();
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await hub?.close();
  await mock?.close();
});

const DRAFT = '我的草稿 my draft ✍️';
const PROMPT = 'Review this 文档 please.\nSecond line: "quotes" & 🚀';

function readBox(page, adapter) {
  return page.evaluate(boxTextInPage, adapter.input.selectors.join(', '));
}

/** Waits (in the page, on every animation frame) until the box reads `want`. */
async function waitBox(page, adapter, want, what) {
  const sel = adapter.input.selectors.join(', ');
  const expr = `(${boxTextInPage.toString()})(${JSON.stringify(sel)}) === ${JSON.stringify(want)}`;
  try {
    await page.waitForFunction(expr, null, { timeout: 5000 });
  } catch {
    assert.equal(await readBox(page, adapter), want, what);
  }
}

async function typeDraft(page, adapter) {
  await page.locator(adapter.input.selectors.join(', ')).first().click();
  await page.keyboard.type(DRAFT);
  assert.equal(await readBox(page, adapter), DRAFT);
}

/** Sites whose default variant answers normally (the first non-error variant). */
function answeringVariant(site) {
  return (site.variants || ['default']).find((v) => !(site.errorVariants && v in site.errorVariants)) || 'default';
}

test('tasks are typed and sent into every site; the draft survives', async (t) => {
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter) continue;
    const variant = answeringVariant(site);
    const host = variantHost(site, variant);
    await t.test(`${site.name} @ ${host}`, async () => {
      const page = await openTab(browser.context, { host, hub });
      const client = await hub.waitClient((c) => c.site === site.name && c.hello.url?.includes(host) && c.connected, { timeoutMs: 10000 });
      try {
        await typeDraft(page, adapter);
        const seen = hub.frames.length;
        const sentBefore = mock.requests(site.name).length;
        const answer = answerFor(site.name, variant);
        const taskId = `task-${site.name}`;
        mock.next(site.name, { answer, variant });
        hub.send(client.id, { type: 'task', task_id: taskId, prompt: PROMPT, auto_send: true, timeout_ms: 20000, role: 'worker', priority: 0, retry: 0 });

        const end = await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'turn_end' && f.frame.task_id === taskId,
          { timeoutMs: 20000, what: `${site.name} task turn_end` });
        assert.equal(end.frame.text, answer);
        await hub.waitFrame((f) => f.frame.type === 'task_update' && f.frame.task_id === taskId && f.frame.state === 'done', { timeoutMs: 5000, what: 'done' });
        const states = hub.frames.slice(seen).filter((f) => f.frame.type === 'task_update' && f.frame.task_id === taskId).map((f) => f.frame.state);
        assert.deepEqual(states.filter((s) => s !== 'streaming'), ['accepted', 'sent', 'done']);
        assert.equal(hub.frames.slice(seen).filter((f) => f.clientId === client.id && f.frame.type === 'user_input').length, 0,
          'a task is not reported as the person\'s input');

        const requests = mock.requests(site.name).slice(sentBefore);
        assert.equal(requests.length, 1, 'exactly one request was sent');
        if (adapter.promptFromRequest) assert.equal(adapter.promptFromRequest(requests[0].body), PROMPT, 'the site received exactly the prompt');

        // The draft comes back once the site has taken the prompt.
        await waitBox(page, adapter, DRAFT, 'the draft is back in the box');

        // deliver without auto_send: the block goes in, the draft stays around it.
        hub.send(client.id, { type: 'deliver', text: 'Delivered 结果 block', auto_send: false });
        await waitBox(page, adapter, `${DRAFT}\nDelivered 结果 block`, 'delivered block after the draft');
        assert.deepEqual(page.errors.map(String), [], 'the page threw no errors');
      } finally {
        await page.close();
        client.connected = false;
      }
    });
  }
});
