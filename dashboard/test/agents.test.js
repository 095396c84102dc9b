// The Agents page in Chromium against the real hub (issue 30): a simulated master tab turns
// the loop on and writes a turn holding a command; the page lists the session (round 1 of
// 25), its detail shows the round's command with ✓/✗ and output, and the page's Stop ends the
// session: the tab hears `flow_event` ended, the row says why. Zero page errors. Screenshots
// go to docs/dashboard/ (agents.png, agent-session.png).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startHub, simTab, REPO } from './hub.js';

const SHOTS = join(REPO, 'docs', 'dashboard');

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let hub, browser, page, master;
const errors = [];
const frames = [];
const waiters = [];

/** The next frame of the master tab that `pred` accepts (seen already or to come), 10 s. */
function frame(pred) {
  const seen = frames.find(pred);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no such frame; got ${JSON.stringify(frames.map((f) => f.type))}`)), 10000);
    waiters.push({ pred, done: (v) => { clearTimeout(timer); resolve(v); } });
  });
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  hub = await startHub({ args: ['--agent-gap', '0-0'] });
  master = await simTab(hub, { label: 'boss', site: 'deepseek', role: 'master', reply: () => ({ text: 'ok' }) });
  master.ws.on('message', (raw) => {
    const v = JSON.parse(String(raw));
    frames.push(v);
    for (const w of [...waiters]) if (w.pred(v)) { waiters.splice(waiters.indexOf(w), 1); w.done(v); }
  });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, locale: 'en-US' });
  page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  await page.goto(hub.login);
});

after(async () => {
  await browser?.close();
  master?.close();
  await hub?.close();
});

const ready = () => page.waitForFunction(() => window.__aicard && window.__aicard.ready);

test('a looping master\'s session and its round are listed, and Stop on the page ends it', async () => {
  const on = await master.command('?<agent loop on>!');
  assert.equal(on.result.success, true, JSON.stringify(on));
  const text = '先看看技能 ?<skill list>! 然后继续';
  master.send({ type: 'chunk', turn_id: 't1', seq: 0, text });
  master.send({ type: 'turn_end', turn_id: 't1', text });
  const d = await frame((v) => v.type === 'deliver' && v.agent);
  assert.equal(d.agent.round, 1, JSON.stringify(d));

  await page.goto(`${hub.url}/#/agents`);
  await ready();
  assert.equal(await page.textContent('nav a[data-nav="agents"]'), 'Agents');
  const row = 'tr[data-session][data-state="running"]';
  await page.waitForSelector(row);
  const rowText = await page.textContent(row);
  assert.match(rowText, /1 of 25/);
  assert.match(rowText, /looping tab/);
  const id = await page.getAttribute(row, 'data-session');
  await page.screenshot({ path: join(SHOTS, 'agents.png'), fullPage: true });

  // Its rounds: the command, ✓ or ✗, its output.
  await page.click(`${row} a`);
  await ready();
  await page.waitForSelector('li[data-round="1"] .round-cmd');
  assert.match(await page.textContent('li[data-round="1"]'), /[✓✗] skill list/);
  await page.screenshot({ path: join(SHOTS, 'agent-session.png'), fullPage: true });
  await page.click('a[href="#/agents"]');
  await ready();

  // Stop on the page: the tab hears the end within a second, the row says why.
  await page.waitForSelector(`tr[data-session="${id}"] button[data-action="stop"]`);
  const t0 = Date.now();
  await page.click(`tr[data-session="${id}"] button[data-action="stop"]`);
  const end = await frame((v) => v.type === 'flow_event' && v.detail?.kind === 'agent' && v.state === 'ended');
  assert.ok(Date.now() - t0 < 1000, `${Date.now() - t0} ms`);
  assert.match(end.detail.why, /stopped/);
  await page.waitForSelector(`tr[data-session="${id}"][data-state="ended"]`);
  assert.match(await page.textContent(`tr[data-session="${id}"] .why`), /stopped/);
  assert.equal(await page.$(`tr[data-session="${id}"] button[data-action="stop"]`), null);

  // 中文: the same page in the other language.
  await page.click('#lang');
  await ready();
  assert.equal(await page.textContent('nav a[data-nav="agents"]'), '代理');
  await page.waitForSelector(`tr[data-session="${id}"]`);
  assert.match(await page.textContent(`tr[data-session="${id}"]`), /已结束/);
  assert.deepEqual(errors, []);
});
