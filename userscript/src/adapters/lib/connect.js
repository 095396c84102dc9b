// Connect protocol streaming frames (Kimi's www.kimi.com gateway): 1 byte flags, 4 byte big-endian length,
// then that many bytes of JSON. Flag 0x02 marks the end-of-stream trailer; 0x01 marks a compressed payload,
// which a browser page would have negotiated explicitly and is reported rather than misread.

const HEADER = 5;

/** Create a reader; `push(bytes)` returns `{flags, end, json}` for every frame it completes. */
export function createConnectReader() {
  let buffer = new Uint8Array(0);
  const decoder = new TextDecoder('utf-8');

  function append(bytes) {
    if (buffer.length === 0) {
      buffer = bytes.slice();
      return;
    }
    const joined = new Uint8Array(buffer.length + bytes.length);
    joined.set(buffer, 0);
    joined.set(bytes, buffer.length);
    buffer = joined;
  }

  function drain() {
    const out = [];
    let offset = 0;
    while (buffer.length - offset >= HEADER) {
      const flags = buffer[offset];
      const view = new DataView(buffer.buffer, buffer.byteOffset + offset + 1, 4);
      const length = view.getUint32(0, false);
      if (buffer.length - offset - HEADER < length) break;
      const payload = buffer.subarray(offset + HEADER, offset + HEADER + length);
      offset += HEADER + length;
      if (flags & 0x01) {
        out.push({ flags, end: Boolean(flags & 0x02), json: null, compressed: true });
        continue;
      }
      const text = decoder.decode(payload);
      out.push({ flags, end: Boolean(flags & 0x02), json: text.trim() === '' ? {} : JSON.parse(text) });
    }
    buffer = buffer.slice(offset);
    return out;
  }

  return {
    push(bytes) {
      append(bytes);
      return drain();
    },
    /** Bytes left over at end of body (a truncated frame) — 0 for a well-formed stream. */
    end() {
      const out = drain();
      const leftover = buffer.length;
      buffer = new Uint8Array(0);
      return { frames: out, leftover };
    },
  };
}

/** Encode one Connect frame (used by the mocks and tests). */
export function encodeConnectFrame(json, flags = 0) {
  const payload = new TextEncoder().encode(typeof json === 'string' ? json : JSON.stringify(json));
  const frame = new Uint8Array(HEADER + payload.length);
  frame[0] = flags;
  new DataView(frame.buffer).setUint32(1, payload.length, false);
  frame.set(payload, HEADER);
  return frame;
}
