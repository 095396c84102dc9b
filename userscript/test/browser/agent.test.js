// The tab's side of the agent loop (docs/agents.md) against the stand-in hub, in the page-world shim:
// an automatic send (`deliver {auto_send, agent}`) is typed with each site's own editor and sent
// with its own button, the turn it starts is never reported as the person's input, the person's
// draft only delays it (held while they type, the hold reported as `held`; never sent with it),
// nothing is typed while the model streams, a session the hub ends drops a delivery not yet
// typed, the panel shows the session (and what a Stop left unrun or cancelled) and its buttons
// send the exact control texts, and a reply cut by a reload ends with the same turn_id when the
// site sends it again. The real hub's side: test/worlds/agent.test.js.
//
// On the real hub (`aicard serve`, a recording proxy in front, skipped without a binary that has
// `--agent-hold-ms`): a person's Stop at three moments (stop-story.js), and a person who keeps
// typing past the old 10 s cap while results wait (nothing sent, `held` keeps the hub from
// resending, the draft back whole after the send).
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startMockServer, variantHost } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { boxTextInPage, loadAdapters } from './fixtures.js';
import { ensureHubBinary, HUB_BIN, startRealHub, startRecordingProxy } from './real-hub.js';
import { STOP_HUB_ARGS, framesOf as proxyFramesOf, openDesk, resultsTypedInto, stopStory, until } from './stop-story.js';

let mock; let hub; let browser; let adapters;

before(async () => {
  mock = await startMockServer({ csp: false });
  hub = await startStandInHub();
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await hub?.close();
  await mock?.close();
});

const DRAFT = '我的草稿 not for the model ✍️';
const RESULTS = '⟦aicard result 1/1⟧ memory search 登录 → ✓\n没有找到 / no memory matches: 登录\nround 1/25 · 完成后写 / when finished write: ?‹done FINAL›!';
const HOLD_MS = 3000; // src/core/tasks.js DEFAULT_HOLD_MS: the stand-in hub's welcome names no hold_ms

let deliveries = 0;
const deliver = (session, text = RESULTS) => ({
  type: 'deliver', text, auto_send: true, deliver_id: `d-${++deliveries}`, agent: { session, round: 1, of: 25 },
});

function answeringVariant(site) {
  return (site.variants || ['default']).find((v) => !(site.errorVariants && v in site.errorVariants)) || 'default';
}

async function open(siteName, values = {}) {
  const site = mock.sites.find((s) => s.name === siteName);
  const host = variantHost(site, answeringVariant(site));
  const page = await openTab(browser.context, { host, hub, gmValues: { debug: true, ...values } });
  const client = await hub.waitClient((c) => c.site === siteName && c.hello.url?.includes(host) && c.connected, { timeoutMs: 10000 });
  return { page, client, adapter: adapters.get(siteName), site };
}

const readBox = (page, adapter) => page.evaluate(boxTextInPage, adapter.input.selectors.join(', '));
const framesOf = (client, type, from = 0) => hub.frames.slice(from).filter((f) => f.clientId === client.id && f.frame.type === type);

async function waitBox(page, adapter, want, what) {
  const sel = adapter.input.selectors.join(', ');
  const expr = `(${boxTextInPage.toString()})(${JSON.stringify(sel)}) === ${JSON.stringify(want)}`;
  try {
    await page.waitForFunction(expr, null, { timeout: 5000 });
  } catch {
    assert.equal(await readBox(page, adapter), want, what);
  }
}

