// Frame builders (docs/protocol.md) and the hub frame reader.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as p from '../../src/core/protocol.js';

test('hello carries token and site, optional fields only when set', () => {
  assert.deepEqual(p.hello({ token: 'T', site: 'deepseek' }), { type: 'hello', token: 'T', site: 'deepseek' });
  assert.deepEqual(p.hello({ token: 'T', site: 'kimi', clientId: 'c1', url: 'https://x/', title: 't', label: 'L', role: 'master', version: '1' }),
    { type: 'hello', token: 'T', site: 'kimi', client_id: 'c1', url: 'https://x/', title: 't', label: 'L', role: 'master', version: '1' });
  assert.throws(() => p.hello({ site: 'x' }), /token/);
  assert.throws(() => p.hello({ token: 'T' }), /site/);
});

test('stream frames', () => {
  assert.deepEqual(p.chunk('t1', 0, '你'), { type: 'chunk', turn_id: 't1', seq: 0, text: '你' });
  assert.deepEqual(p.turnEnd('t1', 'all'), { type: 'turn_end', turn_id: 't1', text: 'all' });
  assert.deepEqual(p.turnEnd('t1', '', 'task-9'), { type: 'turn_end', turn_id: 't1', text: '', task_id: 'task-9' });
  assert.deepEqual(p.flowReport('t1', 'flow_end', { status: 'finished', fragmentCount: 3 }),
    { type: 'flow_report', turn_id: 't1', event: 'flow_end', status: 'finished', fragment_count: 3 });
  assert.throws(() => p.flowReport('t1', 'nope'), /unknown flow_report/);
  assert.deepEqual(p.userInput('?<help>!'), { type: 'user_input', text: '?<help>!' });
});

test('task_update states', () => {
  for (const s of ['accepted', 'sent', 'streaming', 'done']) assert.deepEqual(p.taskUpdate('k', s), { type: 'task_update', task_id: 'k', state: s });
  assert.deepEqual(p.taskUpdate('k', 'failed', '429'), { type: 'task_update', task_id: 'k', state: 'failed', error: '429' });
  assert.throws(() => p.taskUpdate('k', 'finished'), /unknown task state/);
  assert.deepEqual(p.taskUpdate('k', 'failed', '429', 'rate_limited'), { type: 'task_update', task_id: 'k', state: 'failed', error: '429', trouble: 'rate_limited' });
  assert.throws(() => p.taskUpdate('k', 'failed', 'x', 'tired'), /unknown trouble/);
});

test('task_update held names the delivery, with no task_id', () => {
  assert.deepEqual(p.deliveryHeld('s-4f2a-r3-s3'), { type: 'task_update', deliver_id: 's-4f2a-r3-s3', state: 'held' });
  assert.throws(() => p.deliveryHeld(''), /deliver_id/);
  assert.ok(p.TASK_STATES.includes('held'));
});

test('a delivery\'s files: attaching and failed name the delivery, with no task_id', () => {
  assert.deepEqual(p.deliveryAttaching('s1-r1-s1', 1, 2), { type: 'task_update', deliver_id: 's1-r1-s1', state: 'attaching', done: 1, of: 2 });
  assert.deepEqual(p.deliveryFailed('s1-r1-s1', 'a.exe: refused', 'attachment_refused'),
    { type: 'task_update', deliver_id: 's1-r1-s1', state: 'failed', error: 'a.exe: refused', trouble: 'attachment_refused' });
  assert.deepEqual(p.deliveryFailed('s1-r1-s1', 'a.png: 404'), { type: 'task_update', deliver_id: 's1-r1-s1', state: 'failed', error: 'a.png: 404' });
  assert.throws(() => p.deliveryAttaching('', 0, 1), /deliver_id/);
  assert.throws(() => p.deliveryFailed(''), /deliver_id/);
  assert.throws(() => p.deliveryFailed('d', 'x', 'tired'), /unknown trouble/);
});

test('heartbeat', () => {
  assert.deepEqual(p.heartbeat({ time: 5, pending: 2 }), { type: 'heartbeat', time: 5, pending: 2 });
  assert.deepEqual(p.heartbeat({ time: 5, trouble: 'captcha' }), { type: 'heartbeat', time: 5, trouble: 'captcha' });
});

test('readHubFrame', () => {
  assert.deepEqual(p.readHubFrame('{"type":"welcome","client_id":"c","role":"worker","heartbeat_ms":1}').frame.type, 'welcome');
  assert.deepEqual(p.readHubFrame('{"type":"future_thing"}'), { ignored: 'future_thing' });
  assert.match(p.readHubFrame('{nope').error, /malformed JSON/);
  assert.match(p.readHubFrame('[1]').error, /not an object/);
  assert.match(p.readHubFrame('{"x":1}').error, /not an object with a type/);
});
