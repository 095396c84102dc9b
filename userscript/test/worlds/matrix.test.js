// The browser matrix (docs/userscript.md): the userscript run as each real manager runs it, in the browsers
// that manager supports (issue 29) — ScriptCat (Chromium, MAIN world), Violentmonkey (Chromium page
// and content modes; Firefox `auto`, i.e. page mode with its own fall-back to the content sandbox
// where the page's CSP refuses page scripts, and content mode), Tampermonkey (Chromium raw; Firefox
// raw with its USERSCRIPT_WORLD fall-back) — each with its GM_info, its GM_xmlhttpRequest semantics
// and its globals (./gm-api.js managerGlobals), through our MV3 test extension (./chromium.js) and
// our Firefox WebExtension (./firefox.js) —
// against mock sites that send their real site's CSP (Gemini enforces Trusted Types) and that
// Chromium counts as public, so Local Network Access applies; with the permission granted and not.
// In each cell the flow story runs on the real hub: eleven tabs, one per adapter; the person types
// `?<manager run every-site>!` in the master tab, nine workers answer in parallel, ChatGPT
// merges, and the report lands in the master's input box. Every worker must have captured its
// reply from the network (not the DOM fallback), and every tab must be truly connected.
//   node --test --test-concurrency=1 --test-reporter=spec test/worlds/matrix.test.js
// AICARD_WORLDS=scriptcat-chromium-main,violentmonkey-firefox-auto,… picks cells' worlds.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startMockServer } from '../../mock/server.js';
import { RESULTS, servedUserscript } from '../browser/harness.js';
import { boxTextInPage, loadAdapters } from '../browser/fixtures.js';
import { ensureHubBinary, startRealHub, startRecordingProxy } from '../browser/real-hub.js';
import { WORLDS } from './cells.js';

const WORKERS = ['deepseek', 'qianwen', 'doubao', 'yuanbao', 'kimi', 'chatglm', 'gemini', 'yiyan', 'xinghuo'];
// Where the per-tab *.localhost names cannot be reached, every tab's event stream shares the two
// plain addresses, six connections each with one kept free for the POSTs: about ten tabs is that
// fallback's limit (docs/userscript.md). Those cells run the nine-tab story (flows/nine-sites.yaml).
const NINE = { workers: WORKERS.slice(0, 7), flow: 'nine-sites' };
const ELEVEN = { workers: WORKERS, flow: 'every-site' };
const storyOf = (world) => (world.id.startsWith('no-localhost-names') ? NINE : ELEVEN);
const SYNTH = 'chatgpt';
const MASTER = 'claude';
const FLOWS = 'userscript/test/worlds/flows';

const picked = (process.env.AICARD_WORLDS || '').split(',').filter(Boolean);

let unavailable = ensureHubBinary();
let mock; let adapters;

before(async () => {
  if (unavailable) return;
  mock = await startMockServer();
  adapters = await loadAdapters();
});
after(async () => { await mock?.close(); });

const hostOf = (site) => mock.sites.find((s) => s.name === site).hosts[0];
const panelState = () => {
  const p = document.querySelector('aicard-panel');
  return p ? { ...p.dataset } : null;
};

/**
 * Polls `probe` (an in-page read) until `ok(value)`, as waitForFunction does, for worlds whose
 * page CSP forbids evaluating strings; throws with the last value after `timeoutMs`.
 */
