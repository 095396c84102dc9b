// The task runner's agent-loop rules without a browser (SPEC §17): which turn is the hub's, which
// deliveries a paused or ended session drops, and that our own typing is not the person's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DRAFT_WAIT_MS, TaskRunner } from '../../src/core/tasks.js';

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
  assert.equal(r.lastPersonEdit, 0);
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

test('a draft delays an automatic send for less than the hub waits for it to arrive', () => {
  assert.ok(DRAFT_WAIT_MS + 2_000 < 15_000, `draft wait ${DRAFT_WAIT_MS} ms + typing must fit the hub's 15 s arrival window`);
});