test('every site: the results are typed and sent by the site\'s own editor, the draft kept aside and never sent', async (t) => {
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter) continue;
    await t.test(site.name, async () => {
      const { page, client } = await open(site.name);
      try {
        await page.locator(adapter.input.selectors.join(', ')).first().click();
        await page.keyboard.type(DRAFT);
        const typedAt = Date.now();
        const seen = hub.frames.length;
        const sentBefore = mock.requests(site.name).length;
        const answer = `answer to the results on ${site.name} ✅`;
        mock.next(site.name, { answer, variant: answeringVariant(site) });
        const frame = deliver(`s-${site.name}`);
        hub.send(client.id, frame);

        const end = await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'turn_end' && hub.frames.indexOf(f) >= seen,
          { timeoutMs: 20000, what: `${site.name} turn_end` });
        assert.equal(end.frame.text, answer);
        const requests = mock.requests(site.name).slice(sentBefore);
        assert.equal(requests.length, 1, 'one message sent');
        assert.equal(adapter.promptFromRequest(requests[0].body), RESULTS, 'exactly the results, typed by the site\'s editor');
        assert.ok(!requests[0].body.includes('not for the model'), 'the draft was not sent');
        const firstChunk = framesOf(client, 'chunk', seen)[0];
        assert.ok(firstChunk.at - typedAt >= HOLD_MS - 150, `the send waited until the person stopped typing (${firstChunk.at - typedAt} ms)`);
        assert.deepEqual(framesOf(client, 'user_input', seen).map((f) => f.frame.text), [], 'the hub\'s turn is not the person\'s input');
        const held = framesOf(client, 'task_update', seen).map((f) => f.frame);
        assert.ok(held.length >= 1, 'the hold was reported');
        for (const h of held) assert.deepEqual(h, { type: 'task_update', deliver_id: frame.deliver_id, state: 'held' });
        await waitBox(page, adapter, DRAFT, 'the draft is back in the box');
        assert.deepEqual(page.errors.map(String), []);
      } finally {
        await page.close();
        client.connected = false;
      }
    });
  }
});

test('nothing is typed while the model streams; a session the hub ends drops the delivery not yet typed', async () => {
  const { page, client, adapter } = await open('deepseek');
  try {
    // 1. The person's message: its reply is held mid-stream; a delivery arrives meanwhile.
    const seen = hub.frames.length;
    const base = mock.requests('deepseek').length;
    mock.next('deepseek', { answer: 'The person\'s reply, long enough to be held halfway through its stream.', hold: 'streaming-1' });
    await page.locator(adapter.input.selectors.join(', ')).first().click();
    await page.keyboard.type('a question of the person');
    await page.keyboard.press('Enter');
    await mock.held('streaming-1');
    mock.next('deepseek', { answer: 'the model read the results' });
    hub.send(client.id, deliver('s-stream'));
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('deliver: ⟦aicard result'));
    assert.equal(mock.requests('deepseek').length, base + 1, 'not typed while the reply streams');
    mock.release('streaming-1');
    const ends = await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'turn_end' && f.frame.text === 'the model read the results',
      { timeoutMs: 20000, what: 'the reply to the results' });
    const personEnd = framesOf(client, 'turn_end', seen)[0];
    const second = framesOf(client, 'chunk', seen).find((f) => f.frame.turn_id === ends.frame.turn_id);
    assert.ok(hub.frames.indexOf(personEnd) < hub.frames.indexOf(second), 'the results were sent after the reply ended');
    assert.deepEqual(framesOf(client, 'user_input', seen).map((f) => f.frame.text), ['a question of the person'], 'only the person\'s own message is input');

    // 2. The same while held, then Stop: the delivery is dropped, never typed.
    const before = mock.requests('deepseek').length;
    mock.next('deepseek', { answer: 'Another reply of the person, held halfway through its stream again.', hold: 'streaming-2' });
    // The hub saw the reply end; the page may clear its own busy flag a moment later.
    await page.waitForFunction(() => document.body.dataset.streaming === 'false');
    await page.keyboard.type('another question');
    await page.keyboard.press('Enter');
    await mock.held('streaming-2');
    hub.send(client.id, deliver('s-stop'));
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('deliver: ⟦aicard result'));
    hub.send(client.id, { type: 'flow_event', run_id: 's-stop', flow: 'agent', state: 'ended', detail: { kind: 'agent', round: 1, of: 25, why: '已停止 / stopped by the person' } });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('空闲 idle'), null, { timeout: 2000 });
    mock.release('streaming-2');
    await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'turn_end' && f.frame.text.startsWith('Another reply'), { what: 'the person\'s reply' });
    await page.waitForFunction(() => document.body.dataset.streaming === 'false');
    assert.equal(mock.requests('deepseek').length, before + 1, 'only the person\'s message went out');
    assert.deepEqual(page.errors.map(String), []);
  } finally {
    mock.release('streaming-1');
    mock.release('streaming-2');
    await page.close();
    client.connected = false;
  }
});

