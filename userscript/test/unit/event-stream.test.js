// The SSE reader used for the hub's /events fallback, under every split.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventStreamReader } from '../../src/core/event-stream.js';

const STREAM = ': ping\n\ndata: {"type":"task","prompt":"你好"}\n\ndata: line1\r\ndata: line2\r\n\r\n: ping\r\n\r\nevent: x\ndata:{"type":"ack"}\n\n';
const EXPECTED = ['{"type":"task","prompt":"你好"}', 'line1\nline2', '{"type":"ack"}'];

test('reads whole stream', () => {
  assert.deepEqual(new EventStreamReader().push(STREAM), EXPECTED);
});

test('reads the stream split at every position', () => {
  for (let i = 0; i <= STREAM.length; i += 1) {
    const r = new EventStreamReader();
    assert.deepEqual([...r.push(STREAM.slice(0, i)), ...r.push(STREAM.slice(i))], EXPECTED, `split at ${i}`);
  }
});

test('reads the stream one character at a time', () => {
  const r = new EventStreamReader();
  const out = [];
  for (const ch of STREAM) out.push(...r.push(ch));
  assert.deepEqual(out, EXPECTED);
});
