// Images back from the tabs (docs/files.md "Back / 回传"), in Chromium on the mock sites with the page-world
// shim: a reply with an image reaches the hub as Markdown with the image's own address — taken from the
// stream where the site's stream carries it (Gemini, Doubao, Qwen), from the reply on the page where it only
// announces it (ChatGPT's asset pointer, shown after the stream) or carries nothing (DeepSeek: DOM only); the
// site's avatar next to the reply never counts. The panel lists a task's file while it is attached and the
// reply's image after. The last test does the same through the real hub to the person's desk.
// Waits on frames and page state, never on sleeps.
//   node --test --test-reporter=spec test/browser/images.test.js
//   AICARD_BIN=/work/main/target/debug/aicard node --test test/browser/images.test.js   (the real-hub case too)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMockServer } from '../../mock/server.js';
import { startStandInHub } from './stand-in-hub.js';
import { launchBrowser, openTab } from './harness.js';
import { answerFor } from './fixtures.js';
import { PNG } from './files.js';
import { imageMarkdown } from '../../src/adapters/lib/images.js';
import { ensureHubBinary, startRealHub } from './real-hub.js';
import { openDesk, until } from './stop-story.js';

let mock; let hub; let browser;

before(async () => {
  mock = await startMockServer({ csp: false }); // the page-world shim: the manager worlds are in test/worlds
  hub = await startStandInHub();
  browser = await launchBrowser({ mock });
});

after(async () => {
  await browser?.close();
  await hub?.close();
  await mock?.close();
});

/** Where each site's image comes from, and an address of the form the real site uses (served by the mock). */
const CASES = [
  { site: 'gemini', host: 'gemini.google.com', variant: 'default', from: 'stream',
    image: { url: 'https://lh3.googleusercontent.com/gg-dl/AJfQ9KQmockGeneratedImage=s1024-rj', alt: 'A cat on a mat / 垫子上的猫' } },
  { site: 'doubao', host: 'www.doubao.com', variant: 'default', from: 'stream',
    image: { url: 'https://p3-flow-imagex-sign.byteimg.com/tos-cn-i-a9rns2rl98/rc_gen_image/mock.png~tplv-a9rns2rl98-image_raw.png?rk3s=b14c611d&x-expires=1790000000&x-signature=mock', alt: '一只猫' } },
  { site: 'qianwen', host: 'chat.qwen.ai', variant: 'intl', from: 'stream',
    image: { url: 'https://cdn.qwenlm.ai/output/mock-user/t2i/mock-chat/1760000000.png?key=mock', alt: '' } },
  { site: 'chatgpt', host: 'chatgpt.com', variant: 'default', from: 'page (the stream names an asset pointer)', imagesDelayMs: 400,
    image: { url: 'https://chatgpt.com/backend-api/estuary/content?id=file_00000000a1b2c3d4&ts=1&p=fs&sig=mock', alt: 'Generated image' } },
  { site: 'deepseek', host: 'chat.deepseek.com', variant: 'default', from: 'page only',
    image: { url: 'https://cdn.qwenlm.ai/output/dom-only/chart.png', alt: 'chart / 图表' } },
];

async function open(host, gmValues = {}) {
  const page = await openTab(browser.context, { host, hub, gmValues });
  const client = await hub.waitClient((c) => c.hello.url?.includes(host) && c.connected, { timeoutMs: 10000 });
  return { page, client };
}

const turnEnd = (id) => hub.waitFrame((f) => f.frame.type === 'turn_end' && f.frame.task_id === id, { timeoutMs: 30000, what: `${id} turn_end` });

