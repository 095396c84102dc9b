// The page-reading fallback (src/core/dom-fallback.js) on every mock site: the site renders a reply
// with paragraphs, a line break, a numbered and a bulleted list, inline code and bold, and a code
// block inside the site's own chrome (language banner, copy button), in markup written from the real
// page's structure (mock/sites/lib/page.js MARKUP). The watcher, baselined before the send, reads
// back exactly the markdown the stream carried — as a person copies it, not the page's chrome.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { build } from 'esbuild';

import { startMockServer, variantHost } from '../../mock/server.js';
import { launchBrowser, ROOT } from './harness.js';
import { loadAdapters, personTypesAndSends } from './fixtures.js';

const STRUCTURED = [
  'Plan 计划:',
  'first line',
  'second line 第二行',
  '',
  '1. Open the file 打开文件',
  '2. Run `make test` now',
  '3. **Check** the result',
  '',
  '- fast 快',
  '- safe',
  '',
  '```python',
  'def hello():',
  '    print("你好")',
  '    return [1, 2]',
  '```',
  '',
  'Done ✅',
].join('\n');

let mock; let browser; let adapters; let bundle;

before(async () => {
  mock = await startMockServer({ csp: false });
  browser = await launchBrowser({ mock });
  adapters = await loadAdapters();
  const out = await build({
    stdin: { contents: "export { DomReplyWatcher, replyText } from './src/core/dom-fallback.js';", resolveDir: ROOT, loader: 'js' },
    bundle: true, format: 'iife', globalName: 'AicardDom', write: false,
  });
  bundle = out.outputFiles[0].text;
});

after(async () => {
  await browser?.close();
  await mock?.close();
});

test('every site: the reply read from the page keeps lists, line breaks and code blocks, and nothing of the chrome', async () => {
  const results = {};
  for (const site of mock.sites) {
    const adapter = adapters.get(site.name);
    if (!adapter || site.name === 'sim') continue;
    const page = await browser.context.newPage();
    try {
      await page.goto(`https://${variantHost(site, 'default')}/`, { waitUntil: 'domcontentloaded' });
      await page.addScriptTag({ content: bundle });
      await page.evaluate(() => {
        window.__watcher = new window.AicardDom.DomReplyWatcher({ doc: document, adapter: null, timers: window });
      });
      mock.next(site.name, { answer: STRUCTURED, render: true });
      await personTypesAndSends(page, adapter, 'Show me the structure 请给出结构');
      await page.waitForSelector('.mock-msg.assistant[data-done="true"]', { timeout: 10000 });
      results[site.name] = await page.evaluate(() => window.__watcher.read());
    } finally {
      await page.close();
    }
  }
  for (const [site, text] of Object.entries(results)) assert.equal(text, STRUCTURED, `${site}: the page text is the reply as written`);
  assert.ok(Object.keys(results).length >= 9, `all sites checked: ${Object.keys(results)}`);
});

test('the reply element that existed before the send is not taken for the new reply', async () => {
  const site = mock.sites.find((s) => s.name === 'deepseek');
  const adapter = adapters.get('deepseek');
  const page = await browser.context.newPage();
  try {
    await page.goto(`https://${site.hosts[0]}/`, { waitUntil: 'domcontentloaded' });
    await page.addScriptTag({ content: bundle });
    mock.next('deepseek', { answer: 'First reply 第一条', render: true });
    await personTypesAndSends(page, adapter, 'one');
    await page.waitForSelector('.mock-msg.assistant[data-done="true"]');
    const before = await page.evaluate(() => {
      window.__watcher = new window.AicardDom.DomReplyWatcher({ doc: document, adapter: null, timers: window });
      return window.__watcher.read();
    });
    assert.equal(before, '', 'nothing new yet');
    mock.next('deepseek', { answer: 'Second reply 第二条', render: true });
    await personTypesAndSends(page, adapter, 'two');
    await page.waitForFunction(() => document.querySelectorAll('.mock-msg.assistant[data-done="true"]').length === 2);
    assert.equal(await page.evaluate(() => window.__watcher.read()), 'Second reply 第二条');
  } finally {
    await page.close();
  }
});

