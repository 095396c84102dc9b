// Every mock site × every variant, through the matching adapter's parser, chunked many ways: the deltas
// equal the answer byte for byte, reasoning is separate, exactly one `done` (or the expected error).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { adapters, adapterForHost } from '../../src/adapters/index.js';
import { sites } from '../../mock/sites/index.js';
import { ANSWERS, REASONINGS, byteChunks, joinChunks, randomChunks, runParser, summarize } from './harness.js';

function check(adapter, site, variant, chunks, answer, reasoning, label) {
  const s = summarize(runParser(adapter, chunks));
  const expectError = site.errorVariants && site.errorVariants[variant];
  assert.equal(s.afterTerminal, false, `${label}: events after the terminal event`);
  if (expectError) {
    assert.equal(s.done, 0, `${label}: error stream must not be done`);
    assert.equal(s.errors.length, 1, `${label}: exactly one error`);
    assert.equal(s.errors[0].code, String(expectError), `${label}: error code`);
    assert.ok(s.errors[0].reason.length > 0, `${label}: error reason`);
    return;
  }
  assert.deepEqual(s.errors, [], `${label}: no error`);
  assert.equal(s.done, 1, `${label}: exactly one done`);
  assert.equal(s.answer, answer, `${label}: answer`);
  const wantsReasoning = (site.reasoningVariants || []).includes(variant);
  assert.equal(s.reasoning, wantsReasoning ? reasoning : '', `${label}: reasoning`);
}

test('every mock site has an adapter with the same name and hosts', () => {
  assert.equal(adapters.length, sites.length);
  for (const site of sites) {
    const adapter = adapters.find((a) => a.name === site.name);
    assert.ok(adapter, `adapter for ${site.name}`);
    for (const host of site.hosts) assert.equal(adapterForHost(host), adapter, host);
  }
});

for (const site of sites) {
  const adapter = adapters.find((a) => a.name === site.name);
  for (const variant of site.variants) {
    test(`${site.name} / ${variant}: answer byte for byte under hostile chunkings`, () => {
      let seed = 1;
      for (const answer of ANSWERS) {
        for (const reasoning of REASONINGS) {
          seed += 1;
          const chunks = site.stream({ answer, reasoning, variant, seed });
          assert.ok(chunks.every((c) => c instanceof Uint8Array), 'mock yields Uint8Array chunks');
          const label = `${site.name}/${variant} seed ${seed}`;
          check(adapter, site, variant, chunks, answer, reasoning, `${label} (mock chunks)`);
          const bytes = joinChunks(chunks);
          check(adapter, site, variant, [bytes], answer, reasoning, `${label} (one read)`);
          for (let k = 0; k < 4; k += 1) {
            check(adapter, site, variant, randomChunks(bytes, seed * 31 + k, k === 0 ? 3 : 64), answer, reasoning, `${label} (random ${k})`);
          }
        }
      }
    });
    test(`${site.name} / ${variant}: byte at a time`, () => {
      const answer = ANSWERS[2] + ANSWERS[3];
      const chunks = site.stream({ answer, reasoning: REASONINGS[0], variant, seed: 99 });
      check(adapter, site, variant, byteChunks(joinChunks(chunks)), answer, REASONINGS[0], `${site.name}/${variant} bytewise`);
    });
    test(`${site.name} / ${variant}: stream is deterministic for a seed`, () => {
      const a = joinChunks(site.stream({ answer: ANSWERS[1], reasoning: REASONINGS[1], variant, seed: 7 }));
      const b = joinChunks(site.stream({ answer: ANSWERS[1], reasoning: REASONINGS[1], variant, seed: 7 }));
      assert.deepEqual(a, b);
    });
  }
}

test('a stream cut off before its end marker is an error, not a done', () => {
  for (const site of sites) {
    const adapter = adapters.find((a) => a.name === site.name);
    const variant = site.variants[0];
    const bytes = joinChunks(site.stream({ answer: ANSWERS[0], reasoning: '', variant, seed: 5 }));
    const truncated = bytes.slice(0, Math.floor(bytes.length / 3));
    const s = summarize(runParser(adapter, [truncated]));
    assert.equal(s.done + s.errors.length, 1, `${site.name}: one terminal event`);
    if (!site.eofIsDone) assert.equal(s.errors[0] && s.errors[0].code, 'incomplete', `${site.name}: incomplete`);
  }
});

test('echoes of the prompt, titles and other meta events never reach the answer or the reasoning', () => {
  const marker = 'ECHO-探针-7f3a';
  for (const site of sites) {
    const adapter = adapters.find((a) => a.name === site.name);
    for (const variant of site.variants) {
      if (site.errorVariants && site.errorVariants[variant]) continue;
      const chunks = site.stream({ answer: 'OK', reasoning: 'R', variant, seed: 11, prompt: marker });
      const wire = new TextDecoder().decode(joinChunks(chunks));
      const s = summarize(runParser(adapter, chunks));
      assert.equal(s.answer, 'OK', `${site.name}/${variant}`);
      assert.ok(!s.reasoning.includes(marker), `${site.name}/${variant}: reasoning`);
      const echoes = (['doubao', 'kimi', 'chatgpt', 'yiyan'].includes(site.name) && variant !== 'samantha'); // xinghuo's tool piece echoes it base64-encoded
      if (echoes) {
        assert.ok(wire.includes(marker), `${site.name}/${variant}: the mock really echoes the prompt`);
      }
    }
  }
});

test('mock streams are hostile: cuts inside characters and JSON, several events per read, comments, CRLF', () => {
  const dec = new TextDecoder();
  for (const site of sites) {
    for (const variant of site.variants) {
      const sse = /event-stream/.test(site.variantMeta[variant].contentType);
      const seen = { midChar: false, midJson: false, midPiece: false, multi: false, comment: false, crlf: false, nonAscii: false };
      for (let seed = 1; seed <= 8; seed += 1) {
        const chunks = site.stream({ answer: ANSWERS[1] + ANSWERS[2], reasoning: REASONINGS[0], variant, seed });
        let before = '';
        for (const c of chunks) {
          if ((c[0] & 0xc0) === 0x80) seen.midChar = true;
          // a read that starts inside a `data:` payload (base64 sites: inside a piece)
          if (/(^|\n)data:[^\n\r]+$/.test(before) && /^[A-Za-z0-9+/=]/.test(dec.decode(c))) seen.midPiece = true;
          before = (before + dec.decode(c)).slice(-4096);
          const text = dec.decode(c);
          if (/^[^{[]*[}\]"]/.test(text) && /[{[]/.test(dec.decode(chunks[0]))) seen.midJson = true;
          if ((text.match(/\r?\n\r?\n/g) || []).length >= 2) seen.multi = true;
        }
        const bytes = joinChunks(chunks);
        if (bytes.some((b) => b >= 0x80)) seen.nonAscii = true;
        const all = dec.decode(bytes);
        if (/^: keep-alive/m.test(all)) seen.comment = true;
        if (all.includes('\r\n')) seen.crlf = true;
      }
      const label = `${site.name}/${variant}`;
      if (seen.nonAscii) assert.ok(seen.midChar, `${label}: a read starts inside a multi-byte character`);
      if (site.base64Frames) assert.ok(seen.midPiece, `${label}: a read starts inside a base64 piece`);
      else assert.ok(seen.midJson, `${label}: a read starts inside JSON`);
      if (sse) {
        assert.ok(seen.multi, `${label}: a read holds several events`);
        assert.ok(seen.comment, `${label}: keep-alive comments`);
        assert.ok(seen.crlf, `${label}: CRLF line ends`);
      }
    }
  }
});
