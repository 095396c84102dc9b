// Issue 32 item 10, the dashboard's smaller gaps, in Chromium against the real hub:
// "● live" and the role names in 中文; the Runs list's "Updated" moving with the run's journal;
// the Runs filter (flows / API & MCP / all, with counts, remembered); the engine's score table
// fully visible in the node panel; one row per tab identity across reconnects; every symbol
// the page shows has a glyph (pause is drawn). Zero page errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startHub, simTab } from './hub.js';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const STEPS = `name: steps
nodes:
  - id: one
    to: role:worker
    prompt: "step one"
  - id: two
    depends_on: one
    prompt: "step two"
  - id: three
    depends_on: two
    prompt: "step three"
  - id: four
    depends_on: three
    prompt: "step four"
`;

const PICK = `name: pick
nodes:
  - id: ask
    to: auto:deepseek
    prompt: "pick a tab for this"
`;

let hub, browser, page;
const tabs = [];
const errors = [];

before(async () => {
  hub = await startHub({ flows: { steps: STEPS, pick: PICK } });
  const reply = (label) => (prompt) => ({ text: `${label}: ${prompt}`, delay: prompt.startsWith('step') ? 600 : 50 });
  // Long labels: the score table must still fit.
  for (const label of ['deepseek-research-tab-number-one', 'deepseek-research-tab-number-two', 'deepseek-research-tab-number-three']) {
    tabs.push(await simTab(hub, { label, site: 'deepseek', reply: reply(label) }));
  }
  tabs.push(await simTab(hub, { label: 'boss', site: 'kimi', role: 'master', reply: () => ({ text: 'ok' }) }));
  tabs.push(await simTab(hub, { label: 'lead', site: 'qianwen', reply: () => ({ text: 'ok' }) }));
  const lead = tabs[tabs.length - 1];
  await hub.api('POST', `/api/tabs/${lead.id}/role`, { role: 'foreman', group: 'g1' });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, locale: 'en-US' });
  page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  await page.goto(hub.login);
});

after(async () => {
  await browser?.close();
  for (const t of tabs) t.close();
  await hub?.close();
});

const ready = () => page.waitForFunction(() => window.__aicard && window.__aicard.ready);

async function go(hash) {
  await page.goto(`${hub.url}/${hash}`);
  await ready();
}

test('中文: "● live" and the role names are translated, in the top bar and the tabs page', async () => {
  await go('#/tabs');
  await page.waitForFunction(() => document.querySelector('#live')?.textContent === '● live');
  await page.click('#lang');
  await page.waitForFunction(() => document.querySelector('#lang')?.textContent === 'English');
  await ready();
  // The stream did not reconnect: the bar must still say it in Chinese.
  await page.waitForFunction(() => document.querySelector('#live')?.textContent === '● 实时', null, { timeout: 5000 });
  await page.waitForSelector('tr[data-tab]');
  // The role column (the third), by the tabs the test made.
  const roles = await page.$$eval('tr[data-tab]', (trs) => Object.fromEntries(trs.map((tr) => [tr.children[1].textContent, tr.children[2].textContent])));
  assert.deepEqual(roles, {
    'deepseek-research-tab-number-one': '工人', 'deepseek-research-tab-number-two': '工人', 'deepseek-research-tab-number-three': '工人',
    boss: '总指挥', lead: '包工头',
  });
  const options = await page.$eval('tr[data-tab] select[data-field="role"]', (s) => [...s.options].map((o) => [o.value, o.textContent]));
  assert.deepEqual(options, [['worker', '工人'], ['foreman', '包工头'], ['master', '总指挥']]);
  const text = await page.textContent('main');
  assert.doesNotMatch(text, /\b(master|foreman|worker)\b/, 'no English role name left');
  await page.click('#lang');
  await page.waitForFunction(() => document.querySelector('#live')?.textContent === '● live');
  await ready();
});

test('the Runs list\'s "Updated" moves with every journal event of a running run', async () => {
  await go('#/runs?kind=flows');
  const { run_id: id } = await hub.api('POST', '/api/runs', { flow: 'steps' });
  const row = `tr[data-run="${id}"]`;
  await page.waitForSelector(`${row} [data-state="running"]`, { timeout: 10000 });
  const first = await page.textContent(`${row} td:nth-child(5)`);
  // It must change while the run is still running (not only when it ends).
  await page.waitForFunction(({ row, first }) => {
    const tr = document.querySelector(row);
    return tr && tr.querySelector('td:nth-child(5)').textContent !== first
      && tr.querySelector('[data-state]').dataset.state === 'running';
  }, { row, first }, { timeout: 10000 });
  await page.waitForSelector(`${row} [data-state="completed"]`, { timeout: 20000 });
  // The hub's list says the same after the run: its last journal event.
  const detail = await hub.api('GET', `/api/runs/${id}`);
  const last = Math.max(...detail.journal.map((e) => e.at_ms));
  const listed = (await hub.api('GET', '/api/runs')).runs.find((r) => r.run_id === id);
  assert.ok(listed.updated_ms >= last, `updated ${listed.updated_ms}, last event ${last}`);
  await page.waitForFunction(({ row, last }) => Number(document.querySelector(`${row} td:nth-child(5)`).dataset.ms) >= last, { row, last });
});

async function chat(content) {
  const r = await fetch(`${hub.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${hub.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'site/deepseek', messages: [{ role: 'user', content }] }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  return r.json();
}

