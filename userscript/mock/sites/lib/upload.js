// Uploads on the mock sites: the server side of each site's upload requests (the page side is in page.js,
// `cfg.upload`). A site definition's `upload` holds the page's composer facts (file input and its accept
// list, drop/paste, chip/spinner/error markup, limits and the site's refusal messages), `send`: the page's
// own upload code (JS source of `function (file, ctx) → Promise<{id}>`, the site's real request sequence),
// and `api`: the routes that answer it, `[{method, path: RegExp, handle(ctx) → {status?, json?}}]`.
//
// ctx in a route: {method, path, query, headers, body: Buffer, json(), multipart(), id(), keep(key, value),
// kept(key), take({id, name, type, bytes}) → the outcome queued with `nextUpload` (or null: accepted)}.
// `take` is called by the request that carries the bytes; the server records the file (name, type, size,
// sha256) for the tests, and answers it only after UPLOAD_DELAY_MS so the page's spinner is seen.

import { createHash } from 'node:crypto';

export const UPLOAD_DELAY_MS = 250;

/** `accept` attribute values (and what the adapters list) for the common cases. */
export const IMAGES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'];
export const DOCS = ['application/pdf', '.pdf', '.txt', '.md', '.doc', '.docx', '.xls', '.xlsx', '.ppt', '.pptx', '.csv', '.json'];

export const MB = 1024 * 1024;

/** Parses a multipart/form-data body: `{fields: {name: text}, files: [{field, filename, type, data}]}`. */
export function parseMultipart(body, contentType) {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType || '');
  const out = { fields: {}, files: [] };
  if (!m) return out;
  const boundary = Buffer.from(`--${m[1] || m[2]}`);
  let at = body.indexOf(boundary);
  while (at !== -1) {
    const start = at + boundary.length;
    if (body.slice(start, start + 2).toString() === '--') break;
    const headEnd = body.indexOf('\r\n\r\n', start);
    if (headEnd === -1) break;
    const head = body.slice(start, headEnd).toString('utf8');
    const next = body.indexOf(boundary, headEnd + 4);
    const data = body.slice(headEnd + 4, next === -1 ? body.length : next - 2);
    const name = /name="([^"]*)"/i.exec(head)?.[1] ?? '';
    const filename = /filename="([^"]*)"/i.exec(head)?.[1];
    const type = /content-type:\s*([^\r\n]+)/i.exec(head)?.[1]?.trim() || '';
    if (filename !== undefined) out.files.push({ field: name, filename, type, data });
    else out.fields[name] = data.toString('utf8');
    at = next;
  }
  return out;
}

export const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
