// Citation markers a page draws as badges, not text: DeepSeek's `[reference:N]` (2026 search) and
// `[citation:N]` (2025). They are dropped from the answer as it streams (a marker may be cut across reads
// or frames), and the sources the site sent are listed after the answer under `来源 / Sources`.

const MARKER = /\[(reference|citation):(\d{1,6})\]/g;
const PREFIXES = ['[reference:', '[citation:'];
const LONGEST = '[reference:'.length + 6;

/** True when `tail` (starting with `[`) may still grow into a marker. */
function couldBeMarker(tail) {
  if (tail.length > LONGEST) return false;
  for (const p of PREFIXES) {
    if (p.startsWith(tail)) return true;
    if (tail.startsWith(p) && /^\d*$/.test(tail.slice(p.length))) return true;
  }
  return false;
}

/**
 * A streaming marker filter: `push(text)` → `{text, markers}` (the text safe to show now, and the markers
 * removed, `{kind: 'reference'|'citation', n}`); a tail that may be the start of a marker is held until the
 * next push; `flush()` returns what is held (at the end of the answer it was plain text).
 */
export function createMarkerFilter() {
  let held = '';
  return {
    push(text) {
      const markers = [];
      if (typeof text !== 'string' || text === '') return { text: '', markers };
      let s = (held + text).replace(MARKER, (_, kind, n) => {
        markers.push({ kind, n: Number(n) });
        return '';
      });
      held = '';
      const i = s.lastIndexOf('[');
      if (i >= 0 && couldBeMarker(s.slice(i))) {
        held = s.slice(i);
        s = s.slice(0, i);
      }
      return { text: s, markers };
    },
    flush() {
      const s = held;
      held = '';
      return s;
    },
  };
}

/**
 * The sources block that follows an answer: `\n\n来源 / Sources\n1. title — url\n…`, numbered in the order
 * given, one line per distinct http(s) URL; '' when there is none.
 */
export function sourcesBlock(sources) {
  const seen = new Set();
  const lines = [];
  for (const s of Array.isArray(sources) ? sources : []) {
    if (!s || typeof s !== 'object' || typeof s.url !== 'string') continue;
    const url = s.url.trim();
    if (!/^https?:\/\/\S+$/i.test(url) || seen.has(url)) continue;
    seen.add(url);
    const title = typeof s.title === 'string' ? s.title.replace(/\s+/g, ' ').trim() : '';
    lines.push(`${lines.length + 1}. ${title ? `${title} — ${url}` : url}`);
  }
  return lines.length ? `\n\n来源 / Sources\n${lines.join('\n')}` : '';
}
