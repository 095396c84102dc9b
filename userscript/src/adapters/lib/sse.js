// Server-Sent Events splitter: text in, `{event, data, id}` records out, per the WHATWG event-stream rules.
//
// Lines end with LF, CRLF or a lone CR (a CR at the end of a read waits for the next read, because it may be
// the first half of a CRLF). Lines starting with `:` are comments (keep-alives). Several `data:` lines join
// with "\n". A blank line dispatches the event; at end of body a pending event is dispatched too, because
// some servers close without the last blank line and real clients still show that text.

/** Create a splitter; `push(text)` returns the events completed by that text. */
export function createSseSplitter() {
  let buffer = '';
  let scanned = 0; // characters of `buffer` already searched for a line end
  let event = '';
  let data = [];
  let id = null;
  let hasField = false;

  function dispatch(out) {
    if (hasField && data.length > 0) {
      out.push({ event: event || 'message', data: data.join('\n'), id });
    }
    event = '';
    data = [];
    hasField = false;
  }

  function line(text, out) {
    if (text === '') {
      dispatch(out);
      return;
    }
    if (text.charCodeAt(0) === 58 /* ':' */) return;
    const colon = text.indexOf(':');
    let field = text;
    let value = '';
    if (colon >= 0) {
      field = text.slice(0, colon);
      value = text.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
    }
    hasField = true;
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id') id = value;
  }

  function drain(final) {
    const out = [];
    let start = 0;
    for (let i = scanned; i < buffer.length; i += 1) {
      const c = buffer.charCodeAt(i);
      if (c === 10) {
        line(buffer.slice(start, i), out);
        start = i + 1;
      } else if (c === 13) {
        if (i + 1 >= buffer.length && !final) break; // maybe CRLF split across reads
        line(buffer.slice(start, i), out);
        if (buffer.charCodeAt(i + 1) === 10) i += 1;
        start = i + 1;
      }
    }
    buffer = buffer.slice(start);
    // the unterminated rest has been searched; a trailing CR is searched again with what follows it
    scanned = buffer.length > 0 && buffer.charCodeAt(buffer.length - 1) === 13 ? buffer.length - 1 : buffer.length;
    if (final) {
      if (buffer.length > 0) line(buffer, out);
      buffer = '';
      scanned = 0;
      dispatch(out);
    }
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
