// Images in a reply come back as Markdown (docs/files.md "Back / 回传"): the Markdown form and the URL rule
// (lib/images.js), each site's stream form as its mock sends it (Gemini, Doubao, Qwen carry the address;
// ChatGPT announces an asset pointer the page resolves; DeepSeek carries none), the turn's text with its
// images appended once (capture.js, the page read with a stand-in DOM), and the panel's file list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DATA_URL_MAX, imageMarkdown, imageNote, imagesSuffix, markdownImages, uniqueImages, usableUrl } from '../../src/adapters/lib/images.js';
import { TurnCapture } from '../../src/core/capture.js';
import { Panel, fileSize } from '../../src/core/panel.js';
import { sites } from '../../mock/sites/index.js';
import { loadAdapters } from '../browser/fixtures.js';

const adapters = await loadAdapters();
const IMG = { url: 'https://img.example/gen/a b(1).png?sig=x&e=1', alt: 'a cat [on] a mat / 垫子上的猫' };

test('the Markdown form: alt on one line with brackets escaped, URL spaces and parentheses encoded', () => {
  assert.equal(imageMarkdown(IMG), '![a cat \\[on\\] a mat / 垫子上的猫](https://img.example/gen/a%20b%281%29.png?sig=x&e=1)');
  assert.equal(imageMarkdown({ url: 'https://x.example/p.png', alt: 'two\nlines ' }), '![two lines](https://x.example/p.png)');
  assert.deepEqual(markdownImages(`words ${imageMarkdown(IMG)} and ![](https://x.example/q.webp)`),
    [{ alt: 'a cat [on] a mat / 垫子上的猫', url: 'https://img.example/gen/a%20b%281%29.png?sig=x&e=1' }, { alt: '', url: 'https://x.example/q.webp' }]);
  assert.equal(imageNote('chart'), '[图片 image: chart]');
});

test('only an address the hub can open is linked: absolute http(s), a small data: image; not blob:, javascript:, pointers', () => {
  assert.equal(usableUrl('/backend-api/estuary/content?id=1', 'https://chatgpt.com/c/1'), 'https://chatgpt.com/backend-api/estuary/content?id=1');
  assert.equal(usableUrl('https://lh3.googleusercontent.com/gg/abc=s1024'), 'https://lh3.googleusercontent.com/gg/abc=s1024');
  assert.equal(usableUrl('blob:https://chatgpt.com/1234'), null);
  assert.equal(usableUrl('javascript:alert(1)'), null);
  assert.equal(usableUrl('sediment://file_0001'), null);
  assert.equal(usableUrl('relative.png'), null, 'relative without a base');
  const small = `data:image/png;base64,${'A'.repeat(100)}`;
  assert.equal(usableUrl(small), small);
  assert.equal(usableUrl(`data:image/png;base64,${'A'.repeat(DATA_URL_MAX)}`), null, 'a large data: image is not sent');
  assert.equal(usableUrl('data:image/svg+xml;base64,PHN2Zz4='), null, 'SVG can carry script');
});

test('each image once, after the words; one the text already shows is not repeated; an unusable one is a note', () => {
  const list = uniqueImages([IMG, { ...IMG, alt: 'again' }, { url: 'blob:https://x/1', alt: 'local' }, { pending: true }]);
  assert.equal(list.length, 2);
  const text = 'Here you are.';
  assert.equal(imagesSuffix(text, list), `\n\n${imageMarkdown(IMG)}\n[图片 image: local]`);
  assert.equal(imagesSuffix(`${text}\n\n`, list.slice(0, 1)), imageMarkdown(IMG));
  assert.equal(imagesSuffix('', list.slice(0, 1)), imageMarkdown(IMG), 'an image-only answer');
  const written = `See ![x](${list[0].url})`;
  assert.equal(imagesSuffix(written, list.slice(0, 1)), '', 'the model wrote it itself');
});

/** The events the site's adapter reads from its mock stream with `images`, cut at random (seeds). */
function parse(site, variant, seed, images = [IMG]) {
  const def = sites.find((s) => s.name === site);
  const parser = adapters.get(site).createParser();
  const events = [];
  for (const c of def.stream({ answer: 'Here it is / 给你看', variant, seed, images })) events.push(...parser.push(c));
  events.push(...parser.end());
  return {
    text: events.filter((e) => e.type === 'delta').map((e) => e.text).join(''),
    images: events.filter((e) => e.type === 'image'),
    terminal: events.filter((e) => e.type === 'done' || e.type === 'error').map((e) => e.type),
  };
}

