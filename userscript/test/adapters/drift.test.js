// Drifted bytes fed to every adapter (issue 28): each site's mock stream with its text field renamed,
// and a plain JSON body instead of the stream, go through the adapter (with its growing-field fallback)
// and the turn capture. Each ends in the exact answer or in a parser miss that names the adapter —
// never an empty `turn_end`, never site trouble, never a wrong text. An override (data, not code)
// brings the answer back, and a moved endpoint is matched once the override names it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { adapters } from '../../src/adapters/index.js';
import { sites } from '../../mock/sites/index.js';
import { TurnCapture } from '../../src/core/capture.js';
import { overrideFor, withFallback } from '../../src/adapters/lib/bend.js';
import { canDrift, driftChunks, MOVED_PREFIX } from '../../mock/sites/lib/drift.js';

const ANSWER = 'Drift answer 漂移回答: 1. one\n2. two ✅';

/** Feeds `chunks` to a capture of `adapter`; returns what the hub and the tab saw. */
function capture(adapter, chunks, contentType) {
  const sent = [];
  const events = [];
  const cap = new TurnCapture({ adapter, hub: { send: (f) => sent.push(f) }, log: () => {}, claimTask: () => 'task-d' });
  cap.on((kind, turn, detail) => events.push([kind, detail]));
  const sink = cap.begin({ status: 200, contentType });
  for (const c of chunks) sink.push(new Uint8Array(c));
  sink.end();
  const end = sent.find((f) => f.type === 'turn_end');
  const miss = events.find(([k]) => k === 'parser_miss');
  const trouble = events.find(([k]) => k === 'trouble');
  return { end, miss, trouble };
}

const outcomes = {};
for (const site of sites) {
  const base = adapters.find((a) => a.name === site.name);
  if (!base) continue;
  const adapter = withFallback(base);
  const contentType = site.variantMeta?.default?.contentType || site.contentType;
  for (const mode of ['field', 'json']) {
    if (!canDrift(site.name, mode)) continue;
    test(`${site.name} × ${mode} drift: the answer or a parser miss naming the adapter, never an empty success`, () => {
      const chunks = site.stream({ answer: ANSWER, variant: 'default', seed: 7 });
      const drifted = driftChunks(site.name, mode, chunks, { answer: ANSWER, contentType });
      const { end, miss, trouble } = capture(adapter, drifted.chunks, drifted.contentType);
      assert.equal(trouble, undefined, `not site trouble: ${JSON.stringify(trouble)}`);
      if (end) {
        assert.equal(end.text, ANSWER, 'a rescued answer is the exact answer');
        assert.equal(end.source, 'network');
        assert.equal(miss, undefined);
      } else {
        assert.ok(miss, 'no turn_end means a parser miss');
        assert.match(miss[1].reason, new RegExp(`^parser_miss: ${site.name} adapter found no answer`));
      }
      outcomes[`${site.name}/${mode}`] = end ? 'answer' : 'parser_miss';
    });
  }
  test(`${site.name}: the undrifted stream still gives the exact answer through the fallback wrapper`, () => {
    const chunks = site.stream({ answer: ANSWER, variant: 'default', seed: 7 });
    const { end } = capture(adapter, chunks, contentType);
    assert.equal(end?.text, ANSWER);
  });
}

test('doubao keeps answering through its tts mirror when its text field is renamed', () => {
  assert.equal(outcomes['doubao/field'], 'answer');
});

test('a growing field rescues a cumulative stream whose text key was renamed (qianwen)', () => {
  assert.equal(outcomes['qianwen/field'], 'answer');
});

test('plain JSON instead of the stream is a parser miss on every site', (t) => {
  t.diagnostic(`outcomes: ${JSON.stringify(outcomes)}`);
  for (const [key, v] of Object.entries(outcomes)) if (key.endsWith('/json')) assert.equal(v, 'parser_miss', key);
});

test('an override (stored JSON) names the new text field and the moved endpoint', () => {
  const stored = JSON.stringify({ deepseek: { endpoints: [`^${MOVED_PREFIX}/api/v0/chat/completion$`], text: { paths: ['data.answer'] } } });
  const base = adapters.find((a) => a.name === 'deepseek');
  const adapter = withFallback(base, overrideFor(stored, 'deepseek'));
  assert.equal(base.matchRequest(`https://chat.deepseek.com${MOVED_PREFIX}/api/v0/chat/completion`, 'POST'), false);
  assert.equal(adapter.matchRequest(`https://chat.deepseek.com${MOVED_PREFIX}/api/v0/chat/completion`, 'POST'), true);
  assert.equal(adapter.matchRequest(`${MOVED_PREFIX}/api/v0/chat/completion`, 'GET'), false, 'POST only');
  const site = sites.find((s) => s.name === 'deepseek');
  const drifted = driftChunks('deepseek', 'json', site.stream({ answer: ANSWER }), { answer: ANSWER });
  const { end } = capture(adapter, drifted.chunks, drifted.contentType);
  assert.equal(end?.text, ANSWER);
  assert.equal(overrideFor('not json', 'deepseek'), null);
  assert.equal(overrideFor({ kimi: {} }, 'deepseek'), null);
});
