// A site that changes never gives a silent empty answer (docs/reliability.md, issue 28), in the browser against
// the real hub. The mock sites drift the three ways real sites do (mock/sites/lib/drift.js): (a) the
// text field renamed, (b) the endpoint moved, (c) plain JSON instead of the stream. A hub task is
// asked through the OpenAI-compatible API of each tab; each drift must end in the exact answer with
// the path it took recorded (`turn_end.source`), or in a failure naming the adapter — never in 200
// with empty content. The reply is a structured one (lists, line breaks, a code block), so the page
// path must keep its structure. Every site runs in one world; two sites run in every world.
// The table site × drift → answer, path, time is printed as diagnostics.
//   node --test --test-reporter=spec test/worlds/drift.test.js
// AICARD_WORLDS=scriptcat-chromium-main,… picks the worlds of the second part.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { startMockServer } from '../../mock/server.js';
import { canDrift } from '../../mock/sites/lib/drift.js';
import { servedUserscript } from '../browser/harness.js';
import { loadAdapters } from '../browser/fixtures.js';
import { ensureHubBinary, startRealHub, startRecordingProxy } from '../browser/real-hub.js';
import { launchChromium } from './chromium.js';
import { launchFirefox } from './firefox.js';

const chromiumWith = (manager, world) => (o) => launchChromium({ ...o, world, manager });
const firefoxWith = (manager) => (o) => launchFirefox({ ...o, manager });
/** The worlds of the browser matrix (matrix.test.js), one Local Network Access state each. */
const WORLDS = [
  { id: 'scriptcat-chromium-main', lna: 'granted', launch: chromiumWith('scriptcat', 'MAIN') },
  { id: 'violentmonkey-chromium-page', lna: 'denied', launch: chromiumWith('violentmonkey', 'MAIN') },
  { id: 'violentmonkey-chromium-content', lna: 'granted', launch: chromiumWith('violentmonkey', 'USER_SCRIPT') },
  { id: 'tampermonkey-chromium-main', lna: 'denied', launch: chromiumWith('tampermonkey', 'MAIN') },
  { id: 'violentmonkey-firefox-auto', lna: undefined, launch: firefoxWith('violentmonkey') },
  { id: 'violentmonkey-firefox-content', lna: undefined, launch: firefoxWith('violentmonkey-content') },
  { id: 'tampermonkey-firefox', lna: undefined, launch: firefoxWith('tampermonkey') },
];
const FULL_SITES = ['deepseek', 'qianwen'];
const picked = (process.env.AICARD_WORLDS || '').split(',').filter(Boolean);

const ANSWER = [
  'Steps 步骤:',
  'read first',
  'then write 然后写',
  '',
  '1. Open the file 打开文件',
  '2. Run `make check` now',
  '',
  '- fast 快',
  '- safe',
  '',
  '```js',
  'const x = [1, 2];',
  'console.log(x);',
  '```',
  '',
  'Done ✅',
].join('\n');

const unavailable = ensureHubBinary();
let mock; let hub; let proxy; let adapters;
const table = [];

