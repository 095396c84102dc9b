// Test (1): for every mock site and every stream variant, the `turn_end` the hub receives carries
// the mock's answer byte for byte (reasoning excluded), `chunk`s add up to the same text, and the
// page's own rendering keeps working (the response was teed, not taken).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMockServer } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { answerFor, loadAdapters, personTypesAndSends, REASONING } from './fixtures.js';

let mock; let hub; let browser; let adapters;

before(async () => {
  mock = await startMockServer();
  hub = await startStandInHub();
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await hub?.close();
  await mock?.close();
});

test('every site and variant: turn_end equals the mock answer', async (t) => {
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter) { t.diagnostic(`no adapter for mock ${site.name}`); continue; }
    await t.test(site.name, async (st) => {
      const page = await openTab(browser.context, { host: site.hosts[0], hub });
      const client = await hub.waitClient((c) => c.site === site.name && c.connected, { timeoutMs: 10000 });
      try {
        for (const variant of site.variants || ['default']) {
          await st.test(variant, async () => {
            const answer = answerFor(site.name, variant);
            const seen = hub.frames.length;
            mock.next(site.name, { answer, reasoning: REASONING, variant });
            await personTypesAndSends(page, adapter, `question for ${variant}`);
            const end = await hub.waitFrame(
              (f) => hub.frames.indexOf(f) >= seen && f.clientId === client.id && f.frame.type === 'turn_end',
              { timeoutMs: 15000, what: `${site.name}/${variant} turn_end` },
            );
            assert.equal(end.frame.text, answer);
            assert.ok(!end.frame.text.includes('THINKING-NOT-ANSWER'));
            const chunks = hub.frames.slice(seen)
              .filter((f) => f.clientId === client.id && f.frame.type === 'chunk' && f.frame.turn_id === end.frame.turn_id)
              .map((f) => f.frame);
            assert.deepEqual(chunks.map((c) => c.seq), chunks.map((_, i) => i), 'chunk seq runs 0..n-1');
            assert.equal(chunks.map((c) => c.text).join(''), answer, 'chunks add up to the answer');
          });
        }
        assert.deepEqual(page.errors.map(String), [], 'the page threw no errors');
      } finally {
        await page.close();
      }
    });
  }
});
