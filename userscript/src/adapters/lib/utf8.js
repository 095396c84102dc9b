// Streaming UTF-8 decoding: a multi-byte character split across reads is held until its last byte arrives.

/** A decoder that keeps partial characters between pushes (TextDecoder with `stream: true`). */
export function createUtf8Decoder() {
  const decoder = new TextDecoder('utf-8');
  return {
    /** Decode one read; returns the complete characters it finishes. */
    decode(bytes) {
      if (!bytes || bytes.length === 0) return '';
      return decoder.decode(bytes, { stream: true });
    },
    /** Flush at end of body; a dangling partial character becomes U+FFFD. */
    flush() {
      return decoder.decode();
    },
  };
}

/** Accept Uint8Array, ArrayBuffer, other typed arrays or a string (tests, XHR text) as bytes. */
export function toBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === 'string') return new TextEncoder().encode(chunk);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError('stream chunk must be bytes / 数据块必须是字节');
}
