/**
 * Incremental `text/event-stream` reader for the hub's SSE fallback (`GET /events`).
 * Fed text as it arrives (any split, CRLF or LF), it yields each event's joined `data:` lines;
 * comment lines (`: ping`) are keep-alives and yield nothing.
 */
export class EventStreamReader {
  constructor() {
    this.buffer = '';
    this.data = [];
  }

  /** Feeds more text; returns the data strings of the events completed by it. */
  push(text) {
    this.buffer += text;
    const events = [];
    let newline;
    while ((newline = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
      const line = this.buffer.slice(0, newline);
      const sepLen = this.buffer.startsWith('\r\n', newline) ? 2 : 1;
      // A lone trailing '\r' may be the first half of '\r\n': wait for more text.
      if (sepLen === 1 && this.buffer[newline] === '\r' && newline === this.buffer.length - 1) break;
      this.buffer = this.buffer.slice(newline + sepLen);
      this.line(line, events);
    }
    return events;
  }

  line(line, events) {
    if (line === '') {
      if (this.data.length) events.push(this.data.join('\n'));
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
  }
}
