// Plan drafts, tab states and the engine's "why" in Chromium against the real hub: a planner
// tab (simulated) writes two drafts for a master's `?<manager plan …>!`; on the dashboard one
// is edited (live diagnostics), saved as a new draft, approved and its run watched to the
// end, its node panel showing why the decision engine chose the tab; the other is rejected.
// Tabs that report a captcha and a rate limit show as parked and cooling. Zero page errors.
// Screenshots go to docs/dashboard/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startHub, simTab, REPO } from './hub.js';

const SHOTS = join(REPO, 'docs', 'dashboard');
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const ZEBRA = `name: zebra-review
description: review a document, then sum the review up
inputs:
  doc: {default: "an essay"}
nodes:
  - id: review
    name: 评审
    to: auto:deepseek
    prompt: "Review: {{ doc }}"
  - id: summary
    depends_on: review
    to: auto:deepseek
    prompt: "Summarise: {{ nodes.review.output }}"
`;

const YAK = `name: yak-poem
nodes:
  - id: poem
    to: auto:deepseek
    prompt: "Write a poem about yaks"
`;

const fenced = (yaml) => ({ text: `Here is the flow.\n\`\`\`yaml\n${yaml}\`\`\`\n`, delay: 10 });

let hub, browser, page, master;
const tabs = [];
const errors = [];
const deepPrompts = [];
let zebraId, yakId;

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  hub = await startHub({ args: ['--planner', 'planner'] });
  tabs.push(await simTab(hub, {
    label: 'planner', site: 'kimi',
    reply: (p) => (p.includes('zebra-goal') ? fenced(ZEBRA) : p.includes('yak-goal') ? fenced(YAK) : { text: 'no plan' }),
  }));
  tabs.push(await simTab(hub, {
    label: 'w-deep', site: 'deepseek',
    reply: (p) => { deepPrompts.push(p); return { text: `w-deep: ${p.slice(0, 60)}`, delay: 200 }; },
  }));
  tabs.push(await simTab(hub, { label: 'w-captcha', site: 'doubao', reply: () => ({ fail: 'a captcha is shown', trouble: 'captcha' }) }));
  tabs.push(await simTab(hub, { label: 'w-429', site: 'qianwen', reply: () => ({ fail: 'rate limited (HTTP 429)', trouble: 'rate_limited' }) }));
  tabs.push(await simTab(hub, { label: 'w-slow', site: 'chatglm', reply: () => ({ text: 'slowly', delay: 5000 }) }));
  master = await simTab(hub, { label: 'boss', site: 'chatgpt', role: 'master', reply: () => ({ text: 'ok' }) });
  tabs.push(master);
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
const draftId = (r) => {
  const m = /plan-[0-9a-f]{8}/.exec(r.result?.output || '');
  assert.ok(m, JSON.stringify(r));
  return m[0];
};

test('the planner tab writes two drafts; the plans page lists them', async () => {
  zebraId = draftId(await master.command('?<manager plan zebra-goal: review my essay>!'));
  yakId = draftId(await master.command('?<manager plan yak-goal: a poem>!'));
  await page.goto(`${hub.url}/#/plans`);
  await ready();
  await page.waitForSelector(`tr[data-plan="${zebraId}"]`);
  const rows = await page.$$eval('tr[data-plan]', (trs) => trs.map((tr) => tr.textContent));
  assert.equal(rows.length, 2);
  assert.ok(rows.every((r) => /✎ draft/.test(r) && r.includes('planner')), rows.join('\n'));
  await page.screenshot({ path: join(SHOTS, 'plans.png'), fullPage: true });
});

