// Test (3): one master tab and four worker tabs on four different mock sites, all on the real hub.
// The person types `?<manager run cross-review>!` into the master's input box; the hub runs
// flows/cross-review.yaml (three reviews in parallel on deepseek, qianwen and doubao, a synthesis
// on chatgpt) and the aggregated report appears in the master's input box. A screenshot of the
// master panel goes to userscript/test-results/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startMockServer } from '../../mock/server.js';
import { launchBrowser, openTab, RESULTS } from './harness.js';
import { boxTextInPage, loadAdapters, personTypesAndSends } from './fixtures.js';
import { ensureHubBinary, startRealHub, startRecordingProxy } from './real-hub.js';

const WORKERS = ['deepseek', 'qianwen', 'doubao', 'chatgpt'];
const MASTER = 'claude';

/**
 * Asks the hub, as a non-browser master client, for `?<manager list>!`; null when it answers with
 * a cmd_result (it runs commands), else why not.
 */
async function hubRunsCommands(hub) {
  const ws = new WebSocket(`${hub.url.replace(/^http/, 'ws')}/realtime`);
  try {
    return await new Promise((resolve) => {
      const timer = setTimeout(() => resolve('no cmd_result for ?<manager list>! within 5 s'), 5000);
      ws.on('error', (e) => { clearTimeout(timer); resolve(`cannot connect: ${e.message}`); });
      ws.on('open', () => ws.send(JSON.stringify({ type: 'hello', token: hub.token, site: 'sim', role: 'master', label: 'probe' })));
      ws.on('message', (data) => {
        const frame = JSON.parse(String(data));
        if (frame.type === 'welcome') ws.send(JSON.stringify({ type: 'user_input', text: '?<manager list>!' }));
        if (frame.type === 'cmd_result') { clearTimeout(timer); resolve(null); }
      });
    });
  } finally {
    ws.close();
  }
}

let unavailable = ensureHubBinary();
let mock; let browser; let adapters; let hub; let proxy;

before(async () => {
  if (unavailable) return;
  mock = await startMockServer({ csp: false }); // the page-world shim: fast checks, not the real worlds (test/worlds)
  hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`), args: ['--flows', 'flows'] });
  unavailable = await hubRunsCommands(hub);
  if (unavailable) return;
  proxy = await startRecordingProxy(hub.url);
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await proxy?.close();
  await hub?.close();
  await mock?.close();
});

test('master + four workers: ?<manager run cross-review>! puts the report in the master input', async (t) => {
  if (unavailable) { t.skip(`the real hub cannot run flows yet: ${unavailable}`); return; }
  const tabHub = { url: proxy.url, token: hub.token };
  const pages = {};
  try {
    for (const site of WORKERS) {
      pages[site] = await openTab(browser.context, { host: mock.sites.find((s) => s.name === site).hosts[0], hub: tabHub, gmValues: { label: `${site}-worker` } });
    }
    pages.master = await openTab(browser.context, {
      host: mock.sites.find((s) => s.name === MASTER).hosts[0], hub: tabHub, gmValues: { role: 'master', label: 'master-desk', debug: true },
    });
    // Every tab has its welcome before the person starts the flow.
    for (const site of [...WORKERS, MASTER]) {
      await proxy.waitFrame((f) => f.dir === 'down' && f.frame?.type === 'welcome'
        && proxy.frames.some((h) => h.conn === f.conn && h.dir === 'up' && h.frame?.type === 'hello' && h.frame.site === site), { what: `${site} welcome` });
    }

    const reviews = {
      deepseek: 'DeepSeek review: strong intro, weak data. 数据不足。',
      qianwen: 'Qianwen review: clear structure; add sources. 结构清晰。',
      doubao: 'Doubao review: good tone 👍, fix the conclusion.',
    };
    for (const [site, answer] of Object.entries(reviews)) mock.next(site, { answer });
    const report = 'Merged report 综合报告: agree on data gaps; fix conclusion first. ✅';
    mock.next('chatgpt', { answer: report });
    mock.next(MASTER, { answer: 'OK, starting the cross-review. 好的。' });

    await personTypesAndSends(pages.master, adapters.get(MASTER), '?<manager run cross-review>!');
    await proxy.waitFrame((f) => f.dir === 'up' && f.frame?.type === 'user_input' && f.frame.text === '?<manager run cross-review>!', { what: 'the command reaches the hub' });

    const inputSel = adapters.get(MASTER).input.selectors.join(', ');
    const expr = `((${boxTextInPage.toString()})(${JSON.stringify(inputSel)}) || '').includes(${JSON.stringify(report)})`;
    await pages.master.waitForFunction(expr, null, { timeout: 90000 });
    const box = await pages.master.evaluate(boxTextInPage, inputSel);
    assert.ok(box.includes(report), 'the aggregated report is in the master input box');

    // The synthesis prompt carried all three reviews.
    const synthRequests = mock.requests('chatgpt');
    const synthPrompt = adapters.get('chatgpt').promptFromRequest(synthRequests.at(-1).body);
    for (const answer of Object.values(reviews)) assert.ok(synthPrompt.includes(answer), `synthesis saw: ${answer}`);

    // Every worker answered its task with a turn_end carrying the task id.
    const ends = proxy.frames.filter((f) => f.dir === 'up' && f.frame?.type === 'turn_end' && f.frame.task_id);
    assert.ok(ends.length >= 4, `four task answers, got ${ends.length}`);

    const panel = await pages.master.evaluate(() => window.__aicardMenu('mcpPanel'));
    mkdirSync(RESULTS, { recursive: true });
    await pages.master.screenshot({ path: join(RESULTS, 'master-panel.png'), clip: panel.rect });
    await pages.master.screenshot({ path: join(RESULTS, 'master-tab.png') });
  } finally {
    for (const p of Object.values(pages)) await p.close();
  }
});