before(async () => {
  if (unavailable) return;
  mock = await startMockServer();
  hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`) });
  proxy = await startRecordingProxy(hub.url);
  adapters = await loadAdapters();
});
after(async () => {
  await proxy?.close();
  await hub?.close();
  await mock?.close();
});

const panelState = () => {
  const p = document.querySelector('aicard-panel');
  return p ? { ...p.dataset } : null;
};

async function until(read, ok, { timeoutMs, what }) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await read();
    if (ok(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(last)?.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A tab of `site` (drifted endpoint or not), connected to the hub. */
async function openSiteTab(browser, site, label, { moved = false, debug = false } = {}) {
  const host = mock.sites.find((s) => s.name === site).hosts[0];
  const tab = await browser.openTab({ host, path: moved ? '/?mock_drift=endpoint' : '/', values: { label, ...(debug ? { debug: true } : {}) } });
  await until(() => tab.evaluate(panelState), (p) => p?.state === 'open', { timeoutMs: 30000, what: `${label} connected` });
  return tab;
}

/** Asks the tab labelled `label` through the API; returns the outcome with its path and time. */
async function ask(label, prompt) {
  const started = Date.now();
  const res = await fetch(`${hub.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${hub.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: `tab/${label}`, messages: [{ role: 'user', content: prompt }] }),
  });
  const body = await res.json();
  const ms = Date.now() - started;
  const task = proxy.frames.find((f) => f.dir === 'down' && f.frame?.type === 'task' && f.frame.prompt?.includes(prompt));
  const id = task?.frame.task_id;
  const end = proxy.frames.find((f) => f.dir === 'up' && f.frame?.type === 'turn_end' && id && f.frame.task_id === id);
  const failed = proxy.frames.find((f) => f.dir === 'up' && f.frame?.type === 'task_update' && id && f.frame.task_id === id && f.frame.state === 'failed');
  return { status: res.status, content: body.choices?.[0]?.message?.content, error: body.error, ms, source: end?.frame.source, end: end?.frame, failed: failed?.frame };
}

/** One drift on one site: the answer with its path, or a failure naming the adapter; never empty. */
async function runDrift(site, drift, tab, label, world) {
  const prompt = `drift ${drift} on ${site} in ${world} ${Math.random().toString(36).slice(2, 8)}`;
  mock.next(site, drift === 'endpoint' ? { answer: ANSWER } : { answer: ANSWER, drift });
  const out = await ask(label, prompt);
  table.push({ world, site, drift, status: out.status, answer: out.content === ANSWER ? 'exact' : JSON.stringify(out.content ?? out.error?.message)?.slice(0, 60), path: out.source || (out.failed ? `failed: ${out.failed.trouble}` : '-'), ms: out.ms });
  assert.notEqual(out.status === 200 && !out.content, true, `${site} × ${drift}: never 200 with empty content`);
  if (out.status === 200) {
    assert.equal(out.content, ANSWER, `${site} × ${drift}: the exact answer, structure kept`);
    assert.ok(['network', 'dom'].includes(out.source), `${site} × ${drift}: the path is recorded (${JSON.stringify(out.end)})`);
    // Only a growing-field fallback or a mirror answers a drift from the network; the rest read the page.
    if (drift !== 'field') assert.equal(out.source, 'dom', `${site} × ${drift}: read from the page`);
  } else {
    assert.equal(out.failed?.trouble, 'parser_miss', `${site} × ${drift}: a clear failure (${JSON.stringify(out)})`);
    assert.match(out.failed.error, new RegExp(`${site} adapter`));
  }
  if (drift === 'endpoint') assert.ok(out.ms < 8000, `${site}: the page is read soon after the send, not after 8 s (${out.ms} ms)`);
  return out;
}

/** The three drifts on `site` in `browser`: (a) and (c) in a normal tab, (b) in a moved-endpoint tab. */
async function driftsOn(browser, site, world) {
  const tag = `${site}-${world}`;
  // In the first world the panel's text is read too (debug mode's data-describe on the panel).
  const debug = world === WORLDS[0].id;
  const normal = await openSiteTab(browser, site, `${tag}-n`, { debug });
  try {
    for (const drift of ['field', 'json']) {
      if (!canDrift(site, drift)) { table.push({ world, site, drift, answer: 'n/a (no text field to rename)', path: '-', ms: 0 }); continue; }
      await runDrift(site, drift, normal, `${tag}-n`, world);
      if (drift === 'json' && debug) {
        const text = await normal.evaluate(() => JSON.parse(document.querySelector('aicard-panel')?.getAttribute('data-describe') || 'null').text);
        assert.match(text, /网络解析失败，改读页面 \/ parser found no answer, read the page/, `${site}: the panel says the parser missed (${text})`);
        assert.equal((await normal.evaluate(panelState)).capture, 'dom', `${site}: the panel says the reply came from the page`);
      }
    }
  } finally {
    await normal.close().catch(() => {});
  }
  const moved = await openSiteTab(browser, site, `${tag}-e`, { moved: true });
  try {
    await runDrift(site, 'endpoint', moved, `${tag}-e`, world);
  } finally {
    await moved.close().catch(() => {});
  }
}

