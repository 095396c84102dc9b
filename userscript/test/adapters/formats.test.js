// What the adapters do with streams they were not written for, and the two stream facts outside captures
// showed (docs/sites/deepseek.md, docs/sites/qwen.md): a format an adapter does not know gives no answer text
// (the page is read instead), never a wrong one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { adapters } from '../../src/adapters/index.js';
import { byteChunks, randomChunks, runParser, summarize } from './harness.js';

const dir = new URL('./fixtures/', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('manifest.json', dir), 'utf8'));
const adapter = (name) => adapters.find((a) => a.name === name);
const utf8 = (s) => new TextEncoder().encode(s);
const sse = (...frames) => frames.map((f) => `data: ${typeof f === 'string' ? f : JSON.stringify(f)}\n\n`).join('');

/** Bodies in shapes no adapter was written for (a site's next format might look like any of them). */
const UNKNOWN = [
  sse({ text: 'Hello' }, { text: ' world' }, '[DONE]'),
  sse({ content: 'Hello' }, '[DONE]'),
  sse({ delta: { text: 'Hello' } }),
  'event: message\ndata: {"msg":"Hello","type":"answer"}\n\n',
  sse('Hello world', '[DONE]'),
  'Hello world, a plain text body',
  '{"answer":"Hello"}',
  sse({ v: 'Hello' }, { v: ' world' }),
  sse({ choices: [{ delta: { content: 'Hello', phase: 'a_new_phase' } }] }),
];

test('another site\'s capture, or an unknown shape, gives no answer text in any adapter', () => {
  const foreign = [...manifest.streams, ...(manifest.streamErrors || [])];
  for (const a of adapters) {
    const bodies = [
      ...foreign.filter((f) => f.site !== a.name).map((f) => [f.file, readFileSync(new URL(f.file, dir), 'utf8')]),
      ...UNKNOWN.map((b, i) => [`unknown shape ${i}`, b]),
    ];
    for (const [label, body] of bodies) {
      const s = summarize(runParser(a, [utf8(body)]));
      assert.equal(s.answer, '', `${a.name} ← ${label}`);
      assert.equal(s.done + s.errors.length, 1, `${a.name} ← ${label}: one terminal event`);
    }
  }
});

const DS_HEAD = 'event: ready\ndata: {"request_message_id":1,"response_message_id":2}\n\n'
  + sse({ v: { response: { message_id: 2, status: 'WIP', fragments: [{ id: 1, type: 'RESPONSE', content: '答案', references: [] }] } } })
  + sse({ p: 'response/fragments/-1/content', o: 'APPEND', v: '被撤回' });

test('DeepSeek: the withdrawal (a bare {"v":[…]} after a BATCH) fails the turn with content_filter', () => {
  const body = DS_HEAD
    + sse({ p: 'response', o: 'BATCH', v: [{ p: 'accumulated_token_usage', v: 9 }, { p: 'quasi_status', v: 'FINISHED' }] })
    + sse({ v: [{ p: 'ban_regenerate', v: true }, { p: 'status', v: 'CONTENT_FILTER' }, { p: 'fragments', v: [{ id: 3, type: 'TEMPLATE_RESPONSE', content: '你好，这个问题我暂时无法回答' }] }] })
    + 'event: finish\ndata: {}\n\nevent: close\ndata: {"click_behavior":"none","auto_resume":false}\n\n';
  for (const chunks of [[utf8(body)], byteChunks(utf8(body)), randomChunks(utf8(body), 3, 9)]) {
    const s = summarize(runParser(adapter('deepseek'), chunks));
    assert.equal(s.done, 0, 'a withdrawn answer is never done');
    assert.equal(s.errors.length, 1);
    assert.equal(s.errors[0].code, 'content_filter');
    assert.ok(!s.answer.includes('无法回答'), 'the refusal template is not the answer either');
  }
});

test('DeepSeek: the same withdrawal as one explicit BATCH on response also fails the turn', () => {
  const body = DS_HEAD
    + sse({ p: 'response', o: 'BATCH', v: [{ p: 'ban_regenerate', v: true }, { p: 'status', v: 'CONTENT_FILTER' }, { p: 'fragments', v: [{ id: 2, type: 'TEMPLATE_RESPONSE', content: 'Sorry' }] }] })
    + 'event: finish\ndata: {}\n\n';
  const s = summarize(runParser(adapter('deepseek'), [utf8(body)]));
  assert.equal(s.errors[0]?.code, 'content_filter');
  assert.equal(s.done, 0);
});

