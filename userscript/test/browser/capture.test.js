// Test (1): for every mock site and every stream variant, the `turn_end` the hub receives carries
// the mock's answer byte for byte (reasoning excluded), the `chunk`s add up to the same text, and
// the page's own rendering keeps working (the response was teed, not taken). Variants that end in
// a site error are sent as hub tasks and must come back as `task_update failed` with the reason.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMockServer, variantHost } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { answerFor, loadAdapters, personTypesAndSends, REASONING } from './fixtures.js';

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

/** Variants grouped by the host that serves them, so each host's page is opened once. */
function byHost(site) {
  const groups = new Map();
  for (const variant of site.variants || ['default']) {
    const host = variantHost(site, variant);
    if (!groups.has(host)) groups.set(host, []);
    groups.get(host).push(variant);
  }
  return groups;
}

const framesAfter = (seen, clientId, type) => hub.frames.slice(seen).filter((f) => f.clientId === clientId && f.frame.type === type);

async function expectAnswer(page, site, adapter, client, variant) {
  const answer = answerFor(site.name, variant);
  const seen = hub.frames.length;
  mock.next(site.name, { answer, reasoning: REASONING, variant });
  await personTypesAndSends(page, adapter, `question for ${variant}`);
  const end = await hub.waitFrame(
    (f) => hub.frames.indexOf(f) >= seen && f.clientId === client.id && f.frame.type === 'turn_end',
    { timeoutMs: 15000, what: `${site.name}/${variant} turn_end` },
  );
  assert.equal(end.frame.text, answer);
  assert.ok(!end.frame.text.includes('THINKING-NOT-ANSWER'), 'reasoning stays out of the answer');
  const chunks = framesAfter(seen, client.id, 'chunk').filter((f) => f.frame.turn_id === end.frame.turn_id).map((f) => f.frame);
  assert.deepEqual(chunks.map((c) => c.seq), chunks.map((_, i) => i), 'chunk seq runs 0..n-1');
  assert.equal(chunks.map((c) => c.text).join(''), answer, 'chunks add up to the answer');
  const inputs = framesAfter(seen, client.id, 'user_input').map((f) => f.frame.text);
  assert.deepEqual(inputs, [`question for ${variant}`], 'what the person sent is reported once');
}

async function expectSiteError(site, client, variant) {
  const seen = hub.frames.length;
  const taskId = `err-${site.name}-${variant}`;
  mock.next(site.name, { answer: answerFor(site.name, variant), reasoning: REASONING, variant });
  hub.send(client.id, { type: 'task', task_id: taskId, prompt: `trigger ${variant}`, auto_send: true, timeout_ms: 15000, role: 'worker', priority: 0, retry: 0 });
  const failed = await hub.waitFrame(
    (f) => hub.frames.indexOf(f) >= seen && f.frame.type === 'task_update' && f.frame.task_id === taskId && ['failed', 'done'].includes(f.frame.state),
    { timeoutMs: 20000, what: `${site.name}/${variant} task failure` },
  );
  assert.equal(failed.frame.state, 'failed');
  assert.ok(failed.frame.error && failed.frame.error.length > 3, 'failure carries a reason');
  const code = site.errorVariants[variant];
  if (code !== undefined && code !== null && code !== true) assert.match(failed.frame.error, new RegExp(String(code)));
  assert.equal(framesAfter(seen, client.id, 'turn_end').length, 0, 'no turn_end for a failed reply');
}

test('every site and variant: turn_end equals the mock answer', async (t) => {
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter) { t.diagnostic(`no adapter for mock ${site.name}`); continue; }
    for (const [host, variants] of byHost(site)) {
      await t.test(`${site.name} @ ${host}`, async (st) => {
        const page = await openTab(browser.context, { host, hub });
        const client = await hub.waitClient((c) => c.site === site.name && c.hello.url?.includes(host) && c.connected, { timeoutMs: 10000 });
        try {
          for (const variant of variants) {
            await st.test(variant, async () => {
              if (site.errorVariants && variant in site.errorVariants) await expectSiteError(site, client, variant);
              else await expectAnswer(page, site, adapter, client, variant);
            });
          }
          assert.deepEqual(page.errors.map(String), [], 'the page threw no errors');
        } finally {
          await page.close();
          client.connected = false;
        }
      });
    }
  }
});