test('a draft is edited with live diagnostics, saved as a new draft, approved, and its run starts', async () => {
  await page.click(`tr[data-plan="${zebraId}"] a`);
  await ready();
  await page.waitForSelector('#plan-dag svg g.node[data-node="summary"]');
  assert.match(await page.textContent('#plan-yaml'), /to: auto:deepseek/);
  assert.ok(await page.$('#plan-approve'));
  await page.click('#plan-edit-open');
  await page.waitForSelector('#plan-editor:not([hidden])');
  await page.fill('#plan-editor', ZEBRA.replace('    prompt: "Review: {{ doc }}"', '    promtp: "Review: {{ doc }}"'));
  await page.waitForFunction(() => document.querySelector('#plan-verdict').classList.contains('bad'));
  assert.match(await page.textContent('#plan-diags li'), /^9:5 .*unknown field `promtp`, did you mean `prompt`\?/);
  await page.screenshot({ path: join(SHOTS, 'plan-edit.png'), fullPage: true });
  await page.fill('#plan-editor', ZEBRA.replace('Review: {{ doc }}', 'Review carefully: {{ doc }}'));
  await page.waitForFunction(() => document.querySelector('#plan-verdict').classList.contains('ok'));
  await page.click('#plan-save');
  await page.waitForFunction((old) => /^#\/plans\/plan-/.test(location.hash) && !location.hash.endsWith(old), zebraId);
  await ready();
  const newId = decodeURIComponent(new URL(page.url()).hash.slice('#/plans/'.length));
  await page.waitForSelector('#plan-dag svg g.node[data-node="review"]');
  assert.match(await page.textContent('.plan-page .meta'), new RegExp(`Modifies: ${zebraId}`));
  assert.match(await page.textContent('#plan-yaml'), /Review carefully/);
  assert.equal((await hub.api('GET', `/api/plans/${zebraId}`)).state, 'modified');
  await page.fill('#plan-inputs input[name="doc"]', 'the dashboard essay');
  await page.screenshot({ path: join(SHOTS, 'plan.png'), fullPage: true });
  assert.equal(deepPrompts.length, 0, 'nothing is sent before approval');
  await page.click('#plan-approve');
  await page.waitForURL(/#\/runs\/zebra-review-/);
  await ready();
  await page.waitForSelector('#dag g.node[data-node="review"]');
  await page.waitForFunction(() => document.querySelector('.run-page')?.dataset.status === 'completed', null, { timeout: 20000 });
  assert.equal(deepPrompts[0], 'Review carefully: the dashboard essay');
  const approved = await hub.api('GET', `/api/plans/${newId}`);
  assert.equal(approved.state, 'approved');
  assert.ok(page.url().endsWith(encodeURIComponent(approved.run_id)), page.url());

  // The node panel: the chosen tab and the decision engine's reason, with its score table.
  await page.click('#dag g.node[data-node="review"]');
  await page.waitForSelector('#panel [data-panel-node="review"] dd.why');
  const why = await page.textContent('#panel dd.why');
  assert.match(why, /decision engine: `w-deep`: .*(exploring a new tab|lowest score)/, why);
  const table = await page.textContent('#panel pre.why-table');
  assert.match(table, /▶ w-deep/, table);
  assert.match(table, /pick: w-deep/, table);
  await page.screenshot({ path: join(SHOTS, 'run-why.png'), fullPage: true });
});

test('another draft is rejected; nothing runs', async () => {
  await page.goto(`${hub.url}/#/plans/${yakId}`);
  await ready();
  await page.waitForSelector('#plan-dag svg g.node[data-node="poem"]');
  await page.click('#plan-reject');
  await page.waitForSelector('.plan-page h2 [data-state="rejected"]');
  assert.equal(await page.$('#plan-approve'), null, 'no answer buttons on a decided draft');
  const d = await hub.api('GET', `/api/plans/${yakId}`);
  assert.equal(d.state, 'rejected');
  assert.equal(d.run_id, null);
  assert.ok(!deepPrompts.some((p) => p.includes('yaks')));
  await page.goto(`${hub.url}/#/plans`);
  await ready();
  await page.waitForSelector(`tr[data-plan="${yakId}"] [data-state="rejected"]`);
  const states = await page.$$eval('tr[data-plan] [data-state]', (b) => b.map((x) => x.dataset.state).sort());
  assert.deepEqual(states, ['approved', 'modified', 'rejected']);
});

test('tabs that report a captcha or a rate limit show as parked and cooling; a busy tab as busy', async () => {
  const cap = await master.command('?<to w-captcha: hello>!');
  assert.equal(cap.result.success, false, JSON.stringify(cap));
  const limited = await master.command('?<to w-429: hello>!');
  assert.equal(limited.result.success, false, JSON.stringify(limited));
  master.send({ type: 'user_input', text: '?<to w-slow: take your time>!' });
  await page.goto(`${hub.url}/#/tabs`);
  await ready();
  const cell = (label, st) => `tr[data-tab]:has(td:text-is("${label}")) [data-status="${st}"]`;
  await page.waitForSelector(cell('w-captcha', 'parked'));
  await page.waitForSelector(cell('w-429', 'cooling'));
  await page.waitForSelector(cell('w-slow', 'busy'), { timeout: 10000 });
  await page.waitForSelector(cell('w-deep', 'idle'));
  assert.match(await page.textContent(cell('w-captcha', 'parked')), /⚑ parked · captcha/);
  assert.match(await page.textContent(cell('w-429', 'cooling')), /❄ cooling · \d+ s left/);
  const deep = await page.textContent('tr[data-tab]:has(td:text-is("w-deep")) td.engine');
  assert.match(deep, /Success 2\/2 \(\d+%\)/, deep);
  await page.screenshot({ path: join(SHOTS, 'tabs-states.png'), fullPage: true });
  await page.click('#lang');
  await ready();
  await page.waitForSelector(cell('w-captcha', 'parked'));
  assert.match(await page.textContent(cell('w-captcha', 'parked')), /⚑ 已暂停/);
  await page.click('#lang');
  await ready();
});

test('zero page errors', () => {
  assert.deepEqual(errors, []);
});