function printTable(t, rows) {
  t.diagnostic('world | site | drift | answer | path | ms');
  for (const r of rows) t.diagnostic(`${r.world} | ${r.site} | ${r.drift} | ${r.answer} | ${r.path} | ${r.ms}`);
}

test('every site in one world (ScriptCat, Chromium MAIN): the three drifts end in the answer with its path, never empty', async (t) => {
  if (unavailable) { t.skip(unavailable); return; }
  const world = WORLDS[0];
  const browser = await world.launch({ mock, lna: world.lna, userscript: servedUserscript(proxy.url, hub.token) });
  try {
    for (const site of mock.sites.map((s) => s.name).filter((s) => s !== 'sim' && adapters.has(s))) {
      await driftsOn(browser, site, world.id);
    }
    // The person's own turn on a moved endpoint reaches the hub too, read from the page.
    const tab = await openSiteTab(browser, 'deepseek', 'person-e', { moved: true });
    try {
      mock.next('deepseek', { answer: ANSWER });
      const ds = adapters.get('deepseek');
      const from = proxy.frames.length;
      await tab.typeAndSend(ds.input.selectors, ds.send.selectors, 'typed by the person 我自己发的', ds.send.key);
      const end = await until(() => proxy.frames.slice(from).find((f) => f.dir === 'up' && f.frame?.type === 'turn_end'),
        Boolean, { timeoutMs: 15000, what: "the person's reply as a turn_end" });
      assert.equal(end.frame.text, ANSWER);
      assert.equal(end.frame.source, 'dom');
      assert.equal(end.frame.task_id, undefined, "the person's own turn, no task");
      // The hub flags the adapter whose answers came by page text, where tab health is shown.
      const models = await (await fetch(`${hub.url}/v1/models`, { headers: { authorization: `Bearer ${hub.token}` } })).json();
      const site = models.data.find((m) => m.id === 'site/deepseek');
      assert.match(site?.aicard?.answers?.flag || '', /^deepseek: \d+\/\d+ replies via page text — adapter outdated/, JSON.stringify(site));
      const own = models.data.find((m) => m.id === 'tab/person-e');
      assert.equal(own?.aicard?.health?.answers?.tab?.dom, 1, `the tab counts its page-read answer: ${JSON.stringify(own)}`);
    } finally {
      await tab.close().catch(() => {});
    }
  } finally {
    await browser.close();
    printTable(t, table.filter((r) => r.world === world.id));
  }
  const metrics = await (await fetch(`${hub.url}/metrics`, { headers: { authorization: `Bearer ${hub.token}` } })).text();
  t.diagnostic(`metrics: ${metrics.split('\n').filter((l) => l.startsWith('aicard_site_adapter_outdated')).join(' ; ')}`);
  assert.match(metrics, /aicard_site_answers_total\{site="deepseek",path="dom"\} [1-9]/);
  assert.match(metrics, /aicard_site_adapter_outdated\{site="deepseek"\} 1/);
});

// The first world ran every site above.
for (const world of WORLDS.slice(1)) {
  if (picked.length && !picked.includes(world.id)) continue;
  describe(world.id, () => {
    test(`${world.id}: ${FULL_SITES.join(' and ')} through the three drifts`, async (t) => {
      if (unavailable) { t.skip(unavailable); return; }
      const browser = await world.launch({ mock, lna: world.lna, userscript: servedUserscript(proxy.url, hub.token) });
      try {
        for (const site of FULL_SITES) await driftsOn(browser, site, world.id);
      } finally {
        await browser.close();
        printTable(t, table.filter((r) => r.world === world.id));
      }
    });
  });
}