test('a reply with an image reaches the hub as Markdown with the image\'s own address, once', async (t) => {
  for (const c of CASES) {
    await t.test(`${c.site}: from the ${c.from}`, async () => {
      const { page, client } = await open(c.host);
      try {
        const answer = answerFor(c.site, c.variant);
        mock.next(c.site, { answer, variant: c.variant, images: [c.image], imagesDelayMs: c.imagesDelayMs });
        const id = `image-${c.site}`;
        hub.send(client.id, { type: 'task', task_id: id, prompt: 'Draw a cat / 画一只猫', timeout_ms: 30000, role: 'worker', priority: 0, retry: 0 });
        const end = await turnEnd(id);
        const md = imageMarkdown(c.image);
        // After the words, a blank line (on Gemini the one its text kept before the image's placeholder).
        assert.equal(end.frame.text, `${answer}\n\n${md}`);
        assert.equal(end.frame.text.split(c.image.url).length, 2, 'the image once');
        assert.ok(!end.frame.text.includes('image_generation_content'), 'no placeholder address');
        const chunks = hub.frames.filter((f) => f.frame.type === 'chunk' && f.frame.turn_id === end.frame.turn_id).map((f) => f.frame.text).join('');
        assert.equal(chunks, end.frame.text, 'the chunks add up to the text');
        // The panel shows the reply's image (the page's avatar is not one).
        await page.waitForFunction(() => document.querySelector('aicard-panel')?.dataset.images === '1', null, { timeout: 5000 });
      } finally {
        await page.close();
      }
    });
  }
});

test('the panel lists the task\'s file while it is attached, with its size and state, and the image that came back', async () => {
  const { page, client } = await open('gemini.google.com', { debug: true });
  try {
    const image = CASES[0].image;
    mock.next('gemini', { answer: 'Here is your cat.', variant: 'default', images: [image] });
    const id = 'image-panel';
    hub.send(client.id, { type: 'task', task_id: id, prompt: 'Make this a cat / 把它画成猫', attachments: [hub.offerFile(client.id, PNG)], timeout_ms: 30000, role: 'worker', priority: 0, retry: 0 });
    // While the task runs the file is listed: attaching, then attached.
    const state = await page.waitForFunction((name) => {
      const files = document.querySelector('aicard-panel')?.dataset.files || '';
      return /attaching|attached/.test(files) && files.startsWith(`${name}:`) ? files : null;
    }, PNG.name, { timeout: 10000 });
    assert.match(await state.jsonValue(), new RegExp(`^${PNG.name.replace('.', '\\.')}:(attaching|attached)$`));
    const end = await turnEnd(id);
    assert.equal(end.frame.text, `Here is your cat.\n\n${imageMarkdown(image)}`, 'the reply\'s image only: not the person\'s upload, not the avatar');
    assert.equal(await page.evaluate(() => document.querySelectorAll('.mock-user-upload').length), 1, 'the page showed the person\'s upload in their message');
    await page.waitForFunction(() => document.querySelector('aicard-panel')?.dataset.images === '1', null, { timeout: 5000 });
    const describe = JSON.parse(await page.evaluate(() => document.querySelector('aicard-panel').dataset.describe));
    assert.match(describe.text, new RegExp(`${PNG.name.replace('.', '\\.')} · \\d+ B · 已附加 attached`));
    assert.match(describe.text, /附件 Files\s*1\/1/);
    assert.match(describe.text, /图片 Images\s*1/);
    assert.ok(describe.text.includes(image.alt), 'the image is named by its alt text');
  } finally {
    await page.close();
  }
});

const realHubMissing = process.env.AICARD_BIN ? ensureHubBinary() : 'set AICARD_BIN to run the real-hub case';
test('real hub: the image reaches the person\'s desk as Markdown with its address', { skip: realHubMissing || false, timeout: 120_000 }, async () => {
  const real = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`) });
  const desk = await openDesk(real.url, real.token);
  const page = await openTab(browser.context, { host: 'gemini.google.com', hub: { url: real.url, token: real.token }, gmValues: { label: 'gemini-images' } });
  try {
    await until(() => page.evaluate(() => document.querySelector('aicard-panel')?.dataset.state === 'open'), Boolean, { timeoutMs: 20000, what: 'connected' });
    const image = CASES[0].image;
    mock.next('gemini', { answer: 'Here is your cat.', variant: 'default', images: [image] });
    const r = await desk.run('to gemini-images: 画一只猫 / draw a cat', 60000);
    assert.notEqual(r.result?.success, false, JSON.stringify(r.result));
    assert.ok(String(r.result?.output ?? '').includes(imageMarkdown(image)), `the desk got the image: ${r.result?.output}`);
  } finally {
    await page.close();
    desk.close();
    await real.close();
  }
});
