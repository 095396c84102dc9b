// Unit tests of the shared parsing helpers in src/adapters/lib/.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSseSplitter } from '../../src/adapters/lib/sse.js';
import { createUtf8Decoder } from '../../src/adapters/lib/utf8.js';
import { createLengthPrefixedReader, scanJsonValue } from '../../src/adapters/lib/frames.js';
import { createConnectReader, encodeConnectFrame } from '../../src/adapters/lib/connect.js';
import { createSnapshotDiffer } from '../../src/adapters/lib/snapshot.js';
import { createPatchState } from '../../src/adapters/lib/patch.js';
import { createMarkerFilter, sourcesBlock } from '../../src/adapters/lib/citations.js';
import { createOutput } from '../../src/adapters/lib/stream.js';
import { parseRequestUrl } from '../../src/adapters/lib/url.js';

function splitAll(text, sizes) {
  const s = createSseSplitter();
  const out = [];
  let i = 0;
  let k = 0;
  while (i < text.length) {
    const n = sizes[k++ % sizes.length];
    out.push(...s.push(text.slice(i, i + n)));
    i += n;
  }
  out.push(...s.end());
  return out;
}

test('SSE splitter: LF, CRLF, lone CR, CR split from its LF, comments, multi-line data, event and id', () => {
  const text = ': hello\r\nevent: a\r\nid: 7\r\ndata: one\r\ndata:two\r\n\r\ndata: x\rdata: y\r\rdata: last';
  const want = [
    { event: 'a', data: 'one\ntwo', id: '7' },
    { event: 'message', data: 'x\ny', id: '7' },
    { event: 'message', data: 'last', id: '7' },
  ];
  for (const sizes of [[1000], [1], [2, 3], [5, 1, 7]]) assert.deepEqual(splitAll(text, sizes), want, String(sizes));
});

test('SSE splitter: a field without a colon, a blank data value, and an event-only block', () => {
  assert.deepEqual(splitAll('data\n\nevent: only\n\ndata:\n\n', [4]), [
    { event: 'message', data: '', id: null },
    { event: 'message', data: '', id: null },
  ]);
});

test('UTF-8 decoder keeps a character split across reads', () => {
  const bytes = new TextEncoder().encode('中👨‍👩‍👧');
  const d = createUtf8Decoder();
  let s = '';
  for (const b of bytes) s += d.decode(Uint8Array.of(b));
  s += d.flush();
  assert.equal(s, '中👨‍👩‍👧');
});

test('length-prefixed reader: ignores wrong lengths, survives brackets and quotes inside strings', () => {
  const tricky = 'a]\\"}[{ "x';
  const body = `)]}'\n\n999\n${JSON.stringify([['wrb.fr', null, JSON.stringify([tricky])]])}\n3\n[["e",4]]\n`;
  for (const size of [1, 2, 5, 1000]) {
    const r = createLengthPrefixedReader();
    const frames = [];
    for (let i = 0; i < body.length; i += size) frames.push(...r.push(body.slice(i, i + size)));
    frames.push(...r.end());
    assert.equal(frames.length, 2, `size ${size}`);
    assert.deepEqual(JSON.parse(frames[0][0][2]), [tricky]);
    assert.deepEqual(frames[1], [['e', 4]]);
  }
  assert.equal(scanJsonValue('[1,[2]', 0), -1);
  assert.throws(() => {
    const r = createLengthPrefixedReader();
    r.push(")]}'\n\n10\n[[1,");
    r.end();
  }, /truncated/);
});

test('Connect reader: frames split anywhere, trailer flag, compressed flag, truncated tail', () => {
  const bytes = new Uint8Array([...encodeConnectFrame({ a: '你好' }), ...encodeConnectFrame({}, 2)]);
  for (const size of [1, 3, 100]) {
    const r = createConnectReader();
    const frames = [];
    for (let i = 0; i < bytes.length; i += size) frames.push(...r.push(bytes.slice(i, i + size)));
    const { frames: rest, leftover } = r.end();
    frames.push(...rest);
    assert.deepEqual(frames.map((f) => [f.end, f.json]), [[false, { a: '你好' }], [true, {}]]);
    assert.equal(leftover, 0);
  }
  const r = createConnectReader();
  assert.equal(r.push(encodeConnectFrame('{}', 1))[0].compressed, true);
  r.push(encodeConnectFrame({ x: 1 }).slice(0, 7));
  assert.equal(r.end().leftover, 7);
});

