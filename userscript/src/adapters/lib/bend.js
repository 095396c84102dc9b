// Adapters bend before they break (docs/reliability.md): when a site renames the field that carries the text,
// the stream usually still has *one* string field that grows frame after frame (the reply so far),
// or the field a person names in an override. `withFallback(adapter, override)` wraps an adapter so
// that, only when its own parser found no answer, that text is used instead:
//
// - `override.endpoints`: extra path patterns (RegExp sources, matched against the URL path) that
//   are also the chat stream, for an endpoint that moved;
// - `override.text`: `{paths: ['choices.*.delta.content'], mode: 'delta' | 'cumulative'}` — where the
//   text is now (dot paths, `*` for any key or index); `delta` joins every value in order,
//   `cumulative` takes the longest value that extends the ones before;
// - with no `text` override: the single string field that grew over at least three frames, each
//   value extending the one before (the cumulative replies of Gemini, Qwen, old ChatGLM, Doubao's
//   mirror).
// Overrides are data: they come from the userscript manager's storage (`adapter_overrides`, a JSON
// object keyed by adapter name), so a person can follow a site's change without a new release.

import { parseRequestUrl } from './url.js';

const MAX_SCAN_CHARS = 4 * 1024 * 1024;
const MIN_GROWTH_FRAMES = 3;

/** Leaves of a JSON value as [path, string]; strings that are JSON themselves are opened too. */
function leaves(value, path, out, depth = 0) {
  if (depth > 40) return out;
  if (typeof value === 'string') {
    const t = value.trim();
    if ((t.startsWith('{') || t.startsWith('[')) && t.length > 1) {
      try { return leaves(JSON.parse(t), path, out, depth + 1); } catch { /* plain text */ }
    }
    out.push([path, value]);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => leaves(v, [...path, String(i)], out, depth + 1));
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) leaves(v, [...path, k], out, depth + 1);
  }
  return out;
}

/** JSON values found in decoded stream text: SSE `data:` lines, NDJSON, length-prefixed frames, a plain body. */
export function jsonFrames(text) {
  const frames = [];
  const tryParse = (s) => {
    const i = s.search(/[[{]/);
    if (i < 0) return;
    try { frames.push(JSON.parse(s.slice(i))); } catch { /* not a whole JSON value */ }
  };
  const whole = text.trim();
  if (whole.startsWith('{') || whole.startsWith('[')) {
    try { return [JSON.parse(whole)]; } catch { /* a stream of frames */ }
  }
  for (const line of text.split(/\r\n|\r|\n|\u0000|\u0002/)) {
    const l = line.startsWith('data:') ? line.slice(5) : line;
    if (l.trim()) tryParse(l);
  }
  return frames;
}

function pathMatches(pattern, path) {
  if (pattern.length !== path.length) return false;
  return pattern.every((p, i) => p === '*' || p === path[i]);
}

/** The answer text the frames carry at `paths` (override) or in the one growing field (auto). */
export function fallbackText(frames, textOverride) {
  if (textOverride && Array.isArray(textOverride.paths) && textOverride.paths.length) {
    const patterns = textOverride.paths.map((p) => String(p).split('.'));
    const values = [];
    for (const frame of frames) {
      for (const [path, v] of leaves(frame, [], [])) if (patterns.some((p) => pathMatches(p, path))) values.push(v);
    }
    if (textOverride.mode === 'cumulative') return values.reduce((best, v) => (v.length >= best.length ? v : best), '');
    return values.join('');
  }
  // Auto: per field (indexes kept), the chain of values that each extend the previous one.
  const chains = new Map();
  for (const frame of frames) {
    const seenHere = new Set();
    for (const [path, v] of leaves(frame, [], [])) {
      const key = path.join('.');
      if (seenHere.has(key)) continue;
      seenHere.add(key);
      const c = chains.get(key) || { last: '', grew: 0, broken: false };
      if (!c.broken) {
        if (v.length > c.last.length && v.startsWith(c.last)) { c.grew += 1; c.last = v; } else if (v !== c.last) c.broken = true;
      }
      chains.set(key, c);
    }
  }
  const grown = [...chains.values()].filter((c) => !c.broken && c.grew >= MIN_GROWTH_FRAMES);
  if (grown.length === 0) return '';
  grown.sort((a, b) => b.last.length - a.last.length);
  // Two different fields growing to different texts: no way to tell which is the answer.
  if (grown.length > 1 && grown[1].last.length === grown[0].last.length && grown[1].last !== grown[0].last) return '';
  return grown[0].last;
}

/** A matcher for extra endpoint paths (RegExp sources or exact paths), POST unless said otherwise. */
function extraEndpoints(endpoints, methods = ['POST']) {
  const res = endpoints.map((e) => {
    try { return new RegExp(e); } catch { return null; }
  }).filter(Boolean);
  return (url, method) => {
    if (!methods.includes(String(method || 'GET').toUpperCase())) return false;
    const u = parseRequestUrl(url);
    return Boolean(u) && res.some((re) => re.test(u.path));
  };
}

/**
 * The adapter with its fallback and the person's override (or none) applied. The parser's own
 * events pass through unchanged; only a turn that would end with no answer text gets the
 * fallback text (then `done`), so a working adapter behaves exactly as before.
 */
export function withFallback(adapter, override = null) {
  const o = override && typeof override === 'object' ? override : {};
  const extra = Array.isArray(o.endpoints) && o.endpoints.length ? extraEndpoints(o.endpoints, o.methods) : null;
  const base = adapter.createParser;
  return {
    ...adapter,
    override: override || undefined,
    matchRequest: extra ? (url, method) => adapter.matchRequest(url, method) || extra(url, method) : adapter.matchRequest,
    createParser() {
      const parser = base();
      const decoder = new TextDecoder();
      let text = '';
      let answered = false;
      let finished = false;
      const pass = (events) => {
        const out = [];
        for (const ev of events || []) {
          if (finished) break;
          if (ev.type === 'delta' && ev.text) answered = true;
          const terminal = ev.type === 'done' || (ev.type === 'error' && ev.code === 'incomplete');
          if (terminal && !answered) {
            const rescued = fallbackText(jsonFrames(text), o.text);
            if (rescued) {
              answered = true;
              finished = true;
              out.push({ type: 'delta', text: rescued }, { type: 'done' });
              break;
            }
          }
          if (ev.type === 'done' || ev.type === 'error') finished = true;
          out.push(ev);
        }
        return out;
      };
      return {
        push(bytes) {
          if (text.length < MAX_SCAN_CHARS) text += decoder.decode(bytes instanceof Uint8Array ? bytes : new TextEncoder().encode(String(bytes)), { stream: true });
          return pass(parser.push(bytes));
        },
        end() {
          text += decoder.decode();
          return pass(parser.end());
        },
      };
    },
  };
}

/** Reads `adapter_overrides` (an object, or its JSON text) for one adapter; null when none or unreadable. */
export function overrideFor(stored, name) {
  let all = stored;
  if (typeof all === 'string') {
    try { all = JSON.parse(all); } catch { return null; }
  }
  const o = all && typeof all === 'object' ? all[name] : null;
  return o && typeof o === 'object' ? o : null;
}