test('DeepSeek: a bare string right after a BATCH (a shape no capture shows) adds no text', () => {
  const body = DS_HEAD
    + sse({ p: 'response', o: 'BATCH', v: [{ p: 'accumulated_token_usage', v: 9 }] })
    + sse({ v: '不知道往哪里接' })
    + sse({ p: 'response/status', o: 'SET', v: 'FINISHED' });
  const s = summarize(runParser(adapter('deepseek'), [utf8(body)]));
  assert.equal(s.answer, '答案被撤回');
  assert.equal(s.done, 1);
});

test('DeepSeek search: every marker is dropped and the sources its references name follow the answer', () => {
  const body = DS_HEAD
    + sse({ p: 'response', o: 'BATCH', v: [{ p: 'fragments', o: 'APPEND', v: [{ id: 7, type: 'TOOL_OPEN', status: 'WIP', result: { url: 'https://a.example/x', title: '甲' } }] }] })
    + sse({ p: 'response/fragments', o: 'APPEND', v: [{ id: 9, type: 'RESPONSE', content: '一', references: [] }] })
    + sse({ p: 'response/fragments/-1', o: 'BATCH', v: [{ p: 'content', o: 'APPEND', v: '[reference:0]' }, { p: 'references', o: 'SET', v: [{ id: 7, type: 'TOOL_OPEN' }] }] })
    + sse({ v: [{ p: 'content', o: 'APPEND', v: '[reference:1]' }, { p: 'references', v: [{ id: 8, type: 'TOOL_SEARCH' }] }] })
    + sse({ p: 'response/fragments/-1/content', o: 'APPEND', v: '。' })
    + sse({ p: 'response/status', o: 'SET', v: 'FINISHED' });
  const s = summarize(runParser(adapter('deepseek'), [utf8(body)]));
  // fragment 8 was never sent: a reference to it lists nothing
  assert.equal(s.answer, '答案被撤回一。\n\n来源 / Sources\n1. 甲 — https://a.example/x');
});

const created = (id, index) => ({ 'response.created': { chat_id: 'c', parent_id: 'p', response_id: id, response_index: index } });
const delta = (id, content, status = 'typing') => ({ choices: [{ delta: { role: 'assistant', content, phase: 'answer', status } }], response_id: id });

test('Qwen: with two candidates only response_index 0 counts, whatever order they are announced in', () => {
  const body = sse(
    created('b', '1'), created('a', '0'),
    delta('b', 'SECOND '), delta('a', 'FIRST '), delta('b', 'more'), delta('a', 'answer'),
    delta('a', '', 'finished'), delta('b', ' late'), delta('b', '', 'finished'),
  );
  for (const chunks of [[utf8(body)], byteChunks(utf8(body))]) {
    const s = summarize(runParser(adapter('qianwen'), chunks));
    assert.equal(s.answer, 'FIRST answer');
    assert.equal(s.done, 1);
    assert.equal(s.afterTerminal, false);
  }
});

test('Qwen: the other candidate finishing first does not end the turn; the shown one does', () => {
  const parser = adapter('qianwen').createParser();
  const events = parser.push(utf8(sse(created('a', 0), created('b', 1), delta('b', '巴黎'), delta('b', '', 'finished'), delta('a', '巴'))));
  assert.deepEqual(events, [{ type: 'delta', text: '巴' }], 'no done at the other candidate\'s finish');
  assert.deepEqual(parser.push(utf8(sse(delta('a', '黎'), delta('a', '', 'finished')))), [{ type: 'delta', text: '黎' }, { type: 'done' }]);
});

test('Qwen: one candidate, or deltas without response ids, read as before', () => {
  const one = summarize(runParser(adapter('qianwen'), [utf8(sse(created('r1', '0'), delta('r1', 'Hello'), delta('r1', '', 'finished')))]));
  assert.equal(one.answer, 'Hello');
  const untagged = summarize(runParser(adapter('qianwen'), [utf8(sse({ choices: [{ delta: { content: 'Hi', phase: 'answer' } }] }))]));
  assert.equal(untagged.answer, 'Hi');
  assert.equal(untagged.done, 1, 'chat.qwen.ai ends with its body');
});