test('snapshot differ: suffixes, repeats and shorter snapshots add nothing, a rewrite becomes the new base', () => {
  const d = createSnapshotDiffer();
  assert.equal(d.next('你'), '你');
  assert.equal(d.next('你好'), '好');
  assert.equal(d.next('你好'), '');
  assert.equal(d.next('你'), '');
  assert.equal(d.next('你好！'), '！');
  assert.equal(d.next('Hello'), '');
  assert.equal(d.next('Hello!'), '!');
});

test('patch state: inherited path/op, negative indexes, batch with relative paths, JSON-pointer escapes', () => {
  const p = createPatchState({ initialOp: 'SET', appendStrings: (path) => path.endsWith('/content') });
  p.root = { response: { fragments: [{ type: 'THINK', content: 'a' }], status: 'WIP' } };
  p.apply({ p: 'response/fragments/-1/content', o: 'APPEND', v: 'b' });
  p.apply({ v: 'c' });
  p.apply({ p: 'response/fragments', o: 'APPEND', v: [{ type: 'RESPONSE', content: 'x' }] });
  p.apply({ p: 'response/fragments/-1/content', v: 'y' });
  p.apply({ p: 'response', o: 'BATCH', v: [{ p: 'quasi_status', v: 'FINISHED' }, { p: 'accumulated_token_usage', v: 3 }] });
  p.apply({ p: 'response/status', o: 'SET', v: 'FINISHED' });
  assert.deepEqual(p.root.response, {
    fragments: [{ type: 'THINK', content: 'abc' }, { type: 'RESPONSE', content: 'xy' }],
    status: 'FINISHED', quasi_status: 'FINISHED', accumulated_token_usage: 3,
  });
  const q = createPatchState();
  q.apply({ p: '', o: 'add', v: { message: { content: { parts: [''] }, 'a/b': 1 } } });
  q.apply({ p: '', o: 'patch', v: [{ p: '/message/content/parts/0', o: 'append', v: 'hi' }] });
  q.apply({ v: ' there' });
  q.apply({ p: '/message/a~1b', o: 'replace', v: 2 });
  q.apply({ p: '/message/content/parts/0', o: 'truncate', v: 2 });
  assert.deepEqual(q.root, { message: { content: { parts: ['hi'] }, 'a/b': 2 } });
});

test('patch state, DeepSeek cursor: a bare {"v":[…]} after a BATCH continues at the batch\'s own path', () => {
  const p = createPatchState({ initialOp: 'SET', appendStrings: (path) => path.endsWith('/content'), batchCursor: 'self' });
  p.root = { response: { fragments: [{ type: 'RESPONSE', content: 'a', references: [] }], status: 'WIP' } };
  p.apply({ p: 'response', o: 'BATCH', v: [{ p: 'accumulated_token_usage', v: 9 }, { p: 'quasi_status', v: 'FINISHED' }] });
  const leaves = p.apply({ v: [{ p: 'status', v: 'CONTENT_FILTER' }, { p: 'quasi_status', v: 'CONTENT_FILTER' }] });
  assert.deepEqual(leaves.map((l) => l.pathString), ['response/status', 'response/quasi_status']);
  assert.equal(p.root.response.status, 'CONTENT_FILTER');
  p.apply({ p: 'response/fragments/-1', o: 'BATCH', v: [{ p: 'content', o: 'APPEND', v: 'x' }, { p: 'references', o: 'SET', v: [{ id: 3 }] }] });
  p.apply({ v: [{ p: 'content', o: 'APPEND', v: 'y' }, { p: 'references', v: [{ id: 4 }] }] });
  assert.deepEqual(p.root.response.fragments[0], { type: 'RESPONSE', content: 'axy', references: [{ id: 4 }] });
  // a bare string after a BATCH is no op this shape knows: it changes nothing
  assert.deepEqual(p.apply({ v: 'stray' }), []);
  assert.equal(p.root.response.fragments[0].content, 'axy');
  assert.deepEqual(p.cursor, { p: 'response/fragments/-1', o: 'batch' });
});

