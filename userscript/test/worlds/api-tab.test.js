// The OpenAI-compatible API through a real browser tab: the official OpenAI Python SDK asks
// `site/deepseek` on the real hub; the DeepSeek mock tab (our Chromium test extension, USER_SCRIPT
// world) types the prompt, the site streams its thinking and its answer, and the SDK's stream
// reassembles both, apart: the answer as `content`, the thinking as `reasoning_content`.
// Needs `pip install openai` (tests/sdk/run.sh installs it; test-all.sh runs that first).
//   node --test --test-reporter=spec test/worlds/api-tab.test.js
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { startMockServer } from '../../mock/server.js';
import { servedUserscript } from '../browser/harness.js';
import { loadAdapters } from '../browser/fixtures.js';
import { ensureHubBinary, startRealHub, startRecordingProxy } from '../browser/real-hub.js';
import { launchChromium } from './chromium.js';

const PY = process.env.PYTHON || 'python3';
let unavailable = ensureHubBinary();
if (!unavailable && spawnSync(PY, ['-c', 'import openai']).status !== 0) {
  unavailable = 'the openai package is not installed (bash tests/sdk/run.sh installs it)';
}
let mock; let hub; let proxy; let browser; let adapters;

before(async () => {
  if (unavailable) return;
  mock = await startMockServer();
  hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`) });
  proxy = await startRecordingProxy(hub.url);
  browser = await launchChromium({ mock, world: 'USER_SCRIPT', lna: 'denied', userscript: servedUserscript(proxy.url, hub.token) });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await proxy?.close();
  await hub?.close();
  await mock?.close();
});

const SDK_SCRIPT = `
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2], max_retries=0, timeout=60)
stream = client.chat.completions.create(
    model="site/deepseek",
    messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": sys.argv[3]}],
    stream=True,
)
text, thinking, finishes = "", "", []
for event in stream:
    for choice in event.choices:
        text += choice.delta.content or ""
        thinking += getattr(choice.delta, "reasoning_content", None) or ""
        if choice.finish_reason:
            finishes.append(choice.finish_reason)
print(json.dumps({"text": text, "thinking": thinking, "finishes": finishes}))
`;

function runSdk(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(PY, ['-c', SDK_SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = ''; let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`SDK exited ${code}: ${err}`))));
  });
}

test('an OpenAI SDK stream is typed into a real tab and comes back as the site streamed it', async (t) => {
  if (unavailable) { t.skip(unavailable); return; }
  const site = adapters.get('deepseek');
  const tab = await browser.openTab({ host: mock.sites.find((s) => s.name === 'deepseek').hosts[0], values: { label: 'api-ds' } });
  try {
    await proxy.waitFrame((f) => f.dir === 'up' && f.frame?.type === 'ack' && f.frame.received === 'welcome', { what: 'the tab confirming its event stream' });
    const answer = 'Three words only. 三个词 ✅🚀';
    const reasoning = 'The user wants brevity. 要简短。';
    mock.next('deepseek', { answer, reasoning, variant: 'thinking' });
    const result = await runSdk([hub.url, hub.token, 'Describe AIcard']);
    assert.equal(result.text, answer, 'the SDK reassembles exactly what the site streamed');
    assert.deepEqual(result.finishes, ['stop'], 'exactly one finish_reason');
    assert.equal(result.thinking, reasoning, "DeepSeek's thinking arrives as reasoning_content, apart from the answer");
    const typed = site.promptFromRequest(mock.requests('deepseek').at(-1).body);
    assert.ok(typed.endsWith('Describe AIcard'), `the tab typed the last user message: ${typed}`);
    assert.ok(typed.includes('Be brief.'), 'with the earlier messages flattened above it');
  } finally {
    await tab.close();
  }
});
