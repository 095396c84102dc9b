// The agent loop in the browser, on the real hub (docs/agents.md, issue 30): a mock model writes a
// command, AIcard runs it, types the results into the site's own editor and sends them with the
// site's own button, and the mock model answers with what the result said (mock/agent-model.js).
//   node --test --test-concurrency=1 --test-reporter=spec test/worlds/agent.test.js
//
// Where each part runs (the whole file: a few minutes):
// - one world (ScriptCat, Chromium MAIN, Local Network Access granted): every mock site at once,
//   each tab an agent (`?<agent create …>!` + `?<agent task …>!` from a desk client), a draft of
//   the person's in every box (kept, never sent, back afterwards); a reload while the model
//   writes its command (the command runs once); Stop in the panel while the model streams (the
//   session ends within 1 s, nothing typed while it streamed, no results typed after);
// - every world of the matrix (cells.js; AICARD_WORLDS picks some): two sites, one a master tab
//   where the person types `?<agent loop on>!` and then a task, one an agent tasked by the desk;
// - each manager's world (the matrix's worlds but the two that only change how the hub's address
//   resolves), first Local Network Access setting: a person's Stop at three moments
//   (../browser/stop-story.js: a command running and the Stop typed in the tab; results just sent
//   and the dashboard's Stop; the model streaming and the panel's Stop): nothing typed until the
//   person speaks, then the next session delivers again.
// Needs a hub with the agent loop (`aicard serve --agent-gap`; the Stop story `--agent-hold-ms`);
// skipped otherwise.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startMockServer } from '../../mock/server.js';
import { agentReply, bodyStrings, parseResults } from '../../mock/agent-model.js';
import { servedUserscript } from '../browser/harness.js';
import { boxTextInPage, loadAdapters } from '../browser/fixtures.js';
import { ensureHubBinary, HUB_BIN, startRealHub, startRecordingProxy } from '../browser/real-hub.js';
import { STOP_HUB_ARGS, framesOf, openDesk, stopStory, until } from '../browser/stop-story.js';
import { WORLDS } from './cells.js';

const ONE_WORLD = 'scriptcat-chromium-main';
const CELL_SITES = { master: 'deepseek', agent: 'gemini' }; // a textarea, and Quill under Trusted Types
const HUB_ARGS = ['--agent-gap', '0-0'];
const DRAFT = 'draft of the person 草稿 NOT-FOR-THE-MODEL';
const picked = (process.env.AICARD_WORLDS || '').split(',').filter(Boolean);

function agentLoopUnavailable() {
  const missing = ensureHubBinary();
  if (missing) return missing;
  const help = spawnSync(HUB_BIN, ['serve', '--help'], { encoding: 'utf8' });
  return /--agent-gap/.test(help.stdout || '') ? null : 'this aicard binary has no agent loop (`serve --agent-gap`) yet';
}

const unavailable = agentLoopUnavailable();
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
const clientIdInPage = () => sessionStorage.getItem('aicard.client_id');

const outputOf = (r) => String(r?.result?.output ?? '');
const okOf = (r) => r?.result?.success !== false;