test('each site\'s stream form of an image, whatever the chunking', () => {
  for (let seed = 1; seed <= 12; seed += 1) {
    const gemini = parse('gemini', 'default', seed);
    assert.equal(gemini.text, 'Here it is / 给你看\n\n', 'Gemini: the placeholder address is never text');
    assert.deepEqual(gemini.images, [{ type: 'image', url: IMG.url, alt: IMG.alt }], 'Gemini: [12][7][0], once');
    assert.deepEqual(parse('gemini', 'eof-only', seed).images.length, 1);
    const doubao = parse('doubao', 'default', seed);
    assert.deepEqual(doubao.images, [{ type: 'image', url: IMG.url, alt: IMG.alt }], 'Doubao: creation block, the original once');
    assert.equal(doubao.text, 'Here it is / 给你看');
    const qwen = parse('qianwen', 'intl', seed);
    assert.deepEqual(qwen.images, [{ type: 'image', url: IMG.url, alt: '' }], 'Qwen: image_gen phase');
    const chatgpt = parse('chatgpt', 'default', seed, [IMG, { url: 'https://img.example/2.png', alt: '' }]);
    assert.deepEqual(chatgpt.images, [{ type: 'image', pending: true, alt: '' }, { type: 'image', pending: true, alt: '' }], 'ChatGPT: pointers, read from the page');
    assert.equal(chatgpt.text, 'Here it is / 给你看');
    assert.deepEqual(parse('chatglm', 'default', seed).images, [{ type: 'image', url: IMG.url, alt: '' }], 'ChatGLM: image[].image_url, once');
    assert.deepEqual(parse('deepseek', 'default', seed).images, [], 'DeepSeek carries none: the page is read');
    for (const r of [gemini, doubao, qwen, chatgpt]) assert.deepEqual(r.terminal, ['done']);
  }
});

test('Gemini text that only looks like the start of a placeholder is streamed whole', () => {
  const def = sites.find((s) => s.name === 'gemini');
  const parser = adapters.get('gemini').createParser();
  const events = [];
  for (const c of def.stream({ answer: 'see http://google.com and h', variant: 'default', seed: 4 })) events.push(...parser.push(c));
  events.push(...parser.end());
  assert.equal(events.filter((e) => e.type === 'delta').map((e) => e.text).join(''), 'see http://google.com and h');
});

function capture(adapter, doc = null) {
  const sent = [];
  const c = new TurnCapture({ adapter, hub: { send: (f) => sent.push(f) }, log: () => {}, claimTask: () => 't1', doc });
  return { c, sent };
}

function feed(c, site, images) {
  const def = sites.find((s) => s.name === site);
  const sink = c.begin({ status: 200, contentType: def.contentType });
  for (const chunk of def.stream({ answer: 'Here it is / 给你看', variant: 'default', seed: 2, images })) sink.push(chunk);
  sink.end();
}

const chunksText = (sent) => sent.filter((f) => f.type === 'chunk').map((f) => f.text).join('');

test('a turn whose stream carried an image ends with it as Markdown, once, in the chunks as in the text', () => {
  const { c, sent } = capture(adapters.get('gemini'));
  feed(c, 'gemini', [IMG, IMG]);
  const end = sent.find((f) => f.type === 'turn_end');
  assert.equal(end.text, `Here it is / 给你看\n\n${imageMarkdown(IMG)}`);
  assert.equal(chunksText(sent), end.text);
});

test('an answer that is only an image is an answer, not a parser miss', () => {
  const { c, sent } = capture(adapters.get('qianwen'));
  const def = sites.find((s) => s.name === 'qianwen');
  const sink = c.begin({ status: 200, contentType: 'text/event-stream' });
  for (const chunk of def.stream({ answer: '', variant: 'intl', seed: 1, images: [IMG] })) sink.push(chunk);
  sink.end();
  assert.equal(sent.find((f) => f.type === 'turn_end')?.text, imageMarkdown({ url: IMG.url, alt: '' }), 'Qwen gives no alt');
});

/** A stand-in page: one ChatGPT reply element whose images are `imgs` (an avatar among them). */
function fakePage(imgs) {
  const view = { getComputedStyle: () => ({ display: 'block', visibility: 'visible' }) };
  const ownerDocument = { defaultView: view, baseURI: 'https://chatgpt.com/c/1' };
  const img = ({ src, alt = '', w = 1024, h = 1024, cls = '', lazy, box }) => ({
    tagName: 'IMG', currentSrc: src, complete: true, naturalWidth: w, naturalHeight: h, className: cls, hidden: false, ownerDocument,
    getAttribute: (k) => ({ src, alt, class: cls, 'data-src': lazy }[k] ?? null), closest: () => null,
    getBoundingClientRect: () => box || { width: Math.min(w, 400), height: Math.min(h, 400) },
  });
  const reply = {
    closest: () => null, contains: (o) => o === reply, compareDocumentPosition: () => 0,
    querySelectorAll: (sel) => (sel === 'img' ? imgs.map(img) : []),
  };
  return { baseURI: ownerDocument.baseURI, querySelectorAll: (sel) => (sel === '[data-message-author-role="assistant"]' ? [reply] : []) };
}

