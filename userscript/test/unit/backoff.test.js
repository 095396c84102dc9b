// Reconnect arithmetic and the transport-switching state machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, DEFAULT_POLICY, ReconnectMachine } from '../../src/core/backoff.js';

const policy = { baseMs: 500, factor: 2, maxMs: 30000, jitter: 0.5 };

test('delay grows exponentially and is capped (min, not max)', () => {
  const noJitter = { ...policy, jitter: 0 };
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7, 8].map((a) => backoffDelay(a, noJitter)),
    [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.equal(backoffDelay(1000, noJitter), 30000, 'huge attempts stay capped');
  assert.equal(backoffDelay(-3, noJitter), 500, 'negative attempts count as the first');
});

test('jitter stays within [capped*(1-jitter), capped]', () => {
  for (let attempt = 0; attempt < 12; attempt += 1) {
    const capped = Math.min(policy.maxMs, policy.baseMs * 2 ** attempt);
    assert.equal(backoffDelay(attempt, policy, () => 0), Math.round(capped * 0.5));
    assert.equal(backoffDelay(attempt, policy, () => 0.999999), Math.round(capped * 0.5 + capped * 0.5 * 0.999999));
    const mid = backoffDelay(attempt, policy, () => 0.5);
    assert.ok(mid >= capped * 0.5 && mid <= capped);
  }
  assert.equal(backoffDelay(3, { ...policy, jitter: 1 }, () => 0), 0, 'full jitter may retry at once');
});

test('defaults are sane', () => {
  assert.ok(DEFAULT_POLICY.baseMs > 0 && DEFAULT_POLICY.maxMs >= DEFAULT_POLICY.baseMs);
  assert.ok(backoffDelay(50) <= DEFAULT_POLICY.maxMs);
});

test('a successful open resets the attempt counter', () => {
  const m = new ReconnectMachine({ ...policy, jitter: 0 });
  assert.equal(m.connect(), 'ws');
  m.open();
  assert.deepEqual(m.lost(), { delayMs: 500, transport: 'ws' });
  m.connect();
  assert.deepEqual(m.lost(), { delayMs: 1000, transport: 'ws' }, 'hub down: ws kept because it opened before');
  m.connect();
  assert.deepEqual(m.lost(), { delayMs: 2000, transport: 'ws' });
  m.connect();
  m.open();
  m.connect();
  assert.equal(m.lost().delayMs, 500);
});

test('a WebSocket that never opens hands over to SSE at once; both failing backs off, then ws again', () => {
  const m = new ReconnectMachine({ ...policy, jitter: 0 });
  assert.equal(m.connect(), 'ws');
  assert.deepEqual(m.lost(), { delayMs: 0, transport: 'sse' }, 'no waiting on a refused WebSocket');
  m.connect();
  assert.deepEqual(m.lost(), { delayMs: 500, transport: 'ws' }, 'SSE failed too (hub down): back off, start over');
  m.connect();
  assert.deepEqual(m.lost(), { delayMs: 0, transport: 'sse' });
  m.connect();
  assert.deepEqual(m.lost(), { delayMs: 1000, transport: 'ws' }, 'the backoff grows per full round');
});

test('once SSE worked it is kept', () => {
  const m = new ReconnectMachine({ ...policy, jitter: 0 });
  m.connect(); m.lost();
  assert.equal(m.connect(), 'sse');
  m.open();
  for (let i = 0; i < 5; i += 1) { assert.equal(m.lost().transport, 'sse'); m.connect(); }
});

test('a blocked transport is never tried again, but the last one is never blocked', () => {
  const m = new ReconnectMachine({ ...policy, jitter: 0 });
  m.block('ws');
  assert.equal(m.connect(), 'sse');
  for (let i = 0; i < 4; i += 1) { assert.equal(m.lost().transport, 'sse'); m.connect(); }
  m.block('sse');
  assert.deepEqual(m.usable, ['sse'], 'the only way left stays');
});

test('a world with one transport backs off on it alone', () => {
  const m = new ReconnectMachine({ ...policy, jitter: 0 }, Math.random, ['sse']);
  assert.equal(m.connect(), 'sse');
  assert.deepEqual(m.lost(), { delayMs: 500, transport: 'sse' });
});

test('stop ends the machine', () => {
  const m = new ReconnectMachine(policy);
  m.connect();
  m.stop();
  assert.equal(m.lost(), null);
  assert.equal(m.connect(), null);
  assert.equal(m.state, 'stopped');
});
