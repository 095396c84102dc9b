// A `manager plan` draft opened in the flow designer for approval: the draft page links to
// it; edited in the graph, its Approve saves the edit as a new draft (the old one becomes
// modified), approves that one, and the run it starts completes. Nothing ran before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { startHub, simTab } from './hub.js';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const YAK = `name: yak-poem
nodes:
  - id: poem
    to: auto:deepseek
    prompt: "Write a poem about yaks"
`;

let hub, browser, page, master;
const tabs = [];
const prompts = [];

before(async () => {
  hub = await startHub({ args: ['--planner', 'planner'] });
  tabs.push(await simTab(hub, {
    label: 'planner', site: 'kimi',
    reply: (p) => (p.includes('yak-goal') ? { text: `Here it is.\n\`\`\`yaml\n${YAK}\`\`\`\n`, delay: 10 } : { text: 'no plan' }),
  }));
  tabs.push(await simTab(hub, { label: 'w-deep', site: 'deepseek', reply: (p) => { prompts.push(p); return { text: `ok: ${p}`, delay: 50 }; } }));
  master = await simTab(hub, { label: 'boss', site: 'chatgpt', role: 'master', reply: () => ({ text: 'ok' }) });
  tabs.push(master);
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
  page = await (await browser.newContext({ viewport: { width: 1360, height: 900 }, locale: 'en-US' })).newPage();
  await page.goto(hub.login);
  await page.evaluate(() => localStorage.setItem('aicard.lang', 'en'));
});

after(async () => {
  await browser?.close();
  for (const t of tabs) t.close();
  await hub?.close();
});

test('a plan draft opens in the designer; an edited draft is approved as a new draft and runs', async () => {
  const r = await master.command('?<manager plan yak-goal: a poem>!');
  const id = /plan-[0-9a-f]{8}/.exec(r.result?.output || '')[0];
  await page.goto(`${hub.url}/#/plans/${id}`);
  await page.getByRole('link', { name: 'Open in the designer' }).click();
  const poem = page.getByRole('group', { name: 'poem', exact: true });
  await poem.waitFor();
  assert.equal(prompts.length, 0, 'nothing sent before approval');
  await poem.click();
  await page.getByRole('textbox', { name: 'prompt', exact: true }).fill('Write a haiku about yaks');
  await page.waitForFunction(() => window.__aicard.designer.text().includes('prompt: Write a haiku about yaks'));
  await page.waitForFunction(() => document.querySelector('#verdict')?.classList.contains('ok'));
  await page.getByRole('button', { name: '批准并运行 Approve and run', exact: true }).click();
  await page.waitForURL(/#\/runs\//);
  await page.waitForFunction(() => document.querySelector('.run-page')?.dataset.status === 'completed', null, { timeout: 20000 });
  assert.deepEqual(prompts.map((p) => p.includes('haiku')), [true], prompts.join('\n'));
  const old = await hub.api('GET', `/api/plans/${id}`);
  assert.equal(old.state, 'modified');
});