/** A fresh hub (agent gap 0), its recording proxy, and a browser of `world`. */
async function startCell(world, lna, extra = {}, args = HUB_ARGS) {
  const hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`), args });
  const proxy = await startRecordingProxy(hub.url);
  let browser;
  try {
    browser = await world.launch({ mock, lna: lna === 'none' ? undefined : lna, userscript: servedUserscript(proxy.url, hub.token), ...extra });
  } catch (err) {
    await proxy.close();
    await hub.close();
    throw err;
  }
  const desk = await openDesk(hub.url, hub.token);
  const close = async () => {
    desk.close();
    await browser.close();
    await proxy.close();
    await hub.close();
  };
  return { hub, proxy, browser, desk, close };
}

/** Opens a tab, waits until it is connected; returns it with its client id. */
async function openConnected(browser, site, values) {
  const tab = await browser.openTab({ host: hostOf(site), values });
  await until(() => tab.evaluate(panelState), (p) => p?.state === 'open', { timeoutMs: 30000, what: `${site} connected` });
  tab.clientId = await tab.evaluate(clientIdInPage);
  return tab;
}

/** What a site received since `from`: the results messages typed into it, and every body. */
function typedInto(site, from = 0) {
  const bodies = mock.requests(site).slice(from).map((r) => r.body);
  const results = bodies.map((b) => bodyStrings(b).find((s) => parseResults(s).length)).filter(Boolean);
  return { bodies, results };
}

/** Asserts one finished session of `site`: one results message, quoted by the final answer. */
function assertOneRound(site, from, finalText) {
  const { bodies, results } = typedInto(site, from);
  assert.equal(results.length, 1, `${site}: one results message typed (${results.length})`);
  const [block] = parseResults(results[0]);
  assert.equal(block.ok, true, `${site}: the command succeeded: ${block.output}`);
  assert.match(block.output, /remembered #\d+/, `${site}: the result is the memory's id`);
  const expected = agentReply(JSON.stringify({ prompt: results[0] })).answer;
  assert.ok(finalText.includes(expected), `${site}: the final answer quotes the result: ${finalText}`);
  assert.ok(!bodies.some((b) => b.includes('NOT-FOR-THE-MODEL')), `${site}: the person's draft was never sent`);
  return block;
}

const taskText = (probe, extra = '') => `AGENT-TEST AGENT-CMD«memory ${probe} 斑马 zebra tag: agent-test»${extra} 请记下来并说出编号 / write it down and say its number`;