test('the panel shows the session: round k/N, the command running, why; its buttons send the exact control texts', async () => {
  const { page, client } = await open('chatgpt', { role: 'master' });
  try {
    const ev = (state, detail) => hub.send(client.id, { type: 'flow_event', run_id: 'sess-9', flow: 'agent:researcher', state, detail: { kind: 'agent', of: 25, ...detail } });
    ev('running', { round: 2, command: 'memory search 登录' });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('代理 agent researcher · round 2/25'));
    let panel = await page.evaluate(() => window.__aicardMenu('mcpPanel'));
    assert.match(panel.text, /⋯ memory search 登录/);
    const host = await page.evaluate(() => ({ ...document.querySelector('aicard-panel').dataset }));
    assert.equal(host.agent, 'running');
    assert.equal(host.agentRound, '2/25');
    const click = async (act) => {
      const b = (await page.evaluate(() => window.__aicardMenu('mcpPanel'))).buttons.find((x) => x.act === act);
      assert.ok(b, `${act} button shown`);
      await page.mouse.click(b.rect.x + b.rect.width / 2, b.rect.y + b.rect.height / 2);
    };
    const sent = async (text) => hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'user_input' && f.frame.text === text, { timeoutMs: 3000, what: text });
    ev('note', { round: 2, why: '模型自己写了结果，已忽略 / the model wrote a result itself (ignored)' });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('the model wrote a result itself'));
    assert.equal(await page.evaluate(() => document.querySelector('aicard-panel').dataset.agent), 'running', 'a note keeps the state');
    await click('agent-pause');
    await sent('?<agent pause>!');
    ev('paused', { round: 2, why: '已暂停 / paused by the person' });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').buttons.some((b) => b.act === 'agent-resume'));
    panel = await page.evaluate(() => window.__aicardMenu('mcpPanel'));
    assert.match(panel.text, /已暂停 \/ paused by the person/);
    assert.ok(!panel.text.includes('memory search 登录'), 'no command runs while paused');
    await click('agent-resume');
    await sent('?<agent resume>!');
    ev('sent', { round: 3 });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('round 3/25 · 已发回结果'));
    await click('agent-stop');
    await sent('?<agent stop>!');
    ev('ended', { round: 3, why: '已停止 / stopped by the person' });
    await page.waitForFunction(() => !window.__aicardMenu('mcpPanel').buttons.some((b) => b.act.startsWith('agent-')));
    panel = await page.evaluate(() => window.__aicardMenu('mcpPanel'));
    assert.match(panel.text, /已结束 ended/);
    assert.match(panel.text, /已停止 \/ stopped by the person/);
    const inputs = framesOf(client, 'user_input').map((f) => f.frame.text);
    assert.deepEqual(inputs, ['?<agent pause>!', '?<agent resume>!', '?<agent stop>!']);
  } finally {
    await page.close();
    client.connected = false;
  }
});

