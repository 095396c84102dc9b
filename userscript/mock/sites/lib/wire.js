// Building blocks for mock chat sites: a seeded random source, answer tokenisation, SSE event text, and the
// hostile chunking every mock applies (cuts inside JSON, inside multi-byte characters and emoji, several
// events per read, keep-alive comments, CRLF line ends) — deterministic for a given seed.

const encoder = new TextEncoder();

/** mulberry32: small, fast, deterministic. Returns floats in [0, 1). */
export function createRng(seed = 1) {
  let a = (Number(seed) >>> 0) || 0x9e3779b9;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  next.chance = (p) => next() < p;
  return next;
}

/** Split text into model-sized tokens of 1–6 code points (never splitting a surrogate pair). */
export function tokenize(text, rng) {
  const chars = Array.from(text || '');
  const tokens = [];
  let i = 0;
  while (i < chars.length) {
    const n = rng.int(1, 6);
    tokens.push(chars.slice(i, i + n).join(''));
    i += n;
  }
  return tokens;
}

/** Cumulative prefixes of the tokens (for sites that resend the whole text so far). */
export function cumulative(tokens) {
  const out = [];
  let acc = '';
  for (const t of tokens) {
    acc += t;
    out.push(acc);
  }
  return out;
}

/**
 * One SSE event as text. `fields` is `{id?, event?, data}`; `data` strings containing "\n" become several
 * `data:` lines. `space: false` writes `data:x` like Qianwen CN.
 */
export function sseEvent({ id, event, data }, { space = true } = {}) {
  const sep = space ? ': ' : ':';
  let text = '';
  if (id !== undefined) text += `id${sep}${id}\n`;
  if (event !== undefined) text += `event${sep}${event}\n`;
  for (const line of String(data).split('\n')) text += `data${sep}${line}\n`;
  return `${text}\n`;
}

/**
 * Turn a list of SSE event texts into the bytes of a hostile stream: keep-alive comments between some
 * events (when `comments`), CRLF line ends (when `crlf`), then cut at random byte offsets.
 */
export function hostileSse(events, rng, { comments = true, crlf = rng.chance(0.5) } = {}) {
  let text = '';
  for (const e of events) {
    if (comments && rng.chance(0.25)) text += ': keep-alive\n\n';
    text += e;
  }
  if (crlf) text = text.replace(/\n/g, '\r\n');
  return hostileChunks(encoder.encode(text), rng);
}

/**
 * Cut bytes into reads of mixed sizes: single bytes, small pieces, and large reads holding several events.
 * At least one cut falls inside a multi-byte UTF-8 character when the stream has one.
 */
export function hostileChunks(bytes, rng) {
  const cuts = new Set();
  let pos = 0;
  while (pos < bytes.length) {
    const r = rng();
    const size = r < 0.3 ? rng.int(1, 3) : r < 0.75 ? rng.int(4, 60) : rng.int(61, 900);
    pos += size;
    if (pos < bytes.length) cuts.add(pos);
  }
  // up to three cuts inside multi-byte characters, found by probing (streams can be many megabytes)
  let found = 0;
  for (let probe = 0; probe < 64 && found < 3 && bytes.length > 1; probe += 1) {
    let i = rng.int(1, bytes.length - 1);
    const stop = Math.min(bytes.length, i + 4096);
    while (i < stop && (bytes[i] & 0xc0) !== 0x80) i += 1;
    if (i < stop) {
      cuts.add(i);
      found += 1;
    }
  }
  const sorted = [...cuts].sort((a, b) => a - b);
  const chunks = [];
  let start = 0;
  for (const c of sorted) {
    chunks.push(bytes.slice(start, c));
    start = c;
  }
  chunks.push(bytes.slice(start));
  return chunks.filter((c) => c.length > 0);
}

/** UTF-8 bytes of a string. */
export function utf8(text) {
  return encoder.encode(text);
}

/** Concatenate byte arrays. */
export function concatBytes(parts) {
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** JSON with a space after every `:` and `,` outside strings (DeepSeek's 2025-11 / ChatGPT's spacing). */
export function spacedJson(value) {
  if (Array.isArray(value)) return `[${value.map(spacedJson).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}: ${spacedJson(v)}`)
      .join(', ')}}`;
  }
  return JSON.stringify(value);
}

/** Shared `stream()` arguments: seed → rng, tokens of the answer and of the reasoning. */
export function prepare({ answer = '', reasoning = '', variant = 'default', seed = 1 } = {}, variants) {
  if (!variants.includes(variant)) {
    throw new Error(`unknown mock variant "${variant}" (known: ${variants.join(', ')}) / 未知的模拟变体`);
  }
  const rng = createRng(seed);
  return { rng, variant, answer, reasoning, tokens: tokenize(answer, rng), thinkTokens: tokenize(reasoning, rng) };
}
