// A reply's turn_id across a reload (docs/agents.md "never twice"), without a browser: two TurnCaptures
// over one sessionStorage stand for the page before and after the reload.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TurnCapture } from '../../src/core/capture.js';
import { TurnMemory } from '../../src/core/turn-memory.js';
import sim from '../../src/core-test-site/sim-adapter.js';

const enc = (s) => new TextEncoder().encode(s);
const sse = (...deltas) => deltas.map((d) => `data: ${JSON.stringify({ delta: d })}\n\n`).join('');

/** A sessionStorage stand-in. */
function storage() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)) };
}

/** One page life: a capture with its own TurnMemory over `store`. */
function pageLife(store, { now } = {}) {
  const sent = [];
  const events = [];
  const memory = new TurnMemory(store, now ? { now } : {});
  const capture = new TurnCapture({ adapter: sim, hub: { send: (f) => sent.push(f) }, log: () => {}, memory });
  capture.on((kind, turn) => events.push([kind, turn.id]));
  /** Streams one reply: `prompt` in the request body (null: a body without one), `parts` deltas. */
  const reply = (prompt, parts, { end = true } = {}) => {
    const requestBody = prompt === null ? '{"resume":true}' : JSON.stringify({ prompt });
    const sink = capture.begin({ status: 200, contentType: 'text/event-stream', requestBody });
    for (const p of parts) sink.push(enc(sse(p)));
    if (end) { sink.push(enc('data: [DONE]\n\n')); sink.end(); }
    return sink;
  };
  const ids = (type) => [...new Set(sent.filter((f) => f.type === type).map((f) => f.turn_id))];
  return { sent, events, capture, reply, ids };
}

const ANSWER = ['I will look it up: ', '?<memory search 登录>!', ' and then answer.'];

test('a reply cut by a reload and sent again ends with the same turn_id', () => {
  const store = storage();
  const before = pageLife(store);
  before.reply('find the login notes', ANSWER.slice(0, 2), { end: false }); // the page reloads here
  const [id] = before.ids('chunk');
  assert.ok(id);
  const after = pageLife(store);
  after.reply('find the login notes', ANSWER);
  assert.deepEqual(after.ids('chunk'), [id], 'every chunk carries the old id');
  assert.deepEqual(after.ids('turn_end'), [id]);
  assert.deepEqual(after.events.filter(([k]) => k === 'turn_start').map(([, t]) => t), [id]);
  assert.equal(after.sent.find((f) => f.type === 'turn_end').text, ANSWER.join(''));
  // What the hub already had is not sent again: one continuous stream, each command once.
  const stream = [...before.sent, ...after.sent].filter((f) => f.type === 'chunk');
  assert.deepEqual(stream.map((f) => f.seq), stream.map((_, i) => i), 'seq goes on from where it stopped');
  assert.equal(stream.map((f) => f.text).join(''), ANSWER.join(''));
});

test('a reply sent again after a reload in other pieces still continues exactly where the hub stopped', () => {
  const store = storage();
  const before = pageLife(store);
  before.reply('q2', ['The model writes ?<memory ad', 'd x>! then more'], { end: false });
  const after = pageLife(store);
  after.reply('q2', ['The model writes ?<memory add x>! th', 'en more and the end.']);
  const texts = [...before.sent, ...after.sent].filter((f) => f.type === 'chunk').map((f) => f.text);
  assert.equal(texts.join(''), 'The model writes ?<memory add x>! then more and the end.');
  assert.equal(after.sent.find((f) => f.type === 'turn_end').text, 'The model writes ?<memory add x>! then more and the end.');
});

test('a resume request (no prompt in its body) continues the turn that had not ended', () => {
  const store = storage();
  const before = pageLife(store);
  before.reply('a question', ['first half '], { end: false });
  const [id] = before.ids('chunk');
  const after = pageLife(store);
  after.reply(null, ['second half']);
  assert.deepEqual(after.ids('turn_end'), [id]);
});

test('the same question asked again after a reload, answered differently, is a new turn', () => {
  const store = storage();
  const before = pageLife(store);
  before.reply('same words', ['The first answer, long enough to judge by its start.']);
  const [old] = before.ids('turn_end');
  const after = pageLife(store);
  after.reply('same words', ['A second answer that starts otherwise.']);
  const [fresh] = after.ids('turn_end');
  assert.ok(fresh && fresh !== old, 'a new id');
  assert.deepEqual(after.ids('flow_report'), [fresh], 'flow_start only once the id was known');
});

test('a different prompt, or a reply within the same page life, is never taken over', () => {
  const store = storage();
  const life = pageLife(store);
  life.reply('one', ['same text here, same text here'], { end: false });
  life.reply('one', ['same text here, same text here']);
  assert.equal(life.ids('turn_end').length, 1);
  assert.equal(life.ids('chunk').length, 2, 'two turns, two ids');
  const after = pageLife(store);
  after.reply('two', ['same text here, same text here']);
  assert.notEqual(after.ids('chunk')[0], life.ids('chunk')[1]);
});

test('a kept turn is taken over once, and not after the window', () => {
  const store = storage();
  let t = 1_000_000;
  const now = () => t;
  const before = pageLife(store, { now });
  before.reply('q', ['answer text that is the same every time'], { end: false });
  const [id] = before.ids('chunk');
  const after = pageLife(store, { now });
  after.reply('q', ['answer text that is the same every time']);
  after.reply('q', ['answer text that is the same every time']);
  const ends = after.sent.filter((f) => f.type === 'turn_end').map((f) => f.turn_id);
  assert.equal(ends[0], id);
  assert.notEqual(ends[1], id, 'the second one in this life is new');

  const store2 = storage();
  const early = pageLife(store2, { now });
  early.reply('q', ['cut'], { end: false });
  t += 11 * 60_000;
  const late = pageLife(store2, { now });
  late.reply('q', ['cut']);
  assert.notEqual(late.ids('turn_end')[0], early.ids('chunk')[0], 'ten minutes later it is a new turn');
});

test('a resumed turn keeps the task it answered and that the hub typed its prompt', () => {
  const store = storage();
  const memory = new TurnMemory(store);
  memory.note({ id: 't-old', prompt: 'results message', text: 'partial', taskId: 'task-9', hubTyped: true });
  const after = pageLife(store);
  const seen = [];
  after.capture.on((kind, turn) => { if (kind === 'turn_start') seen.push({ hubTyped: turn.hubTyped, resumed: turn.resumed }); });
  after.reply('results message', ['partial and the rest']);
  const end = after.sent.find((f) => f.type === 'turn_end');
  assert.equal(end.turn_id, 't-old');
  assert.equal(end.task_id, 'task-9');
  assert.deepEqual(seen, [{ hubTyped: true, resumed: true }]);
});

test('storage that throws: every turn is new, nothing breaks', () => {
  const broken = { getItem() { throw new Error('denied'); }, setItem() { throw new Error('denied'); } };
  const life = pageLife(broken);
  life.reply('q', ['a']);
  assert.equal(life.ids('turn_end').length, 1);
});