test('after a Stop the panel lists, as text, the commands not run and those cancelled', async () => {
  const { page, client } = await open('chatgpt', { role: 'master' });
  try {
    const ev = (state, detail, runId = 'sess-stop') => hub.send(client.id, { type: 'flow_event', run_id: runId, flow: 'agent:writer', state, detail: { kind: 'agent', of: 25, ...detail } });
    const panelText = () => page.evaluate(() => window.__aicardMenu('mcpPanel').text);
    ev('running', { round: 2, command: 'sleep 30' });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('⋯ sleep 30'));
    const evil = '<img src=x onerror="window.__aicardPwned=1">';
    ev('ended', {
      round: 2, why: '已停止 / stopped by the person', not_run: ['memory 第二步 step two', evil], cancelled: ['sleep 30'], jobs: ['job-7'],
    });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('已取消 / cancelled'));
    let text = await panelText();
    assert.ok(text.includes(`未运行 / not run: memory 第二步 step two · ${evil}`), text);
    assert.ok(text.includes('已取消 / cancelled: sleep 30'), text);
    assert.ok(text.includes('job-7'), text);
    assert.ok(text.includes('已停止 / stopped by the person'), text);
    assert.ok(!text.includes('⋯ sleep 30'), 'nothing shown as running');
    assert.equal(await page.evaluate(() => window.__aicardPwned), undefined, 'a command is shown as text, never as HTML');
    assert.ok(!(await page.evaluate(() => window.__aicardMenu('mcpPanel'))).buttons.some((b) => b.act.startsWith('agent-')), 'no buttons once ended');

    // A later command of the stopped turn, not run: a note without a session id, listed under
    // the session that was stopped; the reason it ended stays.
    hub.send(client.id, { type: 'flow_event', run_id: '', flow: 'agent', state: 'note', detail: { kind: 'agent', not_run: ['to kimi: 再问一次'], why: '未运行：已被停止 / not run: the person stopped the session' } });
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('to kimi: 再问一次'));
    text = await panelText();
    assert.ok(text.includes(`未运行 / not run: memory 第二步 step two · ${evil} · to kimi: 再问一次`), text);
    assert.ok(text.includes('已停止 / stopped by the person'), text);
    assert.equal(await page.evaluate(() => document.querySelector('aicard-panel').dataset.agent), 'ended');

    // An end without the lists (or with empty ones) shows none.
    ev('ended', { round: 1, why: '完成 / done', not_run: [], cancelled: [] }, 'sess-done');
    await page.waitForFunction(() => window.__aicardMenu('mcpPanel').text.includes('完成 / done'));
    text = await panelText();
    assert.equal(text.split('未运行 / not run').length - 1, 1, 'the lists belong to the stopped session only');
    assert.equal(text.split('已取消 / cancelled').length - 1, 1);
    assert.deepEqual(page.errors.map(String), []);
  } finally {
    await page.close();
    client.connected = false;
  }
});

test('a reply cut by a reload and sent again by the site ends with the turn_id it had', async () => {
  const { page, client } = await open('deepseek');
  try {
    const seen = hub.frames.length;
    const answer = 'First I look it up: ?<memory search 登录>! and then I answer, in a reply long enough to be held halfway.';
    mock.next('deepseek', { answer, hold: 'reload-1' });
    hub.send(client.id, deliver('s-reload'));
    await mock.held('reload-1');
    const chunk = await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'chunk' && hub.frames.indexOf(f) >= seen, { what: 'a chunk before the reload' });
    const turnId = chunk.frame.turn_id;
    const { body, path } = mock.requests('deepseek').at(-1);

    const mark = hub.frames.length;
    await page.reload({ waitUntil: 'domcontentloaded' });
    mock.release('reload-1');
    await hub.waitFrame((f) => hub.frames.indexOf(f) >= mark && f.frame.type === 'hello' && f.frame.client_id === client.id, { what: 'hello after the reload' });
    // The site sends the cut request again after the reload (as a resume does): same body.
    mock.next('deepseek', { answer });
    await page.evaluate(async ({ url, text }) => {
      const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: text });
      await res.text();
    }, { url: path, text: body });
    const end = await hub.waitFrame((f) => hub.frames.indexOf(f) >= mark && f.clientId === client.id && f.frame.type === 'turn_end', { what: 'turn_end after the reload' });
    assert.equal(end.frame.turn_id, turnId, 'the same turn_id: the hub runs its commands once');
    assert.equal(end.frame.text, answer);
    assert.deepEqual(framesOf(client, 'user_input', seen).map((f) => f.frame.text), [], 'the re-sent reply is not the person\'s input');
    const fresh = 'A new question after the reload gets its own turn.';
    mock.next('deepseek', { answer: 'new answer' });
    await page.locator('textarea#chat-input').click();
    await page.keyboard.type(fresh);
    await page.keyboard.press('Enter');
    const next = await hub.waitFrame((f) => f.clientId === client.id && f.frame.type === 'turn_end' && f.frame.text === 'new answer', { what: 'the next turn' });
    assert.notEqual(next.frame.turn_id, turnId);
  } finally {
    mock.release('reload-1');
    await page.close();
    client.connected = false;
  }
});