test('citation markers: dropped wherever a read cuts them, look-alikes kept, numbers reported', () => {
  const text = '晴[citation:2]，a[1] [citation] [reference:12][reference:3]。[ref';
  const want = '晴，a[1] [citation] 。[ref';
  for (let cut = 1; cut <= text.length; cut += 1) {
    const f = createMarkerFilter();
    let got = '';
    const markers = [];
    for (let i = 0; i < text.length; i += cut) {
      const r = f.push(text.slice(i, i + cut));
      got += r.text;
      markers.push(...r.markers);
    }
    got += f.flush();
    assert.equal(got, want, `pieces of ${cut}`);
    assert.deepEqual(markers, [{ kind: 'citation', n: 2 }, { kind: 'reference', n: 12 }, { kind: 'reference', n: 3 }]);
  }
  const f = createMarkerFilter();
  assert.deepEqual(f.push('see [citation:'), { text: 'see ', markers: [] });
  assert.deepEqual(f.push('x]'), { text: '[citation:x]', markers: [] });
});

test('sources block: numbered, one line per distinct http(s) URL, titles on one line', () => {
  assert.equal(sourcesBlock([]), '');
  assert.equal(sourcesBlock([{ title: 'no url' }, { url: 'javascript:alert(1)', title: 'x' }]), '');
  assert.equal(
    sourcesBlock([
      { title: ' 广州\n天气 ', url: 'https://a.example/1' },
      { title: 'again', url: 'https://a.example/1' },
      { url: 'http://b.example/' },
    ]),
    '\n\n来源 / Sources\n1. 广州 天气 — https://a.example/1\n2. http://b.example/',
  );
});

test('output: one terminal event, nothing after it, empty text dropped', () => {
  const out = createOutput();
  out.delta('');
  out.delta('a');
  out.done();
  out.done();
  out.delta('b');
  out.error('x');
  assert.deepEqual(out.take(), [{ type: 'delta', text: 'a' }, { type: 'done' }]);
});

test('parseRequestUrl: absolute, relative, Request-like objects', () => {
  assert.equal(parseRequestUrl('https://Chat.DeepSeek.com/a?b=1').host, 'chat.deepseek.com');
  assert.equal(parseRequestUrl('/a/b').host, '');
  assert.equal(parseRequestUrl({ url: 'https://claude.ai/x' }).path, '/x');
});

test('trouble reasons map to the kinds the hub acts on', async () => {
  const { REASONS, troubleKind, TROUBLE_KINDS, makeTrouble } = await import('../../src/adapters/lib/trouble.js');
  const { TROUBLES } = await import('../../src/core/protocol.js');
  assert.deepEqual(TROUBLE_KINDS, TROUBLES);
  assert.equal(troubleKind(REASONS.rateLimit), 'rate_limited');
  assert.equal(troubleKind('Doubao rate limit, too many requests / 豆包限流，请求过于频繁'), 'rate_limited');
  assert.equal(troubleKind('Gemini usage limit reached / Gemini 已达使用上限'), 'rate_limited');
  assert.equal(troubleKind(REASONS.captcha), 'captcha');
  assert.equal(troubleKind(REASONS.login), 'login');
  assert.equal(troubleKind('Gemini session token is stale, reload the page / Gemini 会话令牌已过期，请刷新页面'), 'login');
  assert.equal(troubleKind(REASONS.server(502)), 'site_error');
  assert.equal(troubleKind(REASONS.htmlPage), 'site_error');
  const trouble = makeTrouble({});
  assert.equal(troubleKind(trouble(429, '')), 'rate_limited');
  assert.equal(troubleKind(trouble(403, '<html>cf-chl captcha</html>')), 'captcha');
  assert.equal(troubleKind(trouble(401, '')), 'login');
});

test('a withdrawn reply is content_filter once the receiver accepts that kind, site_error until then', async () => {
  const { troubleKind, TROUBLE_KINDS, CONTENT_FILTER } = await import('../../src/adapters/lib/trouble.js');
  const { CONTENT_FILTERED } = await import('../../src/adapters/deepseek.js');
  const accepting = [...TROUBLE_KINDS, CONTENT_FILTER];
  for (const reason of [CONTENT_FILTERED, 'Qianwen blocked the reply (moderation) / 千问拦截了回复（内容审核）']) {
    assert.equal(troubleKind(reason, accepting), 'content_filter', reason);
    assert.equal(troubleKind(reason), TROUBLE_KINDS.includes(CONTENT_FILTER) ? 'content_filter' : 'site_error', reason);
  }
  assert.equal(troubleKind('rate limited by the site (HTTP 429) / 站点限流（HTTP 429）', accepting), 'rate_limited');
});
