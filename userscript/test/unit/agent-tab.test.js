// The task runner's agent-loop rules without a browser (SPEC §17): which turn is the hub's, which
// deliveries a paused or ended session drops, and that our own typing is not the person's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TaskRunner } from '../../src/core/tasks.js';

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
