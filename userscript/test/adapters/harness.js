// Test helpers: run a parser over chunked bytes and summarise its events; re-chunk streams many ways.

import { createRng } from '../../mock/sites/lib/wire.js';

/** Answers with the hard cases: CJK, emoji (surrogate pairs, ZWJ), quotes, backslashes, SSE look-alikes. */
export const ANSWERS = [
  'Hello! How can I help you today?',
  '我是通义千问，阿里巴巴集团旗下的超大规模语言模型。',
  '你好👋！家人们👨‍👩‍👧‍👦 都好吗？🇨🇳 ok',
  'Line one\nline two\n\n"quoted" \\ back\\slash ]}\' data: [DONE]\n\nevent: close',
  '1, 2, 3, 4, 5 — ½ € ✓ 𝄞 𠀀 end',
  '?<manager run cross-review>! 然后 ?<to yuanbao: 总结>!',
];
export const REASONINGS = ['先想一想：用户在打招呼🤔', 'Let me think step by step.\nOK.'];

/** Feed chunks to a fresh parser; return all events. */
export function runParser(adapter, chunks) {
  const parser = adapter.createParser();
  const events = [];
  for (const c of chunks) events.push(...parser.push(c));
  events.push(...parser.end());
  return events;
}

/** Concatenated answer/reasoning, terminal counts, and whether anything followed the terminal event. */
export function summarize(events) {
  let answer = '';
  let reasoning = '';
  let done = 0;
  const errors = [];
  let afterTerminal = false;
  let terminal = false;
  const images = [];
  for (const e of events) {
    if (terminal) afterTerminal = true;
    if (e.type === 'delta') answer += e.text;
    else if (e.type === 'reasoning') reasoning += e.text;
    else if (e.type === 'image') images.push(e);
    else if (e.type === 'done') {
      done += 1;
      terminal = true;
    } else if (e.type === 'error') {
      errors.push(e);
      terminal = true;
    } else throw new Error(`unknown event type ${e.type}`);
  }
  return { answer, reasoning, done, errors, afterTerminal, images };
}

/** Join chunks into one byte array. */
export function joinChunks(chunks) {
  const total = chunks.reduce((n, c) => n + c.length, 0);
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

/** Cut bytes at random offsets (seeded). */
export function randomChunks(bytes, seed, maxSize = 40) {
  const rng = createRng(seed);
  const out = [];
  let i = 0;
  while (i < bytes.length) {
    const n = rng.int(1, maxSize);
    out.push(bytes.slice(i, i + n));
    i += n;
  }
  return out;
}

/** One byte per read. */
export function byteChunks(bytes) {
  return Array.from(bytes, (b) => Uint8Array.of(b));
}
