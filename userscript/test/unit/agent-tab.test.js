// The task runner's agent-loop rules without a browser (docs/agents.md): which turn is the hub's, which
// deliveries a paused or ended session drops, that our own typing is not the person's, and the
// hold (nothing typed while the person presses keys in the box, the hold reported as `held`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_HOLD_MS, HELD_EVERY_MS, TaskRunner, holdMsOf } from '../../src/core/tasks.js';
import { fakeChatPage } from './fake-box.js';

function runner() {
  const seen = new Set();
  const r = new TaskRunner({
    doc: null, adapter: null, hub: { send() {} }, capture: { on() {} }, timers: globalThis, log() {}, seen,
  });
  return { r, seen };
}

test('the turn an automatic send starts is the hub\'s, once; another prompt is the person\'s', () => {
  const { r } = runner();
  r.expectHubTurn('⟦aicard result 1/1⟧ echo hi → ✓\nhi\nround 1/25');
  assert.equal(r.takeHubTurn({ prompt: 'a message the person wrote' }), false);
  assert.equal(r.takeHubTurn({ prompt: '⟦aicard result 1/1⟧ echo hi → ✓\n\nhi\nround 1/25 ' }), true, 'line breaks rewritten by the editor');
  assert.equal(r.takeHubTurn({ prompt: '⟦aicard result 1/1⟧ echo hi → ✓\nhi\nround 1/25' }), false, 'only once');
  r.expectHubTurn('x');
  assert.equal(r.takeHubTurn({ prompt: null }), true, 'a site that shows no prompt: the next turn');
  const long = 'primer '.repeat(60);
  r.expectHubTurn(long);
  assert.equal(r.takeHubTurn({ prompt: long.slice(0, 200) }), true, 'a site that cut a long message');
  r.expectHubTurn('late');
  r.hubTurn.until = Date.now() - 1;
  assert.equal(r.takeHubTurn({ prompt: 'late' }), false, 'not after the window');
});

test('a session paused or ended drops its deliveries not yet typed, and only those', () => {
  const { r, seen } = runner();
  const d = (id, session) => ({ kind: 'deliver', deliver_id: id, auto_send: true, agent: { session, round: 1, of: 25 } });
  r.queue = [d('a', 7), d('b', 8), { kind: 'task', task_id: 't' }, d('c', 7)];
  r.current = d('now', 7);
  r.agentEvent({ run_id: '7', state: 'running', detail: { kind: 'agent' } });
  assert.equal(r.queue.length, 4, 'running drops nothing');
  r.agentEvent({ run_id: '7', state: 'ended', detail: { kind: 'agent' } });
  assert.deepEqual(r.queue.map((j) => j.deliver_id || j.task_id), ['b', 't']);
  assert.deepEqual([...seen].sort(), ['a', 'c'], 'dropped ids count as handled (a resend is a new id)');
  assert.equal(r.current.dropped, true, 'the one waiting to type stops waiting');
  r.current = { ...d('typing', 8), typing: true };
  r.agentEvent({ run_id: 8, state: 'paused', detail: { kind: 'agent' } });
  assert.equal(r.current.dropped, undefined, 'a delivery being typed is finished');
  assert.deepEqual(r.queue.map((j) => j.deliver_id || j.task_id), ['t']);
});

test('our own writing into the box is not the person typing', () => {
  const { r } = runner();
  r.typing = 1;
  r.notePersonEdit();
  assert.equal(r.lastPersonEdit, -Infinity);
  assert.equal(r.personTyping, false);
  r.typing = 0;
  r.notePersonEdit();
  assert.ok(Date.now() - r.lastPersonEdit < 1000);
});

test('the hub resending a round that still waits here is typed once; a later round is not held back', () => {
  const { r, seen } = runner();
  r.pump = () => {};
  const d = (id, round) => ({ type: 'deliver', deliver_id: id, auto_send: true, text: `r${round}`, agent: { session: 's1', round, of: 25 } });
  r.handle(d('s1-r1-s1', 1));
  r.current = r.queue.shift();
  r.handle(d('s1-r1-s2', 1));
  assert.deepEqual(r.queue, [], 'the resend of the round being waited on is the same message');
  assert.ok(seen.has('s1-r1-s2'), 'its id counts as handled');
  r.handle(d('s1-r2-s3', 2));
  r.handle(d('s1-r2-s4', 2));
  assert.deepEqual(r.queue.map((j) => j.deliver_id), ['s1-r2-s3'], 'one of round 2 queued');
  r.current = null;
  r.queue = [];
  r.handle(d('s1-r1-s5', 1));
  assert.deepEqual(r.queue.map((j) => j.deliver_id), ['s1-r1-s5'], 'once nothing of round 1 waits, a resend is typed');
});

const RESULTS = '⟦aicard result 1/1⟧ memory search 登录 → ✓\n没有找到 / no memory matches: 登录\nround 1/25';
const flush = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A runner on a fake page (fake-box.js) under fake timers and a fake clock: `advance(ms)` moves
 * time in small steps, letting the runner's promises settle between them.
 */
function onPage(t, welcome) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_700_000_000_000 });
  const page = fakeChatPage();
  const frames = [];
  const seen = new Set();
  const r = new TaskRunner({
    doc: page.doc, adapter: page.adapter, capture: { on() {}, busy: false }, timers: globalThis, log() {}, seen,
    hub: { send: (frame) => frames.push({ at: Date.now(), frame }) },
  });
  if (welcome) r.welcome(welcome);
  const advance = async (ms, step = 50) => {
    for (let done = 0; done < ms; done += step) {
      t.mock.timers.tick(step);
      await flush();
    }
  };
  /** The person presses keys in the box (main.js notes each trusted key press). */
  const personTypes = (text) => {
    page.box.value += text;
    r.notePersonEdit();
  };
  const held = () => frames.filter((f) => f.frame.state === 'held');
  return { r, page, frames, seen, advance, personTypes, held };
}