describe(`one world (${ONE_WORLD}, Local Network Access granted)`, () => {
  let cell;
  before(async () => {
    if (unavailable) return;
    cell = await startCell(WORLDS.find((w) => w.id === ONE_WORLD), 'granted');
  });
  after(async () => { await cell?.close(); });

  test('every mock site: command → results typed by the site\'s editor and sent → an answer quoting them; the draft stays', async (t) => {
    if (unavailable) { t.skip(unavailable); return; }
    const { browser, desk, proxy } = cell;
    const sites = mock.sites.map((s) => s.name).filter((s) => adapters.has(s) && s !== 'sim');
    const tabs = {};
    const from = {};
    for (const site of sites) tabs[site] = await openConnected(browser, site, { label: `bot-${site}` });
    for (const site of sites) {
      const adapter = adapters.get(site);
      await tabs[site].page.locator(adapter.input.selectors.join(', ')).first().click();
      await tabs[site].page.keyboard.type(DRAFT);
      from[site] = mock.requests(site).length;
      const made = await desk.run(`agent create bot_${site} on bot-${site}`);
      assert.ok(okOf(made), `agent create for ${site}: ${outputOf(made)}`);
    }
    const answers = await Promise.all(sites.map((site) => desk.run(`agent task bot_${site} ${taskText(`AGENTPROBE${site}`)}`, 120000)));
    for (const [i, site] of sites.entries()) {
      await t.test(site, async () => {
        const answer = answers[i];
        assert.ok(okOf(answer), `${site}: ${outputOf(answer)}`);
        assertOneRound(site, from[site], outputOf(answer));
        const frames = framesOf(proxy, tabs[site].clientId);
        assert.deepEqual(frames.filter((f) => f.dir === 'up' && f.frame?.type === 'user_input').map((f) => f.frame.text), [],
          `${site}: the turns the hub typed are not the person's input`);
        const sel = adapters.get(site).input.selectors.join(', ');
        await until(() => tabs[site].evaluate(boxTextInPage, sel), (box) => box === DRAFT, { timeoutMs: 5000, what: `${site}: the draft back in the box` });
        const panel = await until(() => tabs[site].evaluate(panelState), (p) => p?.agent === 'ended', { timeoutMs: 5000, what: `${site}: the panel shows the session ended` });
        assert.match(panel.agentRound || '', /^\d+\/\d+$/);
        // Console errors of the page's own CSP refusing the WebSocket are expected here (the
        // script then uses the manager's channel); anything else thrown is not.
        assert.deepEqual(tabs[site].errors.map(String).filter((e) => !/Content Security Policy|Failed to load resource/.test(e)), []);
      });
    }
    for (const tab of Object.values(tabs)) await tab.close();
  });

  test('a reload while the model writes its command: the command runs once, the session goes on', async (t) => {
    if (unavailable) { t.skip(unavailable); return; }
    const { browser, desk, proxy } = cell;
    const tab = await openConnected(browser, 'deepseek', { label: 'reload-ds' });
    try {
      await desk.run('agent create bot_reload on reload-ds');
      const from = mock.requests('deepseek').length;
      const answer = desk.run(`agent task bot_reload ${taskText('AGENTPROBERELOAD', ' AGENT-HOLD«agent-reload»')}`, 120000);
      await mock.held('agent-reload');
      // The command's `>!` may be split between chunks: the turn's text so far must hold it.
      const textOf = (turnId) => framesOf(proxy, tab.clientId).filter((f) => f.dir === 'up' && f.frame?.type === 'chunk' && f.frame.turn_id === turnId)
        .map((f) => f.frame.text).join('');
      const chunk = await proxy.waitFrame((f) => f.dir === 'up' && f.frame?.type === 'chunk' && framesOf(proxy, tab.clientId).includes(f)
        && textOf(f.frame.turn_id).includes('>!'), { what: 'the command reached the hub before the reload' });
      const { body } = mock.requests('deepseek').at(-1);
      const mark = proxy.frames.length;
      await tab.reload();
      mock.release('agent-reload');
      await until(() => tab.evaluate(panelState), (p) => p?.state === 'open', { timeoutMs: 30000, what: 'connected after the reload' });
      // The site sends the cut request again (as its resume does after a reload): the same reply.
      await tab.page.evaluate(async (text) => {
        const res = await fetch('/api/v0/chat/completion', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: text });
        await res.text();
      }, body);
      const final = await answer;
      assert.ok(okOf(final), outputOf(final));
      assertOneRound('deepseek', from, outputOf(final));
      const ends = proxy.frames.slice(mark).filter((f) => f.dir === 'up' && f.frame?.type === 'turn_end' && f.frame.text.includes('?<memory'));
      assert.deepEqual(ends.map((f) => f.frame.turn_id), [chunk.frame.turn_id], 'the reply ended with the turn_id it had before the reload');
      // An agent's memory writes go to its own scope (agent.NAME), beside the memory stream's
      // observations of each round (tagged `observation`, quoting the command): the memories the
      // command wrote are the hits tagged agent-test.
      const search = await desk.run('memory search AGENTPROBERELOAD scope=agent.bot_reload');
      // What the hub saw and answered for this tab, for the message if the command ran twice.
      const trail = framesOf(proxy, tab.clientId).filter((f) => (f.dir === 'up' && ['chunk', 'turn_end', 'hello'].includes(f.frame?.type))
        || (f.dir === 'down' && ['cmd_result', 'deliver', 'welcome'].includes(f.frame?.type)))
        .map((f) => `${f.dir} conn=${f.conn} ${f.frame.type} ${f.frame.turn_id || f.frame.client_id || ''}${f.frame.seq !== undefined ? `#${f.frame.seq}` : ''} ${JSON.stringify(f.frame.text ?? f.frame.result?.output ?? '').slice(0, 60)}`);
      const written = outputOf(search).match(/^#\d+ \[[^\]\n]*tags [^\]\n]*agent-test[^\]\n]*\]$/gm) || [];
      assert.equal(written.length, 1, `one memory written, not two: ${outputOf(search)}\n${trail.join('\n')}`);
    } finally {
      mock.release('agent-reload');
      await tab.close();
    }
  });

  test('Stop in the panel while the model streams: nothing typed meanwhile, the session ends within 1 s', async (t) => {
    if (unavailable) { t.skip(unavailable); return; }
    const { browser, desk, proxy } = cell;
    const tab = await openConnected(browser, 'chatgpt', { label: 'stop-gpt', debug: true });
    try {
      await desk.run('agent create bot_stop on stop-gpt');
      const from = mock.requests('chatgpt').length;
      const answer = desk.run(`agent task bot_stop ${taskText('AGENTPROBESTOP', ' AGENT-HOLD«agent-stop»')}`, 60000);
      await mock.held('agent-stop');
      await until(() => tab.evaluate(() => (JSON.parse(document.querySelector('aicard-panel')?.getAttribute('data-describe') || 'null')?.buttons || []).some((b) => b.act === 'agent-stop')), Boolean,
        { timeoutMs: 15000, what: 'the panel\'s Stop button' });
      assert.equal(typedInto('chatgpt', from).bodies.length, 1, 'only the task was typed: nothing while the model streams');
      const button = (await tab.evaluate(() => JSON.parse(document.querySelector('aicard-panel')?.getAttribute('data-describe') || 'null'))).buttons.find((b) => b.act === 'agent-stop');
      const mark = proxy.frames.length;
      await tab.page.mouse.click(button.rect.x + button.rect.width / 2, button.rect.y + button.rect.height / 2);
      const mine = (f) => proxy.frames.indexOf(f) >= mark && framesOf(proxy, tab.clientId).includes(f);
      await proxy.waitFrame((f) => mine(f) && f.dir === 'up' && f.frame?.type === 'user_input' && f.frame.text === '?<agent stop>!', { what: 'the Stop text' });
      const clicked = Date.now();
      await proxy.waitFrame((f) => mine(f) && f.dir === 'down' && f.frame?.type === 'flow_event' && f.frame.state === 'ended', { timeoutMs: 1000, what: 'the session ended within 1 s' });
      assert.ok(Date.now() - clicked <= 1000);
      mock.release('agent-stop');
      await answer.catch(() => null); // the caller learns it stopped (its text is the hub's)
      await until(() => tab.evaluate(() => JSON.parse(document.querySelector('aicard-panel')?.getAttribute('data-describe') || 'null').text), (text) => /已结束 ended/.test(text), { timeoutMs: 5000, what: 'the panel says it ended' });
      await proxy.waitFrame((f) => framesOf(proxy, tab.clientId).includes(f) && f.dir === 'up' && f.frame?.type === 'turn_end' && f.frame.text.includes('?<memory'),
        { what: 'the held reply ended' });
      assert.equal(typedInto('chatgpt', from).results.length, 0, 'no results typed after Stop');
    } finally {
      mock.release('agent-stop');
      await tab.close();
    }
  });
});

for (const world of WORLDS) {
  if (picked.length && !picked.includes(world.id)) continue;
  describe(`cell ${world.id}`, () => {
    for (const lna of world.lna) {
      test(`${world.id} × Local Network Access ${lna}: two sites loop`, async (t) => {
        if (unavailable) { t.skip(unavailable); return; }
        const cell = await startCell(world, lna);
        const id = `${world.id}-${lna}`;
        try {
          const { browser, desk, proxy } = cell;
          const master = await openConnected(browser, CELL_SITES.master, { role: 'master', label: `master-${id}` });
          const agentTab = await openConnected(browser, CELL_SITES.agent, { label: `bot-${id}` });
          const fromMaster = mock.requests(CELL_SITES.master).length;
          const fromAgent = mock.requests(CELL_SITES.agent).length;
          // The agent: made and tasked from the desk.
          await desk.run(`agent create cellbot on bot-${id}`);
          const tasked = desk.run(`agent task cellbot ${taskText(`AGENTPROBE${id.replace(/[^A-Za-z0-9]/g, '')}`)}`, 120000);
          // The master: the person turns the loop on, then asks.
          const m = adapters.get(CELL_SITES.master);
          await master.typeAndSend(m.input.selectors, m.send.selectors, '?<agent loop on>!', m.send.key || 'Enter');
          await proxy.waitFrame((f) => framesOf(proxy, master.clientId).includes(f) && f.dir === 'up' && f.frame?.type === 'turn_end', { timeoutMs: 30000, what: 'the reply to the loop command' });
          await master.typeAndSend(m.input.selectors, m.send.selectors, 'AGENT-TEST please write it down and tell me its number', m.send.key || 'Enter');
          const finalTurn = await proxy.waitFrame((f) => framesOf(proxy, master.clientId).includes(f) && f.dir === 'up' && f.frame?.type === 'turn_end'
            && f.frame.text.startsWith('结果说'), { timeoutMs: 60000, what: 'the master\'s answer quoting the result' });
          assertOneRound(CELL_SITES.master, fromMaster, finalTurn.frame.text);
          const inputs = framesOf(proxy, master.clientId).filter((f) => f.dir === 'up' && f.frame?.type === 'user_input').map((f) => f.frame.text);
          assert.deepEqual(inputs, ['?<agent loop on>!', 'AGENT-TEST please write it down and tell me its number'], 'only what the person typed is input');
          const answer = await tasked;
          assert.ok(okOf(answer), outputOf(answer));
          assertOneRound(CELL_SITES.agent, fromAgent, outputOf(answer));
          const states = { master: await master.evaluate(panelState), agent: await agentTab.evaluate(panelState) };
          t.diagnostic(`transport/hooks: ${JSON.stringify(Object.fromEntries(Object.entries(states).map(([k, p]) => [k, `${p.transport}/${p.hooks}`])))}`);
          if (world.hooks) for (const [k, p] of Object.entries(states)) assert.equal(p.hooks, world.hooks, `${k}: the world's hooks`);
          if (lna === 'denied') for (const [k, p] of Object.entries(states)) assert.equal(p.transport, 'sse', `${k}: the manager's channel`);
          await master.close();
          await agentTab.close();
        } finally {
          await cell.close();
        }
      });
    }
  });
}

/** The stop story needs a hub with the hold (`--agent-hold-ms`, the hub's "stop is final"). */
function stopStoryUnavailable() {
  if (unavailable) return unavailable;
  const help = spawnSync(HUB_BIN, ['serve', '--help'], { encoding: 'utf8' });
  return /--agent-hold-ms/.test(help.stdout || '') ? null : 'this aicard binary has no `serve --agent-hold-ms` yet';
}

const stopUnavailable = stopStoryUnavailable();
const STOP_SITE = 'deepseek';

for (const world of WORLDS) {
  if (picked.length && !picked.includes(world.id)) continue;
  if (world.id.startsWith('no-localhost-names')) continue; // the hub's address, not a manager's world
  const lna = world.lna[0];
  test(`stop ${world.id} × Local Network Access ${lna}: Stop at three moments, nothing typed until the person speaks`, async (t) => {
    if (stopUnavailable) { t.skip(stopUnavailable); return; }
    const started = Date.now();
    const cell = await startCell(world, lna, {}, STOP_HUB_ARGS);
    try {
      const { browser, desk, proxy, hub } = cell;
      const m = adapters.get(STOP_SITE);
      const opened = await openConnected(browser, STOP_SITE, { role: 'master', label: `stop-${world.id}`, debug: true });
      const tab = {
        clientId: opened.clientId,
        async say(text) {
          await until(() => opened.evaluate(() => document.body.dataset.streaming), (v) => v !== 'true', { timeoutMs: 20000, what: 'the site idle before the person writes' });
          await opened.typeAndSend(m.input.selectors, m.send.selectors, text, m.send.key || 'Enter');
        },
        async clickStop() {
          const b = (await describePanel()).buttons.find((x) => x.act === 'agent-stop');
          assert.ok(b, 'the panel shows Stop');
          await opened.clickAt(b.rect.x + b.rect.width / 2, b.rect.y + b.rect.height / 2);
        },
        panelText: async () => (await describePanel())?.text,
      };
      // The panel as its host says (debug: `data-describe`), which the page reads in every world.
      const describePanel = async () => JSON.parse(await opened.evaluate(() => document.querySelector('aicard-panel')?.dataset.describe || 'null'));
      await stopStory({ tab, hub, proxy, desk, mock, site: STOP_SITE, tag: world.id.replace(/[^A-Za-z0-9]/g, ''), log: (msg) => t.diagnostic(msg) });
      const state = await opened.evaluate(panelState);
      t.diagnostic(`transport/hooks: ${state.transport}/${state.hooks}; ${Date.now() - started} ms`);
      if (world.hooks) assert.equal(state.hooks, world.hooks, 'the world\'s hooks');
      await opened.close();
    } finally {
      await cell.close();
    }
  });
}
