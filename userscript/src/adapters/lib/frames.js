// Length-prefixed JSON frames (Gemini's StreamGenerate body): `)]}'`, then repeated `<length>\n<JSON>\n`.
//
// Google's exact length counting is unverified (UTF-16 units of "\n"+JSON in one client, bytes in others),
// so the number is read as a frame marker only and each frame ends where its JSON value closes: a small
// bracket scanner that respects strings and escapes. That works for every counting rule and for clients
// that read line by line.

const XSSI_PREFIX = ")]}'";

/** Create a reader; `push(text)` returns the parsed JSON values of the frames it completes. */
export function createLengthPrefixedReader() {
  let buffer = '';
  let prefixChecked = false;
  let scan = null; // resumable bracket scan of the frame being received: {start, pos, depth, inString}

  function skipPrefix() {
    if (prefixChecked) return true;
    const trimmed = buffer.replace(/^\uFEFF/, '');
    if (trimmed.length < XSSI_PREFIX.length && XSSI_PREFIX.startsWith(trimmed)) return false;
    if (trimmed.startsWith(XSSI_PREFIX)) buffer = trimmed.slice(XSSI_PREFIX.length);
    prefixChecked = true;
    return true;
  }

  function next(final) {
    if (scan) return finishFrame(scan, null, final);
    let i = 0;
    while (i < buffer.length && /\s/.test(buffer[i])) i += 1;
    let digits = i;
    while (digits < buffer.length && buffer.charCodeAt(digits) >= 48 && buffer.charCodeAt(digits) <= 57) digits += 1;
    if (digits === buffer.length && !final) return undefined; // the length line is still arriving
    let j = digits;
    while (j < buffer.length && /\s/.test(buffer[j])) j += 1;
    if (j >= buffer.length) return undefined;
    const length = digits > i ? Number(buffer.slice(i, digits)) : null;
    return finishFrame({ start: j, pos: j, depth: 0, inString: false }, length, final);
  }

  function finishFrame(state, length, final) {
    const end = scanJsonValue(buffer, state.start, state);
    if (end < 0) {
      scan = state; // resume here when more text arrives (frames can be large cumulative snapshots)
      if (final) throw new SyntaxError('truncated frame at end of body / 数据帧在结尾被截断');
      return undefined;
    }
    scan = null;
    const text = buffer.slice(state.start, end);
    buffer = buffer.slice(end);
    return { length, value: JSON.parse(text) };
  }

  function drain(final) {
    const out = [];
    if (!skipPrefix()) return out;
    for (;;) {
      const frame = next(final);
      if (frame === undefined) break;
      out.push(frame.value);
    }
    if (final) buffer = '';
    return out;
  }

  return {
    push(text) {
      buffer += text;
      return drain(false);
    },
    end() {
      return drain(true);
    },
  };
}

/**
 * Index just past the JSON array/object/string/literal that starts at `start`, or -1 when it is not complete
 * yet. Only arrays and objects are expected at frame level; other values end at the next whitespace. `state`
 * (`{pos, depth, inString}`) lets a caller resume an incomplete scan instead of starting over.
 */
export function scanJsonValue(text, start, state = { pos: start, depth: 0, inString: false }) {
  const first = text[start];
  if (first !== '[' && first !== '{') {
    const m = /\s/.exec(text.slice(start));
    return m ? start + m.index : -1;
  }
  let { depth, inString } = state;
  let i = state.pos;
  for (; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \\ */) {
        if (i + 1 >= text.length) break; // the escaped character has not arrived yet
        i += 1;
      } else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) depth += 1;
    else if (c === 93 || c === 125) {
      depth -= 1;
      if (depth === 0) return i + 1;
    }
  }
  state.pos = i;
  state.depth = depth;
  state.inString = inString;
  return -1;
}