/** Why the real-hub tests cannot run here, or null. */
function realHubUnavailable() {
  const missing = ensureHubBinary();
  if (missing) return missing;
  const help = spawnSync(HUB_BIN, ['serve', '--help'], { encoding: 'utf8' }).stdout || '';
  if (!/--agent-hold-ms/.test(help)) return 'this aicard binary has no `serve --agent-hold-ms` yet';
  return null;
}

describe('on the real hub', () => {
  const unavailable = realHubUnavailable();
  const HOLD = 1000;
  const ARRIVAL = 4000;
  const SITE = 'deepseek';
  let real; let proxy; let desk; let tab;

  before(async () => {
    if (unavailable) return;
    real = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`), args: [...STOP_HUB_ARGS, '--agent-arrival-ms', String(ARRIVAL)] });
    proxy = await startRecordingProxy(real.url);
    desk = await openDesk(real.url, real.token);
    const site = mock.sites.find((s) => s.name === SITE);
    const adapter = adapters.get(SITE);
    const page = await openTab(browser.context, { host: variantHost(site, answeringVariant(site)), hub: { url: proxy.url, token: real.token }, gmValues: { debug: true, role: 'master', label: 'stop-ds' } });
    await page.waitForFunction(() => document.querySelector('aicard-panel')?.dataset.state === 'open', null, { timeout: 20000 });
    const sel = adapter.input.selectors.join(', ');
    tab = {
      page,
      adapter,
      clientId: await page.evaluate(() => sessionStorage.getItem('aicard.client_id')),
      async say(text) {
        await page.waitForFunction(() => document.body.dataset.streaming !== 'true', null, { timeout: 20000 });
        await page.locator(sel).first().click();
        await page.keyboard.type(text);
        await page.keyboard.press('Enter');
      },
      async clickStop() {
        const b = (await page.evaluate(() => window.__aicardMenu('mcpPanel'))).buttons.find((x) => x.act === 'agent-stop');
        assert.ok(b, 'the panel shows Stop');
        await page.mouse.click(b.rect.x + b.rect.width / 2, b.rect.y + b.rect.height / 2);
      },
      panelText: () => page.evaluate(() => window.__aicardMenu('mcpPanel').text),
    };
  });

  after(async () => {
    await tab?.page.close();
    desk?.close();
    await proxy?.close();
    await real?.close();
  });

  const opts = { skip: unavailable ? `real hub unavailable: ${unavailable}` : false };

  test('Stop at three moments (a command running, results just sent, the model streaming): nothing typed until the person speaks, then sessions deliver again', opts, async (t) => {
    await stopStory({ tab, hub: real, proxy, desk, mock, site: SITE, tag: 'pw', log: (m) => t.diagnostic(m) });
    assert.deepEqual(tab.page.errors.map(String), []);
  });

  test('the person types past the old 10 s cap while results wait: nothing sent, held reported (no resend, no "send failed"); then the results go and the draft comes back whole', opts, async () => {
    const { page, adapter } = tab;
    const mine = () => proxyFramesOf(proxy, tab.clientId);
    const welcome = mine().find((f) => f.dir === 'down' && f.frame?.type === 'welcome');
    assert.equal(welcome?.frame.hold_ms, HOLD, 'the hub\'s welcome names its hold window');
    const from = mock.requests(SITE).length;
    const mark = proxy.frames.length;
    const after = (f) => proxy.frames.indexOf(f) >= mark && mine().includes(f);
    // The model writes a command and is held mid-stream; the person starts a draft meanwhile.
    await tab.say('AGENT-TEST AGENT-CMD«memory PROBEDRAFT 斑马 zebra tag: agent-test» AGENT-HOLD«draft-pw» 请记下来 / write it down');
    await mock.held('draft-pw');
    const start = '我的草稿 my draft: ';
    const rest = '这是一段很长的草稿，the person keeps typing and typing, 一直在打字，never stopping for long. 还在写……';
    const draft = `${start}${rest}`;
    await page.locator(adapter.input.selectors.join(', ')).first().click();
    await page.keyboard.type(start);
    // Typing goes on (one key every 130 ms, about 13 s) while the reply ends and its results wait.
    const typing = page.keyboard.type(rest, { delay: 130 });
    mock.release('draft-pw');
    const deliver = await proxy.waitFrame((f) => after(f) && f.dir === 'down' && f.frame?.type === 'deliver' && f.frame.auto_send, { timeoutMs: 15000, what: 'the results sent to the tab' });
    const firstHeld = await proxy.waitFrame((f) => after(f) && f.dir === 'up' && f.frame?.type === 'task_update' && f.frame.state === 'held', { timeoutMs: 5000, what: 'the tab reports the hold' });
    const heldSince = Date.now();
    await typing;
    const stoppedTyping = Date.now();
    assert.ok(stoppedTyping - heldSince >= 10_000, `the person typed on for ${stoppedTyping - heldSince} ms after the hold began (past the old 10 s cap)`);
    assert.deepEqual(resultsTypedInto(mock, SITE, from), [], 'nothing sent while the person types');
    const held = mine().filter((f) => after(f) && f.dir === 'up' && f.frame?.type === 'task_update' && f.frame.state === 'held');
    assert.ok(held.length >= 5, `held reported every 2 s (${held.length} times)`);
    for (const f of held) assert.deepEqual(f.frame, { type: 'task_update', deliver_id: deliver.frame.deliver_id, state: 'held' });
    assert.ok(proxy.frames.indexOf(firstHeld) > proxy.frames.indexOf(deliver));
    const delivers = mine().filter((f) => after(f) && f.dir === 'down' && f.frame?.type === 'deliver');
    assert.equal(delivers.length, 1, `the hub did not resend while the tab held it (arrival window ${ARRIVAL} ms): ${delivers.map((f) => f.frame.deliver_id)}`);
    const paused = mine().filter((f) => after(f) && f.dir === 'down' && f.frame?.type === 'flow_event' && ['paused', 'ended'].includes(f.frame.state));
    assert.deepEqual(paused.map((f) => f.frame.detail?.why), [], 'no "send failed", the session goes on');

    // The person stopped: the results go after hold_ms, the draft is put back whole.
    const typed = await until(() => resultsTypedInto(mock, SITE, from), (r) => r.length === 1, { timeoutMs: 10000, what: 'the results sent once the person stopped' });
    const waited = Date.now() - stoppedTyping;
    assert.ok(waited >= HOLD - 300, `sent ${waited} ms after the last key (hold ${HOLD} ms)`);
    assert.equal(typed[0].trim(), String(deliver.frame.text).trim(), 'exactly the results');
    assert.ok(!mock.requests(SITE).slice(from).some((r) => r.body.includes('my draft')), 'the draft was never sent');
    await waitBox(page, adapter, draft, 'the draft is back in the box, whole');
    await proxy.waitFrame((f) => after(f) && f.dir === 'up' && f.frame?.type === 'turn_end' && f.frame.text.startsWith('结果说'), { timeoutMs: 20000, what: 'the final answer' });
    const inputs = mine().filter((f) => after(f) && f.dir === 'up' && f.frame?.type === 'user_input').map((f) => f.frame.text);
    assert.equal(inputs.length, 1, `only the person's message is input: ${JSON.stringify(inputs)}`);
    assert.deepEqual(page.errors.map(String), []);
  });
});
