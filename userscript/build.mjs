// Builds dist/aicard.user.js: the ==UserScript== header plus one esbuild IIFE bundle of src/.
// Run: `npm run build` (writes the file) — `buildUserscript()` returns the text for the test
// that checks the committed bundle matches its sources.
import { build } from 'esbuild';
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
export const OUTPUT = join(here, 'dist', 'aicard.user.js');
const ADAPTERS_INDEX = join(here, 'src', 'adapters', 'index.js');

/** Hosts the product promises to support (SPEC §1); adapters may add more. */
export const REQUIRED_HOSTS = [
  'chat.deepseek.com', 'www.doubao.com', 'yuanbao.tencent.com',
  'tongyi.aliyun.com', 'www.qianwen.com', 'chat.qwen.ai',
  'chatgpt.com', 'chat.openai.com', 'claude.ai', 'gemini.google.com',
  'kimi.moonshot.cn', 'www.kimi.com', 'chatglm.cn',
  'yiyan.baidu.com', 'xinghuo.xfyun.cn',
];

async function adapterHosts() {
  if (!existsSync(ADAPTERS_INDEX)) return [];
  const { adapters } = await import(pathToFileURL(ADAPTERS_INDEX).href);
  return adapters.flatMap((a) => a.hosts);
}

export async function header() {
  const hosts = [...new Set([...REQUIRED_HOSTS, ...(await adapterHosts())])];
  const lines = [
    ['name', 'AIcard'],
    ['name:zh-CN', 'AIcard 多模型协作'],
    ['namespace', 'https://github.com/aicard/aicard'],
    ['version', pkg.version],
    ['description', 'Turns your web AI chat tabs into one team: streams replies to the local AIcard hub, types its tasks, shows flow progress. / 把网页 AI 对话标签页组成一个团队：回复实时发往本地 AIcard hub，自动输入任务，显示流程进度。'],
    ['description:zh-CN', '把网页 AI 对话标签页组成一个团队：回复实时发往本地 AIcard hub，自动输入任务，显示流程进度。'],
    ['author', 'AIcard'],
    ['license', 'MIT'],
    ...hosts.map((h) => ['match', `https://${h}/*`]),
    // The earliest start each manager offers: document-start everywhere, and ScriptCat's
    // @early-start (ignored by the others), without which it runs after the page's first scripts.
    ['run-at', 'document-start'],
    ['early-start', ''],
    ['grant', 'GM_getValue'],
    ['grant', 'GM_setValue'],
    ['grant', 'GM_xmlhttpRequest'],
    ['grant', 'GM.xmlHttpRequest'],
    ['grant', 'GM_info'],
    ['grant', 'GM_registerMenuCommand'],
    ['grant', 'unsafeWindow'],
    ['connect', '127.0.0.1'],
    ['connect', 'localhost'],
    ['noframes', ''],
    ['updateURL', '__AICARD_HUB_URL__/aicard.user.js'],
    ['downloadURL', '__AICARD_HUB_URL__/aicard.user.js'],
  ];
  const width = Math.max(...lines.map(([k]) => k.length));
  const body = lines.map(([k, v]) => `// @${k.padEnd(width)}${v ? ` ${v}` : ''}`.trimEnd());
  return ['// ==UserScript==', ...body, '// ==/UserScript==', ''].join('\n');
}

/** Until the site adapters exist, `src/adapters/index.js` resolves to an empty list. */
const missingAdapters = {
  name: 'missing-adapters',
  setup(b) {
    b.onResolve({ filter: /adapters\/index\.js$/ }, (args) => {
      const path = join(args.resolveDir, args.path);
      if (existsSync(path)) return undefined;
      console.warn(`build: ${path} not found, bundling without site adapters`);
      return { path, namespace: 'missing-adapters' };
    });
    b.onLoad({ filter: /.*/, namespace: 'missing-adapters' }, () => ({ contents: 'export const adapters = [];', loader: 'js' }));
  },
};

export async function buildUserscript() {
  const result = await build({
    entryPoints: [join(here, 'src', 'userscript.js')],
    bundle: true,
    format: 'iife',
    target: ['chrome100', 'firefox100', 'safari15'],
    charset: 'utf8',
    legalComments: 'none',
    absWorkingDir: here,
    write: false,
    logLevel: 'silent',
    define: { 'process.env.AICARD_VERSION': JSON.stringify(pkg.version) },
    plugins: [missingAdapters],
  });
  return (await header()) + '\n' + result.outputFiles[0].text;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const text = await buildUserscript();
  mkdirSync(dirname(OUTPUT), { recursive: true });
  writeFileSync(OUTPUT, text);
  console.log(`wrote ${OUTPUT} (${text.length} bytes)`);
}
