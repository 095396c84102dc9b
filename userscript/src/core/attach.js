/**
 * Files into the composer, as a person puts them there (docs/userscript.md "Files and images").
 *
 * A hub `task` may carry `attachments: [{id, name, mime, size, sha256}]`. The tab fetches each from
 * the hub (`GET /files/ID` through the manager's own request function, hub-client.js `fetchFile`: the
 * token never enters the page), checks its SHA-256, and hands it to the site the way the site's page
 * takes files: its file input (`files` set from a DataTransfer, then `input` and `change`), or a drop
 * or a paste of the File on the composer. It then waits until the page shows every upload finished
 * (each file's chip there, no spinner) and only then may the text be typed and sent: the text never
 * goes without its files. A file the site refuses — a type outside its accept list, over its size or
 * count limit, or an upload error the page shows — fails the task with `attachment_refused` and the
 * site's reason; nothing is sent.
 *
 * What a site takes is data in its adapter (`upload`, src/adapters/README.md):
 *   { how: 'input' | 'drop' | 'paste' (or a list, tried in order), accept: [mime patterns or .ext],
 *     maxBytes, maxFiles, input: [selectors of the file input], target: [the drop zone; default the
 *     composer, which a paste always goes to], chip: [one attached file's chip or preview], busy: [an upload in
 *     progress], error: [an upload error the page shows] }
 */
import { sha256Hex } from './sha256.js';
import { findInput, isVisible, waitFor } from './input.js';

export const ATTACHMENT_REFUSED = 'attachment_refused';
/** How long one file's upload may take before the task fails (the site shows it never finished). */
export const UPLOAD_WAIT_MS = 90_000;
/** How long after a file was handed over the page has to show its chip (or its error). */
export const CHIP_APPEAR_MS = 10_000;

/** A file the site refuses: fails the task with `attachment_refused`, "<name>: <the site's reason>". */
export class AttachmentRefused extends Error {
  constructor(name, reason) {
    super(`${name}: ${reason}`);
    this.trouble = ATTACHMENT_REFUSED;
    this.fileName = name;
    this.reason = reason;
  }
}

const MB = 1024 * 1024;
const sizeText = (n) => (n >= MB ? `${Math.round((n / MB) * 10) / 10} MB` : `${Math.ceil(n / 1024)} KB`);

function extensionOf(name) {
  const m = /\.[^./\\]+$/.exec(String(name || ''));
  return m ? m[0].toLowerCase() : '';
}

/**
 * True when `file` ({name, mime}) matches one of `patterns` as an `accept` attribute does:
 * `image/*`, an exact MIME type, or a `.ext` extension. No patterns: everything.
 */
export function acceptMatches(patterns, file) {
  const list = (Array.isArray(patterns) ? patterns : String(patterns || '').split(','))
    .map((p) => String(p).trim().toLowerCase()).filter(Boolean);
  if (list.length === 0) return true;
  const mime = String(file.mime || file.type || '').toLowerCase();
  const ext = extensionOf(file.name);
  return list.some((p) => {
    if (p.startsWith('.')) return p === ext;
    if (p === '*/*' || p === '*') return true;
    if (p.endsWith('/*')) return mime.startsWith(p.slice(0, -1));
    return p === mime;
  });
}

/**
 * Why the site would refuse `files` (a list of {name, mime, size}) before any is handed over, or null:
 * its accept list (the live input's own `accept` when the page has one), its size limit, its count
 * limit (counting the chips already in the composer).
 */
export function refusalOf(upload, files, { already = 0, liveAccept = null } = {}) {
  if (!upload) return { name: files[0]?.name ?? '?', reason: 'this site takes no files in AIcard yet / 此站点尚不支持附件' };
  const max = Number(upload.maxFiles) || Infinity;
  for (const [i, f] of files.entries()) {
    const accept = liveAccept || upload.accept;
    if (!acceptMatches(accept, f)) {
      return { name: f.name, reason: `the site does not take this type (${f.mime || extensionOf(f.name) || 'unknown'}) / 站点不支持此文件类型` };
    }
    if (upload.maxBytes && f.size > upload.maxBytes) {
      return { name: f.name, reason: `${sizeText(f.size)} is over the site's limit of ${sizeText(upload.maxBytes)} / 超过站点的大小上限` };
    }
    if (already + i + 1 > max) {
      return { name: f.name, reason: `more than ${max} files at once / 超过站点的文件数上限 (${max})` };
    }
  }
  return null;
}

/** Everything `selectors` match in `doc`, in document order (a selector the browser rejects is skipped). */
function all(doc, selectors = []) {
  const out = [];
  for (const sel of selectors || []) {
    let nodes;
    try { nodes = doc.querySelectorAll(sel); } catch { continue; }
    for (const el of nodes) if (!out.includes(el)) out.push(el);
  }
  return out;
}

