// The skills page in Chromium against the real hub (docs/memory-and-skills.md): a person logged
// in to the dashboard writes a program skill, saves it (it waits to be enabled: a master tab's
// call is refused), reads its hash and enables it (the same call now runs it with its JSON on
// stdin). The hub token that tabs hold, and the session cookie without its CSRF token, save
// and enable nothing. Zero page errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { mkdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startHub, simTab } from './hub.js';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let hub, browser, page, master, skillsDir;
const errors = [];

before(async () => {
  // The skills directory is made before the hub starts, so its watcher sees it.
  const base = join(process.env.TMPDIR || '/tmp', `aicard-skills-${process.pid}-${Date.now()}`);
  skillsDir = join(base, 'skills');
  mkdirSync(skillsDir, { recursive: true });
  hub = await startHub({ args: ['--skills', skillsDir, '--exec', 'allowlist', '--allow', 'skill:shout'] });
  master = await simTab(hub, { label: 'boss', site: 'deepseek', role: 'master', reply: () => ({ text: 'ok' }) });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS });
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, locale: 'en-US' });
  page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`console: ${m.text()}`); });
  await page.goto(hub.login);
});

after(async () => {
  await browser?.close();
  master?.close();
  await hub?.close();
});

const ready = () => page.waitForFunction(() => window.__aicard && window.__aicard.ready);

const SOURCE = `# name: shout
# description: upper-cases a text
# param text: string, required — the text
# returns: text
import json, sys
print(json.load(sys.stdin)["text"].upper())
`;

test('the dashboard saves and enables a program skill; the token and a cookie without CSRF cannot', async () => {
  await page.goto(`${hub.url}/#/skills`);
  await ready();
  assert.equal(await page.textContent('nav a[data-nav="skills"]'), 'Skills');
  await page.fill('#new-skill-name', 'shout');
  await page.selectOption('#new-skill-ext', 'py');
  await page.click('form.new-skill button[type="submit"]');
  await page.fill('#skill-source', SOURCE);
  await page.click('#skill-save');
  await page.waitForSelector('tr[data-skill="shout"][data-kind="python"][data-enabled="false"]');
  assert.ok(existsSync(join(skillsDir, 'shout.py')));
  await page.waitForSelector('#skill-sha');
  const sha = await page.textContent('#skill-sha');
  assert.match(sha, /^[0-9a-f]{64}$/);

  // Saved but not enabled: a call from a tab is refused.
  let r = await master.command('?<skill shout text=hi>!');
  assert.equal(r.result.success, false, JSON.stringify(r));
  assert.match(r.result.output, /waits to be enabled/);

  // The bearer token every tab holds saves and enables nothing.
  const asToken = await fetch(`${hub.url}/api/skills/shout/enable`, {
    method: 'POST', headers: { Authorization: `Bearer ${hub.token}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ sha256: sha }),
  });
  assert.equal(asToken.status, 403);
  const saveAsToken = await fetch(`${hub.url}/api/skills/shout`, {
    method: 'PUT', headers: { Authorization: `Bearer ${hub.token}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ source: 'echo pwned' }),
  });
  assert.equal(saveAsToken.status, 403);
  // The page's own session cookie, same origin, but without the CSRF token: refused too.
  const noCsrf = await page.evaluate(async (s) => (await fetch('/api/skills/shout/enable', {
    method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ sha256: s }),
  })).status, sha);
  assert.equal(noCsrf, 403);
  r = await master.command('?<skill shout text=hi>!');
  assert.match(r.result.output, /waits to be enabled/);

  // The person's Enable: the same call runs, its parameters as JSON on stdin.
  await page.click('#skill-enable');
  await page.waitForSelector('tr[data-skill="shout"][data-enabled="true"]');
  r = await master.command('?<skill shout text=hi>!');
  assert.equal(r.result.success, true, JSON.stringify(r));
  assert.equal(r.result.output, 'HI');

  // Edited and saved again: new bytes, disabled until enabled again.
  // Edit reads the file anew and replaces the open editor: wait for the new one before typing,
  // or the text goes into the editor that is about to go.
  await page.$eval('#skill-source', (el) => { el.dataset.stale = '1'; });
  await page.click('button[data-edit="shout"]');
  await page.waitForSelector('#skill-source:not([data-stale])');
  await page.fill('#skill-source', SOURCE.replace('.upper()', '.upper() + "!"'));
  await page.click('#skill-save');
  await page.waitForSelector('tr[data-skill="shout"][data-enabled="false"]');
  r = await master.command('?<skill shout text=hi>!');
  assert.match(r.result.output, /waits to be enabled/);
  await page.waitForFunction(() => !document.querySelector('#skill-enable').disabled);
  await page.click('#skill-enable');
  await page.waitForSelector('tr[data-skill="shout"][data-enabled="true"]');
  r = await master.command('?<skill shout text=hi>!');
  assert.equal(r.result.output, 'HI!');
  assert.deepEqual(errors, []);
});
