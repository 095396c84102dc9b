// Images in a reply, as they come back to the hub (docs/files.md "Back / 回传"): each image is one Markdown
// image link `![alt](url)` in the answer text, once, with an absolute http(s) URL the hub can pass on. A
// `data:` image up to DATA_URL_MAX characters goes as it is; a larger one, a `blob:` URL (it only lives in
// the page) or anything else becomes the note `[图片 image: alt]`, so the reader knows an image was there.
// The parsers report images as `{type: 'image', url, alt}` events (stream.js `out.image`); an image the
// stream announces without a usable address (ChatGPT's `sediment://` asset pointers) is `{pending: true}`:
// the page is read for it at the end of the turn (src/core/dom-fallback.js `replyImages`).

/** The longest `data:` image URL sent as it is (characters; about 48 KB of image). */
export const DATA_URL_MAX = 65_536;

const DATA_IMAGE = /^data:image\/(png|jpe?g|gif|webp);base64,[A-Za-z0-9+/=\s]+$/i;

/**
 * The URL as the hub gets it: absolute http(s) (resolved against `base`), a small `data:` image, or
 * null when it is not usable outside the page (`blob:`, a large `data:`, `javascript:`, an asset pointer).
 */
export function usableUrl(raw, base) {
  if (typeof raw !== 'string') return null;
  const s = raw.trim();
  if (s === '') return null;
  if (/^data:/i.test(s)) return s.length <= DATA_URL_MAX && DATA_IMAGE.test(s) ? s.replace(/\s+/g, '') : null;
  let url;
  try {
    url = base ? new URL(s, base) : new URL(s);
  } catch {
    return null;
  }
  return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
}

/** Alt text that cannot end the Markdown link early: one line, brackets escaped, at most 200 characters. */
export function altText(alt) {
  const one = String(alt ?? '').replace(/\s+/g, ' ').trim().slice(0, 200);
  return one.replace(/\\/g, '\\\\').replace(/([[\]])/g, '\\$1');
}

/** `![alt](url)`; spaces, parentheses and angle brackets in the URL are percent-encoded. */
export function imageMarkdown({ url, alt }) {
  const safe = String(url).replace(/[\s()<>]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
  return `![${altText(alt)}](${safe})`;
}

/** The note for an image the hub cannot open (a `blob:` or large `data:` URL). */
export function imageNote(alt) {
  const a = altText(alt);
  return `[图片 image${a ? `: ${a}` : ''}]`;
}

/**
 * The images of one reply, each once (by URL; notes by alt), in order: `{url, alt}` with a usable URL,
 * or `{url: null, alt, note: true}` for one that cannot leave the page.
 */
export function uniqueImages(list, base) {
  const out = [];
  const seen = new Set();
  for (const img of list || []) {
    if (!img || img.pending) continue;
    const url = usableUrl(img.url, base);
    const key = url || `note:${img.url || ''}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(url ? { url, alt: String(img.alt ?? '') } : { url: null, alt: String(img.alt ?? ''), note: true });
  }
  return out;
}

/**
 * What to append to `text` so that every image is in it once: the Markdown of each image whose URL the
 * text does not already hold (a model that wrote `![…](url)` itself is not repeated), one per line after
 * a blank line; '' when there is nothing to add.
 */
export function imagesSuffix(text, images) {
  const lines = [];
  for (const img of images) {
    if (img.url && String(text).includes(img.url)) continue;
    lines.push(img.url ? imageMarkdown(img) : imageNote(img.alt));
  }
  if (lines.length === 0) return '';
  const sep = text === '' ? '' : text.endsWith('\n\n') ? '' : text.endsWith('\n') ? '\n' : '\n\n';
  return sep + lines.join('\n');
}

/** The images written in Markdown in `text`: `{alt, url}` in order (the panel lists them). */
export function markdownImages(text) {
  const out = [];
  const re = /!\[((?:\\.|[^\]\\])*)\]\(([^)\s]+)\)/g;
  for (let m = re.exec(String(text ?? '')); m; m = re.exec(String(text ?? ''))) {
    out.push({ alt: m[1].replace(/\\(.)/g, '$1'), url: m[2] });
  }
  return out;
}