test('ChatGPT: an announced image is read from the page once it shows, the avatar left out', async () => {
  const imgs = [{ src: 'https://chatgpt.com/avatar.png', w: 24, h: 24, cls: 'avatar' }];
  const { c, sent } = capture(adapters.get('chatgpt'), fakePage(imgs));
  setTimeout(() => imgs.push({ src: '/backend-api/estuary/content?id=file_1&sig=s', alt: 'Generated image' }), 300);
  feed(c, 'chatgpt', [IMG]);
  assert.equal(sent.some((f) => f.type === 'turn_end'), false, 'the turn waits for the page');
  const started = Date.now();
  while (!sent.some((f) => f.type === 'turn_end') && Date.now() - started < 5000) await new Promise((r) => setTimeout(r, 20));
  const end = sent.find((f) => f.type === 'turn_end');
  assert.equal(end?.text, 'Here it is / 给你看\n\n![Generated image](https://chatgpt.com/backend-api/estuary/content?id=file_1&sig=s)');
  assert.equal(chunksText(sent), end.text);
  assert.equal(c.busy, false);
});

async function turnText(sent) {
  const started = Date.now();
  while (!sent.some((f) => f.type === 'turn_end') && Date.now() - started < 5000) await new Promise((r) => setTimeout(r, 20));
  return sent.find((f) => f.type === 'turn_end')?.text;
}

test('an image the page showed before the turn began is never taken for this reply\'s; a new one is, lazy or not', async () => {
  const imgs = [{ src: 'https://chatgpt.com/earlier-reply.png', alt: 'earlier' }];
  const { c, sent } = capture(adapters.get('chatgpt'), fakePage(imgs));
  const def = sites.find((s) => s.name === 'chatgpt');
  const sink = c.begin({ status: 200, contentType: def.contentType });
  imgs.push({ src: 'data:image/gif;base64,R0lGODlhAQABAAAAACw=', lazy: 'https://chatgpt.com/new.png', alt: 'new', w: 1, h: 1, box: { width: 300, height: 200 } });
  for (const chunk of def.stream({ answer: 'Words.', variant: 'default', seed: 2 })) sink.push(chunk);
  sink.end();
  assert.equal(await turnText(sent), 'Words.\n\n![new](https://chatgpt.com/new.png)');
});

test('the panel follows a task\'s files: attaching, attached, refused with the reason; and the reply\'s images', () => {
  const listeners = [];
  const hub = { sent: [], on: (kind, fn) => listeners.push(fn), send(f) { this.sent.push(f); } };
  const panel = new Panel({ doc: null, hub, findInput: () => null });
  const files = () => panel.files.list.map((f) => `${f.name}:${f.state}${f.reason ? `:${f.reason}` : ''}`);
  for (const fn of listeners) fn({ type: 'task', task_id: 'k', prompt: 'p', attachments: [{ id: 'a', name: 'chart.png', size: 2048 }, { id: 'b', name: 'setup.exe', size: 10 }] });
  assert.deepEqual(files(), ['chart.png:waiting', 'setup.exe:waiting']);
  hub.send({ type: 'task_update', task_id: 'k', state: 'attaching', done: 0, of: 2 });
  assert.deepEqual(files(), ['chart.png:attaching', 'setup.exe:waiting']);
  hub.send({ type: 'task_update', task_id: 'k', state: 'attaching', done: 1, of: 2 });
  assert.deepEqual(files(), ['chart.png:attached', 'setup.exe:attaching']);
  hub.send({ type: 'task_update', task_id: 'k', state: 'failed', trouble: 'attachment_refused', error: 'setup.exe: 不支持的文件类型 unsupported type' });
  assert.deepEqual(files(), ['chart.png:attached', 'setup.exe:refused:setup.exe: 不支持的文件类型 unsupported type']);
  assert.equal(hub.sent.length, 3, 'every frame still goes out');
  hub.send({ type: 'turn_end', turn_id: 't', text: `ok ${imageMarkdown(IMG)}` });
  assert.deepEqual(panel.images, [{ alt: IMG.alt, url: 'https://img.example/gen/a%20b%281%29.png?sig=x&e=1' }]);
  for (const fn of listeners) fn({ type: 'deliver', deliver_id: 'd1', text: 'results', auto_send: true, attachments: [{ id: 'c', name: 'shot.png', size: 3 }] });
  hub.send({ type: 'task_update', task_id: 'd1', state: 'attaching', done: 1, of: 1 });
  assert.deepEqual(files(), ['shot.png:waiting'], 'a task_id is not the delivery\'s');
  hub.send({ type: 'task_update', deliver_id: 'd1', state: 'attaching', done: 1, of: 1 });
  assert.deepEqual(files(), ['shot.png:attached'], 'an agent loop\'s delivery: its files too');
  for (const fn of listeners) fn({ type: 'task', task_id: 'k2', prompt: 'p' });
  assert.equal(panel.files, null, 'a task without files clears the list');
  assert.equal(fileSize(2048), '2.0 KB');
});
