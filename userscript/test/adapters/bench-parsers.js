// Parser throughput benchmark (prints figures, asserts nothing but correctness of the text):
//   node userscript/test/adapters/bench-parsers.js
// Each site's default mock stream for a long answer (35 200 characters; 6 000 for the cumulative sites,
// whose wire size grows with the square of the answer) is fed in 16 KiB reads; best of three runs.
import { adapters } from '../../src/adapters/index.js';
import { sites } from '../../mock/sites/index.js';
const big = '这是一个很长的回答，包含中文和 emoji 😀 and English words. '.repeat(800);
const cumulativeSites = new Set(['qianwen', 'gemini']);
for (const site of sites) {
  const a = adapters.find((x) => x.name === site.name);
  const answer = cumulativeSites.has(site.name) ? big.slice(0, 6000) : big;
  const chunks = site.stream({ answer, reasoning: 'think', variant: site.variants[0], seed: 1 });
  const total = chunks.reduce((n, c) => n + c.length, 0);
  const all = new Uint8Array(total); let o = 0; for (const c of chunks) { all.set(c, o); o += c.length; }
  const reads = []; for (let i = 0; i < total; i += 16384) reads.push(all.subarray(i, i + 16384));
  const runs = [];
  for (let r = 0; r < 3; r++) { const t = performance.now(); const p = a.createParser(); let text=''; for (const c of reads) for (const e of p.push(c)) if (e.type==='delta') text += e.text; p.end(); runs.push(performance.now() - t); if (text !== answer) throw new Error(site.name); }
  const ms = Math.min(...runs);
  console.log(`${site.name.padEnd(9)} ${String(answer.length).padStart(6)} chars  ${(total / 1e6).toFixed(2).padStart(6)} MB  16 KiB reads  ${ms.toFixed(1).padStart(7)} ms  ${(total / 1e6 / (ms / 1000)).toFixed(1).padStart(6)} MB/s`);
}
