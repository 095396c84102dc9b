// The floating panel: on every site it stays off the input box (also after being dragged onto it);
// in the master tab it shows flow progress from `flow_event`s, and its pause/stop buttons send
// `?<manager pause|stop NAME>!` as the person's input. Saves a screenshot of the master panel.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startMockServer } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab, RESULTS } from './harness.js';
import { loadAdapters } from './fixtures.js';

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

const overlap = (a, b) => a.x < b.x + b.width && a.x + a.width > b.x && a.y < b.y + b.height && a.y + a.height > b.y;

async function rects(page, adapter) {
  await page.waitForFunction(() => document.querySelector('aicard-panel'));
  return page.evaluate((sel) => {
    const r = (el) => { const b = el.getBoundingClientRect(); return { x: b.x, y: b.y, width: b.width, height: b.height }; };
    return { panel: r(document.querySelector('aicard-panel')), input: r(document.querySelector(sel)) };
  }, adapter.input.selectors.join(', '));
}

test('the panel never covers the input box, even when dropped on it', async (t) => {
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter) continue;
    await t.test(site.name, async () => {
      const page = await openTab(browser.context, { host: site.hosts[0], hub, gmValues: { debug: true } });
      try {
        const before = await rects(page, adapter);
        assert.ok(before.panel.width > 100 && before.panel.height > 40, 'panel is shown');
        assert.ok(!overlap(before.panel, before.input), 'panel is off the input');
        // Drag by the header onto the middle of the input box.
        const from = { x: before.panel.x + 30, y: before.panel.y + 10 };
        await page.mouse.move(from.x, from.y);
        await page.mouse.down();
        await page.mouse.move(before.input.x + before.input.width / 2, before.input.y + 5, { steps: 5 });
        await page.mouse.up();
        const after = await rects(page, adapter);
        assert.notDeepEqual(after.panel, before.panel, 'the panel moved');
        assert.ok(!overlap(after.panel, after.input), 'dropped on the input, the panel moves off it');
      } finally {
        await page.close();
      }
    });
  }
});

test('master panel: flow progress, pause and stop buttons', async () => {
  const site = mock.sites.find((s) => s.name === 'deepseek') || mock.sites[0];
  const page = await openTab(browser.context, { host: site.hosts[0], hub, gmValues: { debug: true, role: 'master', label: '总指挥 desk' } });
  try {
    const master = await hub.waitClient((c) => c.site === site.name && c.role === 'master');
    const events = [
      { run_id: 'run-1', flow: 'cross-review', state: 'running' },
      { run_id: 'run-1', flow: 'cross-review', node_id: 'review', state: 'running' },
      { run_id: 'run-1', flow: 'cross-review', node_id: 'synth', state: 'pending' },
      { run_id: 'run-1', flow: 'cross-review', node_id: 'report', state: 'pending' },
      { run_id: 'run-1', flow: 'cross-review', node_id: 'review', state: 'completed' },
      { run_id: 'run-1', flow: 'cross-review', node_id: 'synth', state: 'running' },
    ];
    for (const ev of events) hub.send(master.id, { type: 'flow_event', ...ev });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('cross-review · running · 1/3'));
    const panel = await page.evaluate(() => window.__aicardMenu('mcpPanel'));
    assert.match(panel.text, /总指挥 Master/);
    assert.match(panel.text, /已连接 connected \(ws\)/);
    assert.match(panel.text, /总指挥 desk/);

    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: join(RESULTS, 'master-panel-stand-in.png'), clip: panel.rect });

    const click = async (act) => {
      const b = (await page.evaluate(() => window.__aicardMenu('mcpPanel'))).buttons.find((x) => x.act === act);
      assert.ok(b, `${act} button shown`);
      await page.mouse.click(b.rect.x + b.rect.width / 2, b.rect.y + b.rect.height / 2);
    };
    await click('pause');
    await hub.waitFrame((f) => f.clientId === master.id && f.frame.type === 'user_input' && f.frame.text === '?<manager pause cross-review>!');
    hub.send(master.id, { type: 'flow_event', run_id: 'run-1', flow: 'cross-review', state: 'paused' });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').buttons.some((b) => b.act === 'resume'));
    await click('stop');
    await hub.waitFrame((f) => f.clientId === master.id && f.frame.type === 'user_input' && f.frame.text === '?<manager stop cross-review>!');
    hub.send(master.id, { type: 'flow_event', run_id: 'run-1', flow: 'cross-review', state: 'cancelled' });
    await page.waitForFunction(() => !window.__aicardMenu('mcpPanel').buttons.some((b) => ['pause', 'resume', 'stop'].includes(b.act)));

    await click('fold');
    assert.equal((await page.evaluate(() => window.__aicardMenu('mcpPanel'))).collapsed, true, 'the panel collapses');
  } finally {
    await page.close();
  }
});