const shown = (doc, selectors) => all(doc, selectors).filter(isVisible);

/** What the page shows of the uploads: chips (not errors), spinners, errors. */
export function uploadState(doc, upload) {
  const errors = shown(doc, upload.error);
  const chips = shown(doc, upload.chip).filter((c) => !errors.some((e) => e === c || c.contains(e) || e.contains(c)));
  return { chips: chips.length, busy: shown(doc, upload.busy).length, errors };
}

/** The text a page's error chip says (its own words without the file's name, then its title or label). */
function errorText(el, name = '') {
  let text = String(el.textContent || '').replace(/\s+/g, ' ').trim();
  if (name && text.startsWith(name)) text = text.slice(name.length).replace(/^[\s:：—-]+/, '');
  return text || el.getAttribute?.('title') || el.getAttribute?.('aria-label') || 'the site refused the upload / 站点拒绝了上传';
}

/** The site's file input: the adapter's, else the page's file input nearest the composer. */
export function findFileInput(doc, upload, composer) {
  const own = all(doc, upload?.input).find((el) => el.tagName === 'INPUT' && String(el.type).toLowerCase() === 'file' && !el.disabled);
  if (own) return own;
  const inputs = [...doc.querySelectorAll('input[type="file"]')].filter((el) => !el.disabled && !el.closest?.('[data-aicard-panel]'));
  if (inputs.length <= 1 || !composer) return inputs[0] || null;
  // The one sharing the deepest ancestor with the composer.
  let best = inputs[0];
  let bestDepth = -1;
  for (const el of inputs) {
    let depth = 0;
    for (let p = el.parentElement; p; p = p.parentElement) {
      if (p.contains(composer)) { depth = depthOf(p); break; }
    }
    if (depth > bestDepth) { best = el; bestDepth = depth; }
  }
  return best;
}

function depthOf(el) {
  let n = 0;
  for (let p = el; p; p = p.parentElement) n += 1;
  return n;
}

/** A DataTransfer holding `file`, made with the page's constructors where this world can reach them. */
function transferOf(win, file) {
  const DT = win.DataTransfer || globalThis.DataTransfer;
  const dt = new DT();
  dt.items.add(file);
  return dt;
}

/** Puts `file` into the site's file input and announces it as a file chooser does (input, change). */
function viaInput(doc, input, file) {
  const win = doc.defaultView || globalThis;
  input.files = transferOf(win, file).files;
  const Ev = win.Event || globalThis.Event;
  input.dispatchEvent(new Ev('input', { bubbles: true, composed: true }));
  input.dispatchEvent(new Ev('change', { bubbles: true }));
}

/**
 * The page's own window where this world sees it through an Xray (Firefox's content sandbox), so drop and
 * paste events are made by the page's constructors with their init dictionaries cloned into the page (a
 * sandbox object's properties are not the page's to read); else this world's view of the window.
 */
function eventRealm(win) {
  const page = win.wrappedJSObject;
  const clone = globalThis.cloneInto;
  if (page && typeof clone === 'function') {
    return { win: page, init: (o) => clone(o, page, { wrapReflectors: true }) };
  }
  return { win, init: (o) => o };
}

/** Drops `file` on `target`: dragenter, dragover, drop, as a person dragging it from the desktop. */
function viaDrop(doc, target, file) {
  const realm = eventRealm(doc.defaultView || globalThis);
  const dt = transferOf(realm.win, file);
  const Drag = realm.win.DragEvent || globalThis.DragEvent;
  for (const type of ['dragenter', 'dragover', 'drop']) {
    target.dispatchEvent(new Drag(type, realm.init({ bubbles: true, cancelable: true, composed: true, dataTransfer: dt })));
  }
}

/** Pastes `file` into `target` (the composer), as Ctrl+V with a copied file or screenshot. */
function viaPaste(doc, target, file) {
  const realm = eventRealm(doc.defaultView || globalThis);
  const dt = transferOf(realm.win, file);
  target.focus?.();
  const Clip = realm.win.ClipboardEvent || globalThis.ClipboardEvent;
  const ev = new Clip('paste', realm.init({ bubbles: true, cancelable: true, composed: true, clipboardData: dt }));
  if (!ev.clipboardData) Object.defineProperty(ev, 'clipboardData', { value: dt });
  target.dispatchEvent(ev);
}

function targetOf(doc, adapter, upload) {
  return all(doc, upload.target).find(isVisible) || findInput(doc, adapter);
}