async function until(read, ok, { timeoutMs, what }) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await read();
    if (ok(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(last)?.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** One cell: a fresh hub, a fresh browser, eleven tabs, the flow story. Returns the panels' states. */
async function flowStory(world, lna, cell) {
  const { workers, flow } = storyOf(world);
  const hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`), args: ['--flows', FLOWS] });
  const proxy = await startRecordingProxy(hub.url);
  const tabs = {};
  let browser;
  try {
    browser = await world.launch({ mock, lna: lna === 'none' ? undefined : lna, userscript: servedUserscript(proxy.url, hub.token) });
    for (const site of [...workers, SYNTH]) tabs[site] = await browser.openTab({ host: hostOf(site), values: { label: `${site}-${cell}` } });
    tabs.master = await browser.openTab({ host: hostOf(MASTER), values: { role: 'master', label: `master-${cell}` } });
    for (const [site, tab] of Object.entries(tabs)) {
      await until(() => tab.evaluate(panelState), (p) => p?.state === 'open', { timeoutMs: 30000, what: `${site} connected` });
    }
    const answers = Object.fromEntries(workers.map((s) => [s, `${s} says: 好 ${cell} ✅`]));
    for (const [site, answer] of Object.entries(answers)) mock.next(site, { answer });
    const report = `Merged ${cell}: ${workers.length} 个评审一致 👍`;
    mock.next(SYNTH, { answer: report });
    mock.next(MASTER, { answer: 'Starting. 好的。' });

    const master = adapters.get(MASTER);
    await tabs.master.typeAndSend(master.input.selectors, master.send.selectors, `?<manager run ${flow}>!`, master.send.key || 'Enter');
    const inputSel = master.input.selectors.join(', ');
    await until(() => tabs.master.evaluate(boxTextInPage, inputSel), (box) => (box || '').includes(report), { timeoutMs: 120000, what: 'the report in the master box' })
      .catch((err) => {
        const ends = proxy.frames.filter((f) => f.dir === 'up' && f.frame?.type === 'turn_end').map((f) => `${f.frame.task_id || '-'}:${f.frame.text.slice(0, 30)}`);
        throw new Error(`${err.message}; turn_ends: ${JSON.stringify(ends)}`);
      });

    const ends = proxy.frames.filter((f) => f.dir === 'up' && f.frame?.type === 'turn_end' && f.frame.task_id);
    for (const [site, answer] of Object.entries(answers)) {
      assert.ok(ends.some((f) => f.frame.text === answer), `${site}'s answer came back as a tagged turn_end`);
    }
    const states = {};
    for (const [site, tab] of Object.entries(tabs)) states[site] = await tab.evaluate(panelState);
    for (const site of [...workers, SYNTH]) {
      assert.equal(states[site].capture, 'network', `${site}: the reply was captured from the network, not the DOM (${JSON.stringify(states[site])})`);
    }
    mkdirSync(RESULTS, { recursive: true });
    await tabs.master.screenshot(join(RESULTS, `matrix-${cell}-master.png`));
    const stored = browser.values ? await browser.values() : browser.storedValues();
    return { states, stored };
  } finally {
    for (const tab of Object.values(tabs)) await tab.close().catch(() => {});
    await browser?.close();
    await proxy.close();
    await hub.close();
  }
}

for (const world of WORLDS) {
  if (picked.length && !picked.includes(world.id)) continue;
  describe(world.id, () => {
    for (const lna of world.lna) {
      test(`${world.id} × Local Network Access ${lna}: the flow story`, async (t) => {
        if (unavailable) { t.skip(unavailable); return; }
        const { states, stored } = await flowStory(world, lna, `${world.id}-${lna}`);
        if (world.id.startsWith('no-localhost-names')) {
          assert.ok(Number(stored.sse_spread_broken) > 0, `the per-tab names were really unreachable and the tabs said so (${JSON.stringify(stored)})`);
        }
        const transports = Object.fromEntries(Object.entries(states).map(([s, p]) => [s, `${p.transport}/${p.hooks}`]));
        t.diagnostic(`transport/hooks per tab: ${JSON.stringify(transports)}`);
        if (world.hooks) {
          for (const [site, p] of Object.entries(states)) assert.equal(p.hooks, world.hooks, `${site}: the world the manager said (${JSON.stringify(p)})`);
        }
        if (lna === 'denied') {
          for (const [site, p] of Object.entries(states)) assert.equal(p.transport, 'sse', `${site}: without the permission only the manager's channel reaches the hub`);
        }
        if (world.id === 'violentmonkey-chromium-content' && lna === 'granted') {
          for (const [site, p] of Object.entries(states)) assert.equal(p.transport, 'ws', `${site}: the isolated world's WebSocket is exempt from the page's CSP`);
        }
      });
    }
  });
}