test('the Runs list shows flow runs by default; API & MCP calls and all behind a filter with counts, remembered', async () => {
  await chat('first api call');
  await chat('second api call');
  const all = (await hub.api('GET', '/api/runs')).runs;
  const calls = all.filter((r) => r.flow === 'api' || r.flow === 'mcp').length;
  const flows = all.length - calls;
  assert.equal(calls, 2);
  assert.ok(flows >= 1);
  await page.evaluate(() => localStorage.removeItem('aicard.runsKind'));
  await go('#/runs');
  const count = (k) => page.textContent(`.filter a[data-kind="${k}"] .count`);
  await page.waitForFunction((n) => document.querySelector('.filter a[data-kind="calls"] .count')?.textContent === String(n), calls);
  assert.equal(await count('flows'), String(flows));
  assert.equal(await count('all'), String(all.length));
  assert.equal(await page.getAttribute('.filter a.active', 'data-kind'), 'flows', 'flows by default');
  let shown = await page.$$eval('tr[data-run] td:nth-child(2)', (tds) => tds.map((td) => td.textContent));
  assert.equal(shown.length, flows);
  assert.ok(shown.every((f) => f !== 'api' && f !== 'mcp'), shown.join());
  await page.click('.filter a[data-kind="calls"]');
  await page.waitForFunction(() => document.querySelector('.runs-page')?.dataset.kind === 'calls');
  await ready();
  assert.match(page.url(), /#\/runs\?kind=calls$/);
  shown = await page.$$eval('tr[data-run] td:nth-child(2)', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(shown, ['api', 'api']);
  // Remembered: the plain #/runs shows the last choice.
  await go('#/runs');
  await page.waitForSelector('.runs-page[data-kind="calls"] tr[data-run]');
  assert.equal(await page.$$eval('tr[data-run]', (t) => t.length), calls);
  await page.click('.filter a[data-kind="all"]');
  await page.waitForFunction(() => document.querySelector('.runs-page')?.dataset.kind === 'all');
  await ready();
  assert.equal(await page.$$eval('tr[data-run]', (t) => t.length), all.length);
  // A new call counts at once, without a reload, in any view.
  await page.click('.filter a[data-kind="flows"]');
  await page.waitForFunction(() => document.querySelector('.runs-page')?.dataset.kind === 'flows');
  await ready();
  await chat('third api call');
  await page.waitForFunction((n) => document.querySelector('.filter a[data-kind="calls"] .count')?.textContent === String(n), calls + 1, { timeout: 10000 });
  assert.equal(await page.$$eval('tr[data-run]', (t) => t.length), flows);
});

test('the engine\'s score table is fully visible in the node panel', async () => {
  const { run_id: id } = await hub.api('POST', '/api/runs', { flow: 'pick' });
  await go(`#/runs/${id}`);
  await page.waitForFunction(() => document.querySelector('.run-page')?.dataset.status === 'completed', null, { timeout: 20000 });
  await page.click('#dag g.node[data-node="ask"]');
  await page.waitForSelector('#panel [data-panel-node="ask"] dd.why');
  // Whatever shows the scores, it must not hide a part of them: no cut, no hidden scroll.
  const m = await page.evaluate(() => {
    const panel = document.querySelector('#panel');
    const el = document.querySelector('#panel .why-scores table') || document.querySelector('#panel pre.why-table');
    const r = el.getBoundingClientRect(), p = panel.getBoundingClientRect();
    return {
      text: el.textContent, visible: r.width > 0 && r.height > 0,
      scrollWidth: el.scrollWidth, clientWidth: el.clientWidth,
      right: r.right, panelRight: p.right - (panel.offsetWidth - panel.clientWidth),
      panelScroll: panel.scrollWidth, panelClient: panel.clientWidth,
    };
  });
  assert.ok(m.visible);
  assert.ok(m.scrollWidth <= m.clientWidth + 1, `the table is cut: ${m.scrollWidth} px wide in ${m.clientWidth} px`);
  assert.ok(m.right <= m.panelRight + 1, `the table ends at ${m.right}, the panel at ${m.panelRight}`);
  assert.ok(m.panelScroll <= m.panelClient + 1, `the panel hides ${m.panelScroll - m.panelClient} px`);
  for (const label of ['deepseek-research-tab-number-one', 'deepseek-research-tab-number-two', 'deepseek-research-tab-number-three']) {
    assert.ok(m.text.includes(label), `${label} in ${m.text}`);
  }
  // Every column's heading is there, and the picked row is marked.
  const heads = await page.$$eval('#panel .why-scores th', (ths) => ths.map((th) => th.textContent));
  assert.deepEqual(heads, ['Tab', 'State', 'Success', 'First chunk', 's / 1k chars', 'In flight', 'Expected', 'Score']);
  assert.match(await page.textContent('#panel .why-scores tr.picked'), /^▶ deepseek-research-tab-number-/);
  assert.match(await page.textContent('#panel .why-pick'), /pick: deepseek-research-tab-number-/);
});

test('a tab that disconnects and comes back is one row; its offline rows do not pile up', async () => {
  await go('#/tabs');
  const ghostRow = (st) => `tr[data-tab]:has(td:text-is("ghost")) [data-status="${st}"]`;
  const rows = () => page.$$eval('tr[data-tab]', (trs) => trs.filter((tr) => tr.children[1].textContent === 'ghost')
    .map((tr) => tr.querySelector('[data-status]').dataset.status));
  let ghost = await simTab(hub, { label: 'ghost', site: 'doubao', reply: () => ({ text: 'boo' }) });
  await page.waitForSelector(ghostRow('idle'));
  for (let round = 0; round < 2; round++) {
    ghost.close();
    await page.waitForSelector(ghostRow('offline'), { timeout: 10000 });
    assert.deepEqual(await rows(), ['offline'], `round ${round}: one offline row`);
    const again = await simTab(hub, { label: 'ghost', site: 'doubao', reply: () => ({ text: 'boo' }) });
    assert.notEqual(again.id, ghost.id, 'a new connection, a new client id');
    ghost = again;
    await page.waitForSelector(ghostRow('idle'), { timeout: 10000 });
    assert.deepEqual(await rows(), ['idle'], `round ${round}: the live row replaced the offline one`);
  }
  const listed = (await hub.api('GET', '/api/tabs')).tabs.filter((x) => x.label === 'ghost');
  assert.equal(listed.length, 3, 'the hub still lists every connection; the page shows one');
  tabs.push(ghost);
});

/** Every symbol (not a letter, digit or CJK character) in the page's text, SVG included. */
function symbolsOnPage() {
  return page.evaluate(() => {
    const out = new Set();
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) {
      for (const ch of walk.currentNode.textContent) {
        const c = ch.codePointAt(0);
        if (c < 0x2000 || /[\p{L}\p{N}\s]/u.test(ch)) continue;
        if ((c >= 0x3000 && c <= 0x9fff) || (c >= 0xff00 && c <= 0xffef)) continue; // CJK and its punctuation
        out.add(ch);
      }
    }
    return [...out];
  });
}

test('every symbol the pages show has a glyph in the page\'s fonts; pause is drawn', async () => {
  const seen = new Set();
  const { run_id: id } = await hub.api('POST', '/api/runs', { flow: 'steps' });
  for (const hash of ['#/tabs', '#/runs?kind=all', `#/runs/${id}`, '#/flows', '#/plans', '#/agents']) {
    await go(hash);
    for (const ch of await symbolsOnPage()) seen.add(ch);
  }
  // And every symbol the bundle could show (icons of states no page shows now, links, …).
  const bundle = await (await fetch(`${hub.url}/assets/app.js`)).text();
  for (const ch of bundle) {
    const c = ch.codePointAt(0);
    if (c < 0x2000 || /[\p{L}\p{N}\s]/u.test(ch) || (c >= 0x3000 && c <= 0x9fff) || (c >= 0xff00 && c <= 0xffef)) continue;
    seen.add(ch);
  }
  const missing = await page.evaluate((chars) => {
    const c = document.createElement('canvas'); c.width = 48; c.height = 48;
    const g = c.getContext('2d', { willReadFrequently: true });
    const font = getComputedStyle(document.body).fontFamily;
    const draw = (ch) => { g.clearRect(0, 0, 48, 48); g.font = `32px ${font}`; g.fillText(ch, 4, 36); return g.getImageData(0, 0, 48, 48).data.join(','); };
    const blank = draw(' ');
    const tofu = ['\u0378', '\u{10FFFD}'].map(draw); // unassigned: what a missing glyph looks like
    return chars.filter((ch) => { const d = draw(ch); return d === blank || tofu.includes(d); });
  }, [...seen]);
  console.log(`symbols checked: ${[...seen].join(' ')}`);
  assert.deepEqual(missing, [], `no glyph for ${missing.join(' ')}`);
  // The run page's Pause button and the legend carry the pause sign: drawn, not a glyph.
  await go(`#/runs/${id}`);
  const bars = await page.$eval('#pause .i-pause', (el) => { const r = el.getBoundingClientRect(); return [r.width, r.height]; });
  assert.ok(bars[0] > 4 && bars[1] > 4, `the pause sign is drawn: ${bars}`);
  assert.ok(await page.$('.legend [data-state="paused"] .i-pause'));
  assert.ok(!seen.has('⏸'), 'no ⏸ glyph');
  await hub.api('POST', `/api/runs/${id}/stop`, {});
});

test('zero page errors', () => {
  assert.deepEqual(errors, []);
});

test('the tabs page shows each site\'s quota and its use (issue 27: ?<tabs budget SITE N/hour>!)', async () => {
  const set = await tabs[3].command('?<tabs budget deepseek 3/hour>!');
  assert.equal(set.result.success, true, JSON.stringify(set));
  const asked = await tabs[3].command('?<to deepseek-research-tab-number-one: quota check>!');
  assert.equal(asked.result.success, true, JSON.stringify(asked));
  await go('#/tabs');
  await page.waitForSelector('[data-quotas] li[data-site="deepseek"]');
  const line = await page.textContent('[data-quotas] li[data-site="deepseek"]');
  assert.match(line, /^deepseek: 1\/3 \(3\/hour, tabs budget\)/);
  const off = await tabs[3].command('?<tabs budget deepseek off>!');
  assert.equal(off.result.success, true, JSON.stringify(off));
});
