// The attach logic without a browser (src/core/attach.js, tasks.js attachTaskFiles): accept patterns and the
// site's limits, fetching and checking a task's files, handing them to a fake page by its file input, a drop
// or a paste, waiting for its chips to finish, a page-shown upload error, and the task runner's frames — the
// text typed only after every upload finished, `attaching` 0..N, `attachment_refused` with nothing sent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  AttachmentRefused, acceptMatches, attachFiles, bytesOf, fetchAttachments, refusalOf,
} from '../../src/core/attach.js';
import { sha256Plain, sha256Hex } from '../../src/core/sha256.js';
import { TaskRunner } from '../../src/core/tasks.js';
import { TROUBLES, TASK_STATES } from '../../src/core/protocol.js';
import { adapters } from '../../src/adapters/index.js';

const sha = (b) => createHash('sha256').update(b).digest('hex');

// ---- a fake page: a composer, a file input, chips that the "site" adds and finishes on its own clock

class El {
  constructor(page, tag, attrs = {}) {
    Object.assign(this, { page, tagName: tag.toUpperCase(), attrs: { ...attrs }, children: [], parentElement: null, listeners: {}, isConnected: true, textContent: attrs.text || '' });
    this.ownerDocument = page.doc;
  }

  getAttribute(n) { return this.attrs[n] ?? null; }

  get type() { return this.attrs.type; }

  get disabled() { return false; }

  get className() { return this.attrs.class || ''; }

  getBoundingClientRect() { return { left: 0, top: 0, right: 100, bottom: 20, width: 100, height: 20 }; }

  contains(o) { for (let p = o; p; p = p.parentElement) if (p === this) return true; return false; }

  closest() { return null; }

  append(child) { child.parentElement = this; this.children.push(child); return child; }

  remove() { const p = this.parentElement; if (p) p.children.splice(p.children.indexOf(this), 1); this.isConnected = false; }

  addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); }

  dispatchEvent(ev) { for (const fn of this.listeners[ev.type] || []) fn(ev); return true; }

  focus() {}

  matches(sel) {
    // Only what the tests' tables use: `.class`, `tag.class`, `input[type="file"]`, `[attr="v"]`.
    return sel.split(',').some((one) => {
      const s = one.trim();
      const m = /^([a-z]*)((?:\.[\w-]+)*)((?:\[[\w-]+(?:="[^"]*")?\])*)$/i.exec(s);
      if (!m) return false;
      if (m[1] && m[1].toUpperCase() !== this.tagName) return false;
      const classes = this.className.split(/\s+/);
      if (m[2] && !m[2].split('.').filter(Boolean).every((c) => classes.includes(c))) return false;
      for (const a of m[3].match(/\[[^\]]+\]/g) || []) {
        const [, k, v] = /^\[([\w-]+)(?:="([^"]*)")?\]$/.exec(a);
        if (v === undefined ? !(k in this.attrs) : this.attrs[k] !== v) return false;
      }
      return true;
    });
  }
}

class FakeDataTransfer {
  constructor() { this.list = []; this.items = { add: (f) => this.list.push(f) }; }

  get files() { return [...this.list]; }
}

class FakeEvent {
  constructor(type, init = {}) { Object.assign(this, { type, ...init }); }
}

/**
 * `site`: {how, accept, failWith?, never?}. The page adds a chip (with a spinner) for each file it takes, and
 * finishes it after `uploadMs`; a refusal (`failWith`) turns the chip into an error chip instead.
 */
function fakePage({ uploadMs = 30, failWith = null, never = false, acceptAttr = 'image/png,application/pdf' } = {}) {
  const page = { taken: [], sent: [], timers: [] };
  const all = [];
  const doc = {
    defaultView: {
      DataTransfer: FakeDataTransfer, Event: FakeEvent, DragEvent: FakeEvent, ClipboardEvent: FakeEvent,
      getComputedStyle: () => ({ visibility: 'visible', display: 'block', opacity: '1' }),
    },
    querySelectorAll: (sel) => all.filter((e) => e.isConnected && e.matches(sel)),
    querySelector: (sel) => doc.querySelectorAll(sel)[0] || null,
    activeElement: null,
  };
  page.doc = doc;
  const make = (tag, attrs) => { const e = new El(page, tag, attrs); all.push(e); return e; };
  const root = make('div', { class: 'composer' });
  const box = root.append(make('textarea', { class: 'box' }));
  box.value = '';
  const input = root.append(make('input', { type: 'file', class: 'upload', accept: acceptAttr }));
  const list = root.append(make('div', { class: 'chips' }));
  const take = (file) => {
    page.taken.push(file);
    const chip = list.append(make('div', { class: 'chip', text: file.name }));
    const spin = chip.append(make('span', { class: 'spin' }));
    if (never) return;
    page.timers.push(setTimeout(() => {
      spin.remove();
      if (failWith) { chip.attrs.class = 'chip chip-error'; chip.textContent = `${file.name} ${failWith}`; }
    }, uploadMs));
  };
  input.addEventListener('change', () => input.files.forEach(take));
  root.addEventListener('drop', (ev) => ev.dataTransfer.files.forEach(take));
  box.addEventListener('paste', (ev) => ev.clipboardData.files.forEach(take));
  page.box = box; page.input = input; page.root = root;
  return page;
}

const table = (how) => ({
  how, accept: ['image/png', 'application/pdf'], maxBytes: 1000, maxFiles: 3,
  input: ['input.upload'], target: ['div.composer'], chip: ['.chip'], busy: ['.spin'], error: ['.chip-error'],
});
const adapterFor = (how) => ({ name: 'fake', upload: table(how), input: { selectors: ['textarea.box'] } });
const file = (name, type, n = 10) => new File([new Uint8Array(n).fill(7)], name, { type });

test('accept patterns as an accept attribute reads them', () => {
  assert.ok(acceptMatches(['image/*'], { name: 'a.PNG', mime: 'image/png' }));
  assert.ok(acceptMatches(['.md'], { name: 'notes.MD', mime: '' }));
  assert.ok(acceptMatches('image/png, application/pdf', { name: 'x', mime: 'application/pdf' }));
  assert.ok(!acceptMatches(['image/*', '.pdf'], { name: 'x.exe', mime: 'application/x-msdownload' }));
  assert.ok(acceptMatches([], { name: 'anything', mime: 'a/b' }), 'no list: everything');
});

test("the site's limits refuse a file before anything is handed over", () => {
  const t = table('input');
  assert.equal(refusalOf(t, [{ name: 'a.png', mime: 'image/png', size: 10 }]), null);
  assert.match(refusalOf(t, [{ name: 'a.exe', mime: 'application/x-msdownload', size: 10 }]).reason, /does not take this type/);
  assert.match(refusalOf(t, [{ name: 'big.png', mime: 'image/png', size: 5000 }]).reason, /over the site's limit/);
  const four = Array.from({ length: 4 }, (_, i) => ({ name: `${i}.png`, mime: 'image/png', size: 1 }));
  assert.equal(refusalOf(t, four).name, '3.png', 'the fourth of a three-file site');
  assert.equal(refusalOf(t, four.slice(0, 2), { already: 2 }).name, '1.png', 'chips already in the composer count');
  assert.equal(refusalOf(t, [{ name: 'a.pdf', mime: 'application/pdf', size: 1 }], { liveAccept: 'image/*' }).name, 'a.pdf', "the page's own accept attribute wins");
});

test('sha256: the plain implementation agrees with node and crypto.subtle', async () => {
  for (const n of [0, 1, 55, 56, 63, 64, 65, 1000]) {
    const b = new Uint8Array(n).map((_, i) => (i * 31) & 0xff);
    assert.equal(sha256Plain(b), sha(b), `${n} bytes`);
    assert.equal(await sha256Hex(b), sha(b));
  }
});

test('bytesOf takes what managers hand back: ArrayBuffer, a view, a Blob, a binary string', async () => {
  const want = [1, 2, 250];
  assert.deepEqual([...await bytesOf(new Uint8Array(want).buffer)], want);
  assert.deepEqual([...await bytesOf(new Uint8Array([0, ...want]).subarray(1))], want);
  assert.deepEqual([...await bytesOf(new Blob([new Uint8Array(want)]))], want);
  assert.deepEqual([...await bytesOf('\x01\x02\xfa')], want);
});

test("a task's files are fetched, size and SHA-256 checked, and made Files", async () => {
  const bytes = new Uint8Array([5, 6, 7]);
  const att = { id: 'f1', name: 'x.png', mime: 'image/png', size: 3, sha256: sha(bytes) };
  const [f] = await fetchAttachments([att], async () => bytes.buffer);
  assert.equal(f.name, 'x.png');
  assert.equal(f.type, 'image/png');
  assert.deepEqual([...new Uint8Array(await f.arrayBuffer())], [5, 6, 7]);
  await assert.rejects(fetchAttachments([{ ...att, sha256: sha(new Uint8Array([1])) }], async () => bytes.buffer), /x\.png: SHA-256/);
  await assert.rejects(fetchAttachments([{ ...att, size: 4 }], async () => bytes.buffer), /3 bytes arrived, the task said 4/);
  await assert.rejects(fetchAttachments([att], async () => { throw new Error('HTTP 404'); }), /x\.png: could not fetch it from the hub \(HTTP 404\)/);
});

for (const how of ['input', 'drop', 'paste']) {
  test(`by ${how}: each file handed over, each upload waited for, progress after each`, async () => {
    const page = fakePage();
    const done = [];
    await attachFiles({ doc: page.doc, adapter: adapterFor(how), files: [file('a.png', 'image/png'), file('b.pdf', 'application/pdf')], onDone: (n) => done.push(n) });
    assert.deepEqual(page.taken.map((f) => f.name), ['a.png', 'b.pdf']);
    assert.deepEqual(done, [1, 2]);
    assert.equal(page.doc.querySelectorAll('.spin').length, 0, 'no upload still running');
  });
}

test("an upload error the page shows refuses the file with the site's words", async () => {
  const page = fakePage({ failWith: '文件解析失败 could not parse' });
  await assert.rejects(
    attachFiles({ doc: page.doc, adapter: adapterFor('input'), files: [file('a.pdf', 'application/pdf')] }),
    (err) => err instanceof AttachmentRefused && err.trouble === 'attachment_refused' && err.message === 'a.pdf: 文件解析失败 could not parse',
  );
});

test('an upload that never finishes, or a page that shows nothing, fails (bounded)', async () => {
  const stuck = fakePage({ never: true });
  await assert.rejects(attachFiles({ doc: stuck.doc, adapter: adapterFor('input'), files: [file('a.png', 'image/png')], uploadWaitMs: 300 }), /did not finish within/);
  const deaf = fakePage();
  deaf.input.listeners.change = [];
  await assert.rejects(attachFiles({ doc: deaf.doc, adapter: adapterFor('input'), files: [file('a.png', 'image/png')], chipWaitMs: 200 }), /showed no attachment/);
});

test('the runner: attaching 0..N, then the text; a refused file fails with attachment_refused and types nothing', async () => {
  const page = fakePage();
  const frames = [];
  const typed = [];
  const bytes = new Uint8Array([1, 2, 3]);
  const hub = { send: (f) => frames.push(f), fetchFile: async () => bytes.buffer };
  const r = new TaskRunner({ doc: page.doc, adapter: adapterFor('input'), hub, capture: { on() {} }, timers: globalThis, log() {} });
  r.typeAndSend = async (text) => { typed.push({ text, chips: page.doc.querySelectorAll('.chip').length, busy: page.doc.querySelectorAll('.spin').length }); };
  const att = (name, mime) => ({ id: name, name, mime, size: 3, sha256: sha(bytes) });
  await r.attachTaskFiles({ task_id: 't1', attachments: [att('a.png', 'image/png'), att('b.pdf', 'application/pdf')] });
  await r.typeAndSend('go');
  assert.deepEqual(frames.map((f) => `${f.state} ${f.done}/${f.of}`), ['attaching 0/2', 'attaching 1/2', 'attaching 2/2']);
  assert.deepEqual(typed, [{ text: 'go', chips: 2, busy: 0 }], 'typed once both uploads finished');

  // Through the queue: a file of a type the site does not take.
  frames.length = 0;
  typed.length = 0;
  r.waitIdle = async () => {};
  r.handle({ type: 'task', task_id: 't2', prompt: 'never typed', attachments: [att('x.exe', 'application/x-msdownload')] });
  await new Promise((res) => { const tick = () => (frames.some((f) => f.state === 'failed') ? res() : setTimeout(tick, 5)); tick(); });
  const failed = frames.find((f) => f.state === 'failed');
  assert.equal(failed.trouble, 'attachment_refused');
  assert.match(failed.error, /^x\.exe: /);
  assert.deepEqual(typed, [], 'nothing typed, nothing sent');
  assert.ok(!frames.some((f) => f.state === 'sent'));
});

test('protocol: attachment_refused is a trouble, attaching a state; every adapter has an upload table', () => {
  assert.ok(TROUBLES.includes('attachment_refused'));
  assert.ok(TASK_STATES.includes('attaching'));
  for (const a of adapters) {
    const u = a.upload;
    assert.ok(u, `${a.name} has an upload table`);
    assert.ok([].concat(u.how).every((h) => ['input', 'drop', 'paste'].includes(h)), a.name);
    assert.ok(u.maxBytes > 0 && u.maxFiles > 0, a.name);
    for (const k of ['chip', 'busy', 'error']) assert.ok(u[k].length > 0, `${a.name}.${k}`);
    assert.ok(acceptMatches(u.accept, { name: 'a.png', mime: 'image/png' }) && acceptMatches(u.accept, { name: 'a.pdf', mime: 'application/pdf' }), `${a.name} takes an image and a PDF`);
  }
});