const deliver = (id, session = 's1') => ({ type: 'deliver', deliver_id: id, auto_send: true, text: RESULTS, agent: { session, round: 1, of: 25 } });

test('the person keeps typing past 10 s: nothing is sent, the hold is reported every 2 s; once they stop, the results go and the draft comes back whole', async (t) => {
  const { r, page, advance, personTypes, held } = onPage(t);
  personTypes('我在写 I am writing');
  r.handle(deliver('d-1'));
  await flush();
  const started = Date.now();
  while (Date.now() - started < 15_000) {
    await advance(400);
    personTypes('.');
  }
  assert.deepEqual(page.sent, [], 'nothing typed or sent while the person types, 15 s long (the old cap was 10 s)');
  assert.equal(page.box.value, `我在写 I am writing${'.'.repeat(38)}`, 'the person\'s text untouched');
  const reports = held();
  assert.ok(reports.length >= 7, `held reported at once and every 2 s: ${reports.length} times in 15 s`);
  for (const { frame } of reports) assert.deepEqual(frame, { type: 'task_update', deliver_id: 'd-1', state: 'held' });
  assert.equal(reports[0].at, started, 'the first report when the hold begins');
  for (const [i, { at }] of reports.entries()) {
    if (i) assert.ok(Math.abs(at - reports[i - 1].at - HELD_EVERY_MS) <= 100, `every 2 s (${at - reports[i - 1].at} ms)`);
  }
  const draft = page.box.value;
  const stopped = Date.now();
  await advance(DEFAULT_HOLD_MS - 200);
  assert.deepEqual(page.sent, [], 'not within hold_ms of the last key press');
  await advance(400);
  assert.deepEqual(page.sent, [RESULTS], 'sent once the person stopped for hold_ms, exactly the results');
  assert.equal(page.box.value, draft, 'the draft is back, whole');
  const after = held().filter((f) => f.at > stopped + DEFAULT_HOLD_MS);
  assert.deepEqual(after, [], 'no hold reported after it ended');
  assert.equal(r.current, null);
});

test('a draft left alone: the results go after hold_ms, the draft kept aside and put back whole', async (t) => {
  const { r, page, advance, personTypes, held } = onPage(t);
  personTypes('half a thought, 一半的想法\nsecond line');
  await advance(1000);
  r.handle(deliver('d-2'));
  await advance(1800);
  assert.deepEqual(page.sent, [], '2.8 s after the last key press: still held');
  assert.equal(held().length, 1, 'held reported when the hold began');
  await advance(400);
  assert.deepEqual(page.sent, [RESULTS], 'sent 3 s after the last key press');
  assert.equal(page.box.value, 'half a thought, 一半的想法\nsecond line');

  // Nobody typing: sent at once, no hold reported.
  page.box.value = 'an old draft';
  const before = held().length;
  r.handle(deliver('d-3'));
  await advance(100);
  assert.deepEqual(page.sent, [RESULTS, RESULTS]);
  assert.equal(held().length, before, 'no hold without key presses');
  assert.equal(page.box.value, 'an old draft');
});

test('hold_ms comes from the welcome; absent, 3000', async (t) => {
  assert.equal(holdMsOf({ type: 'welcome' }), 3000);
  assert.equal(holdMsOf({ type: 'welcome', hold_ms: 'soon' }), 3000);
  assert.equal(holdMsOf({ type: 'welcome', hold_ms: -1 }), 3000);
  assert.equal(holdMsOf({ type: 'welcome', hold_ms: 0 }), 0);
  const { r, page, advance, personTypes, held } = onPage(t, { type: 'welcome', client_id: 'c', role: 'worker', heartbeat_ms: 20000, protocol: 1, hold_ms: 8000 });
  assert.equal(r.holdMs, 8000);
  personTypes('x');
  r.handle(deliver('d-4'));
  await advance(7800);
  assert.deepEqual(page.sent, [], 'held for the welcome\'s 8 s, not 3 s');
  assert.equal(held().length, 4, 'held at 0, 2, 4, 6 s');
  await advance(400);
  assert.deepEqual(page.sent, [RESULTS]);

  r.welcome({ type: 'welcome', client_id: 'c', role: 'worker', heartbeat_ms: 20000, protocol: 1, hold_ms: 500 });
  personTypes('y');
  r.handle(deliver('d-5'));
  await advance(400);
  assert.equal(page.sent.length, 1, 'held for 500 ms');
  await advance(200);
  assert.equal(page.sent.length, 2, 'sent after the welcome\'s 500 ms');

  r.welcome({ type: 'welcome', client_id: 'c', role: 'worker', heartbeat_ms: 20000, protocol: 1 });
  assert.equal(r.holdMs, DEFAULT_HOLD_MS, 'a welcome without hold_ms: the default');
});

test('a held delivery whose session ends is dropped: never typed, no more held', async (t) => {
  const { r, page, seen, advance, personTypes, held } = onPage(t);
  personTypes('typing');
  r.handle(deliver('d-6', 's-end'));
  await advance(2500);
  assert.equal(held().length, 2);
  r.agentEvent({ run_id: 's-end', state: 'ended', detail: { kind: 'agent' } });
  await advance(200);
  assert.equal(r.current, null, 'the held delivery stopped waiting');
  await advance(6000);
  assert.deepEqual(page.sent, []);
  assert.equal(held().length, 2, 'no hold reported once dropped');
  assert.ok(seen.has('d-6'));
  assert.equal(page.box.value, 'typing');
});
