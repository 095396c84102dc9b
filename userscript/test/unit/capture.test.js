// Turn capture without a browser: parser events → chunk/turn_end frames; trouble → failure.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { genericTrouble, TurnCapture } from '../../src/core/capture.js';
import sim from '../../src/core-test-site/sim-adapter.js';

const enc = (s) => new TextEncoder().encode(s);

function setup(taskId) {
  const sent = [];
  const events = [];
  const capture = new TurnCapture({ adapter: sim, hub: { send: (f) => sent.push(f) }, log: () => {}, claimTask: () => taskId });
  capture.on((kind, turn, detail) => events.push([kind, detail]));
  return { capture, sent, events };
}

test('deltas become chunks and one exact turn_end; reasoning rides apart, never in the text', () => {
  const { capture, sent } = setup('task-1');
  const body = 'data: {"reasoning":"think"}\n\ndata: {"delta":"你好"}\n\ndata: {"delta":" 🌏"}\n\ndata: [DONE]\n\n';
  const bytes = enc(body);
  const sink = capture.begin({ status: 200, contentType: 'text/event-stream' });
  for (const b of bytes) sink.push(Uint8Array.of(b));
  sink.end();
  const types = sent.map((f) => f.type);
  assert.deepEqual(types, ['flow_report', 'chunk', 'chunk', 'chunk', 'flow_report', 'turn_end']);
  assert.deepEqual(sent.filter((f) => f.type === 'chunk').map((f) => [f.seq, f.text, f.reasoning]), [[0, '', 'think'], [1, '你好', undefined], [2, ' 🌏', undefined]]);
  assert.deepEqual(sent.at(-1), { type: 'turn_end', turn_id: sent[0].turn_id, text: '你好 🌏', task_id: 'task-1', source: 'network' });
  assert.equal(capture.busy, false);
});

test('HTTP 429 with an HTML body is trouble, not a turn', () => {
  const { capture, sent, events } = setup();
  const sink = capture.begin({ status: 429, contentType: 'text/html' });
  sink.push(enc('<html>Too many requests</html>'));
  sink.end();
  assert.equal(sent.filter((f) => f.type === 'turn_end').length, 0);
  assert.match(events.find(([k]) => k === 'trouble')[1].reason, /429/);
});

test('a 200 captcha page instead of a stream is trouble', () => {
  const { capture, events } = setup();
  const sink = capture.begin({ status: 200, contentType: 'text/html; charset=utf-8' });
  sink.push(enc('<html><body><div id="captcha">请完成人机验证</div></body></html>'));
  sink.end();
  assert.match(events.find(([k]) => k === 'trouble')[1].reason, /captcha/);
});

test('a parser error event fails the turn with its reason and code', () => {
  const { capture, events, sent } = setup();
  const sink = capture.begin({ status: 200, contentType: 'text/event-stream' });
  sink.push(enc('data: {"delta":"part"}\n\ndata: {"error":"rate_limit","code":710022002}\n\n'));
  sink.end();
  const [, detail] = events.find(([k]) => k === 'trouble');
  assert.deepEqual(detail, { reason: 'rate_limit', code: 710022002 });
  assert.equal(sent.filter((f) => f.type === 'turn_end').length, 0);
});

test('genericTrouble', () => {
  assert.match(genericTrouble(429), /429/);
  assert.match(genericTrouble(401), /login/);
  assert.match(genericTrouble(403, 'cf-please-wait'), /captcha/);
  assert.match(genericTrouble(503), /503/);
  assert.equal(genericTrouble(200, 'data: {}', 'text/event-stream'), null);
});

test('a stream that ends with no answer is a parser miss naming the adapter, never an empty turn_end', () => {
  for (const body of ['data: {"renamed":"你好"}\n\ndata: [DONE]\n\n', '{"delta_v2":"plain JSON, not a stream"}']) {
    const { capture, sent, events } = setup('task-2');
    const sink = capture.begin({ status: 200, contentType: body.startsWith('{') ? 'application/json' : 'text/event-stream' });
    sink.push(enc(body));
    sink.end();
    assert.equal(sent.filter((f) => f.type === 'turn_end').length, 0, `no turn_end for ${body}`);
    assert.equal(events.some(([k]) => k === 'trouble'), false, 'not site trouble');
    const miss = events.find(([k]) => k === 'parser_miss');
    assert.ok(miss, `parser_miss for ${body}`);
    assert.match(miss[1].reason, /^parser_miss: sim adapter found no answer/);
    assert.equal(sent.at(-1).status, 'failed');
    assert.equal(capture.busy, false);
  }
});

test('requests after a send that no adapter matched are noted (where an endpoint moved)', () => {
  const { capture } = setup();
  assert.equal(capture.matches('https://x.invalid/api/v2/moved', 'POST'), false);
  assert.deepEqual(capture.unmatched, [], 'nothing noted before a send');
  capture.noteSend();
  capture.matches('https://x.invalid/api/v2/moved', 'POST');
  assert.deepEqual(capture.unmatched.map((u) => `${u.method} ${u.url}`), ['POST https://x.invalid/api/v2/moved']);
});

test('a reply read from the page is reported with source dom', () => {
  const { capture, sent } = setup();
  capture.domTurn('1. one\n2. two', 'task-3');
  assert.deepEqual(sent.at(-1), { type: 'turn_end', turn_id: sent[0].turn_id, text: '1. one\n2. two', task_id: 'task-3', source: 'dom' });
});
