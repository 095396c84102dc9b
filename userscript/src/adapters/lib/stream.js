// The parser shell every adapter shares: bytes → decoded text → site records → `{type:…}` events, with one
// terminal event per turn (exactly one `done`, or one `error`) and nothing emitted after it.

import { createUtf8Decoder, toBytes } from './utf8.js';
import { createSseSplitter } from './sse.js';

export const INCOMPLETE =
  'the reply stream ended before the site marked it finished / 回复流在站点标记完成之前就结束了';

/** Event collector handed to site handlers; it enforces "one terminal event, nothing after it". */
export function createOutput() {
  const events = [];
  let finished = false;
  return {
    delta(text) {
      if (!finished && typeof text === 'string' && text !== '') events.push({ type: 'delta', text });
    },
    reasoning(text) {
      if (!finished && typeof text === 'string' && text !== '') events.push({ type: 'reasoning', text });
    },
    /** An image of the answer (lib/images.js): `{url, alt}`, or `{pending: true, alt}` for one the page shows. */
    image({ url, alt, pending } = {}) {
      if (finished) return;
      if (pending) events.push({ type: 'image', pending: true, alt: String(alt ?? '') });
      else if (typeof url === 'string' && url !== '') events.push({ type: 'image', url, alt: String(alt ?? '') });
    },
    done() {
      if (finished) return;
      finished = true;
      events.push({ type: 'done' });
    },
    error(reason, code) {
      if (finished) return;
      finished = true;
      const event = { type: 'error', reason: String(reason) };
      if (code !== undefined && code !== null && code !== '') event.code = String(code);
      events.push(event);
    },
    get finished() {
      return finished;
    },
    take() {
      return events.splice(0, events.length);
    },
  };
}

/** JSON.parse that answers `undefined` for text that is not JSON (markers, keep-alive payloads). */
export function parseJson(text) {
  if (typeof text !== 'string') return undefined;
  const t = text.trim();
  if (t === '') return undefined;
  const c = t[0];
  if (c !== '{' && c !== '[' && c !== '"' && t !== 'true' && t !== 'false' && !/^-?\d/.test(t)) return undefined;
  try {
    return JSON.parse(t);
  } catch {
    return undefined;
  }
}

/**
 * Close a turn at end of body: a stream that never reached its end marker is `done` for sites whose end is
 * the body closing, otherwise an error; a body that was a trouble page (login JSON, HTML) says why.
 */
export function finishAtEof(out, { eofIsDone, trouble, sample }) {
  if (out.finished) return;
  const reason = trouble ? trouble(200, sample) : null;
  if (reason) out.error(reason, 'trouble');
  else if (eofIsDone) out.done();
  else out.error(INCOMPLETE, 'incomplete');
}

/**
 * Build `createParser` for an SSE site. `onEvent({event, data, id}, out, ctx)` handles one SSE record;
 * `ctx` is a per-turn object the handler may use for state. A record whose handler throws (a malformed frame)
 * is skipped: one bad frame must not lose the rest of the reply. `atEof(out, ctx)` may end the turn at end of
 * body from what the handler saw (e.g. a stop reason without the final marker).
 */
export function sseParser({ onEvent, eofIsDone = false, trouble = null, init = () => ({}), atEof = null }) {
  return function createParser() {
    const decoder = createUtf8Decoder();
    const splitter = createSseSplitter();
    const out = createOutput();
    const ctx = init();
    let sample = '';
    const handle = (records) => {
      for (const record of records) {
        if (out.finished) break;
        try {
          onEvent(record, out, ctx);
        } catch {
          // a malformed record is skipped
        }
      }
    };
    const feed = (text) => {
      if (sample.length < 4096) sample += text.slice(0, 4096 - sample.length);
      handle(splitter.push(text));
    };
    return {
      push(bytes) {
        feed(decoder.decode(toBytes(bytes)));
        return out.take();
      },
      end() {
        feed(decoder.flush());
        handle(splitter.end());
        if (atEof && !out.finished) atEof(out, ctx);
        finishAtEof(out, { eofIsDone, trouble, sample });
        return out.take();
      },
    };
  };
}

/** Read a nested value: `dig(obj, 'a', 0, 'b')`, undefined when any step is missing. */
export function dig(value, ...keys) {
  let v = value;
  for (const k of keys) {
    if (v === null || v === undefined) return undefined;
    if (typeof k === 'number' && Array.isArray(v) && k < 0) v = v[v.length + k];
    else v = v[k];
  }
  return v;
}