/** Hands one File to the page the way the site takes it; says which way it used. */
export function handOver(doc, adapter, file) {
  const upload = adapter.upload;
  const ways = Array.isArray(upload.how) ? upload.how : [upload.how || 'input'];
  for (const how of ways) {
    if (how === 'input') {
      const input = findFileInput(doc, upload, findInput(doc, adapter));
      if (!input) continue;
      viaInput(doc, input, file);
      return 'input';
    }
    // A drop lands on the site's drop zone (else the composer); a paste always goes into the composer.
    const target = how === 'drop' ? targetOf(doc, adapter, upload) : findInput(doc, adapter);
    if (!target) continue;
    if (how === 'drop') viaDrop(doc, target, file);
    else if (how === 'paste') viaPaste(doc, target, file);
    else continue;
    return how;
  }
  throw new Error('the page shows no way to attach a file (no file input, no composer) / 页面上找不到上传入口');
}

/**
 * Attaches `files` (Files, in order), one at a time: each is handed over, then the page must show
 * its chip with no upload in progress (or its error: refused). `onDone(n)` after each finished.
 */
export async function attachFiles({ doc, adapter, files, timers = globalThis, onDone, uploadWaitMs = UPLOAD_WAIT_MS, chipWaitMs = CHIP_APPEAR_MS }) {
  const upload = adapter?.upload;
  const meta = files.map((f) => ({ name: f.name, mime: f.type, size: f.size }));
  const before = upload ? uploadState(doc, upload) : { chips: 0, errors: [] };
  const input = upload && (!upload.how || [].concat(upload.how).includes('input')) ? findFileInput(doc, upload, findInput(doc, adapter)) : null;
  const liveAccept = input?.getAttribute?.('accept') || null;
  const refused = refusalOf(upload, meta, { already: before.chips, liveAccept });
  if (refused) throw new AttachmentRefused(refused.name, refused.reason);
  const errorsBefore = new Set(before.errors);
  for (const [i, file] of files.entries()) {
    handOver(doc, adapter, file);
    const want = before.chips + i + 1;
    let seenChip = false;
    const handed = Date.now();
    const outcome = await waitFor(() => {
      const now = uploadState(doc, upload);
      const fresh = now.errors.find((e) => !errorsBefore.has(e));
      if (fresh) return { error: errorText(fresh, file.name) };
      if (now.chips >= want) seenChip = true;
      if (seenChip && now.chips >= want && now.busy === 0) return { ok: true };
      if (!seenChip && Date.now() - handed > chipWaitMs) return { noChip: true };
      return null;
    }, { timeoutMs: uploadWaitMs, everyMs: 100, timers });
    if (!outcome) throw new Error(`${file.name}: the upload did not finish within ${Math.round(uploadWaitMs / 1000)} s / 上传未在时限内完成`);
    if (outcome.noChip) throw new Error(`${file.name}: the page showed no attachment after it was handed over / 页面没有显示附件`);
    if (outcome.error) throw new AttachmentRefused(file.name, outcome.error);
    onDone?.(i + 1);
  }
}

/** Bytes of whatever a manager's request gave for a binary response: ArrayBuffer, view, Blob, or a binary string. */
export async function bytesOf(response) {
  if (response == null) return null;
  if (response instanceof ArrayBuffer || Object.prototype.toString.call(response) === '[object ArrayBuffer]') return new Uint8Array(response);
  if (ArrayBuffer.isView(response)) return new Uint8Array(response.buffer, response.byteOffset, response.byteLength);
  if (typeof response.arrayBuffer === 'function') return new Uint8Array(await response.arrayBuffer());
  if (typeof response === 'string') {
    const out = new Uint8Array(response.length);
    for (let i = 0; i < response.length; i += 1) out[i] = response.charCodeAt(i) & 0xff;
    return out;
  }
  return null;
}

/**
 * Fetches every attachment of a task from the hub (`fetchFile(id)` → bytes), checks each one's
 * size and SHA-256 against the frame, and makes the Files (`FileImpl`: this world's File).
 */
export async function fetchAttachments(attachments, fetchFile, { FileImpl = globalThis.File, subtle } = {}) {
  const files = [];
  for (const att of attachments) {
    const name = String(att.name || att.id);
    let bytes;
    try {
      bytes = await bytesOf(await fetchFile(att.id));
    } catch (err) {
      throw new Error(`${name}: could not fetch it from the hub (${err.message}) / 无法从 hub 取得附件`);
    }
    if (!bytes) throw new Error(`${name}: the hub sent no bytes / hub 没有发来内容`);
    if (typeof att.size === 'number' && bytes.length !== att.size) {
      throw new Error(`${name}: ${bytes.length} bytes arrived, the task said ${att.size} / 附件大小不符`);
    }
    if (att.sha256) {
      const got = await sha256Hex(bytes, subtle);
      if (got !== String(att.sha256).toLowerCase()) {
        throw new Error(`${name}: SHA-256 ${got.slice(0, 12)}… does not match the task's ${String(att.sha256).slice(0, 12)}… / 附件校验不符`);
      }
    }
    files.push(new FileImpl([bytes], name, { type: att.mime || 'application/octet-stream', lastModified: Date.now() }));
  }
  return files;
}
