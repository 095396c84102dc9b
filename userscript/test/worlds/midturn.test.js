// A task that reaches a worker tab while the tab is still answering something the person typed
// by hand (issue: the end of the person's turn completed the task with the wrong text). In the
// USER_SCRIPT world of our Chromium test extension, on the real hub: the person's reply is held
// mid-stream by the mock site, the master sends `?<to ds: …>!`, the task arrives mid-turn; the tab
// must wait for the person's turn to end, then type the task, and the master must get the task's
// answer — never the person's conversation.
//   node --test --test-reporter=spec test/worlds/midturn.test.js
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startMockServer } from '../../mock/server.js';
import { servedUserscript } from '../browser/harness.js';
import { loadAdapters } from '../browser/fixtures.js';
import { ensureHubBinary, startRealHub, startRecordingProxy } from '../browser/real-hub.js';
import { launchChromium } from './chromium.js';

let unavailable = ensureHubBinary();
let mock; let hub; let proxy; let browser; let adapters;

before(async () => {
  if (unavailable) return;
  mock = await startMockServer();
  hub = await startRealHub({ origins: mock.hosts.map((h) => `https://${h}`) });
  proxy = await startRecordingProxy(hub.url);
  browser = await launchChromium({ mock, world: 'USER_SCRIPT', lna: 'granted', userscript: servedUserscript(proxy.url, hub.token) });
  adapters = await loadAdapters();
});

after(async () => {
  await browser?.close();
  await proxy?.close();
  await hub?.close();
  await mock?.close();
});

/** A master client without a browser: says hello, sends commands, collects cmd_results. */
async function master(url, token) {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/realtime`);
  const results = [];
  const waiters = new Set();
  await new Promise((resolve, reject) => {
    ws.once('error', reject);
    ws.once('open', () => ws.send(JSON.stringify({ type: 'hello', token, site: 'sim', role: 'master', label: 'desk' })));
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data));
      if (frame.type === 'welcome') resolve();
      if (frame.type === 'cmd_result') { results.push(frame); for (const w of [...waiters]) w(); }
    });
  });
  return {
    command: (text) => ws.send(JSON.stringify({ type: 'user_input', text })),
    result: (timeoutMs) => new Promise((resolve, reject) => {
      const check = () => { if (results.length) { clearTimeout(timer); waiters.delete(check); resolve(results[0]); } };
      const timer = setTimeout(() => { waiters.delete(check); reject(new Error('no cmd_result in time')); }, timeoutMs);
      waiters.add(check);
      check();
    }),
    close: () => ws.close(),
  };
}

test('a task that arrives while the person\'s reply streams is typed after it, and answered by its own reply', async (t) => {
  if (unavailable) { t.skip(unavailable); return; }
  const site = adapters.get('deepseek');
  const tab = await browser.openTab({ host: mock.sites.find((s) => s.name === 'deepseek').hosts[0], values: { label: 'ds' } });
  const desk = await master(hub.url, hub.token);
  try {
    await proxy.waitFrame((f) => f.dir === 'down' && f.frame?.type === 'welcome' && f.frame.label === 'ds', { what: 'the worker tab\'s welcome' })
      .catch(() => proxy.waitFrame((f) => f.dir === 'down' && f.frame?.type === 'welcome', { what: 'a welcome' }));
    const personAnswer = 'PERSON-CONVERSATION: the weather is fine today. 今天天气不错。';
    const taskAnswer = 'TASK-ANSWER: three bullet points. 三点总结 ✅';
    mock.next('deepseek', { answer: personAnswer, hold: 'person' });
    mock.next('deepseek', { answer: taskAnswer });

    await tab.typeAndSend(site.input.selectors, site.send.selectors, 'How is the weather?', site.send.key || 'Enter');
    await mock.held('person');
    desk.command('?<to ds: Summarise the plan in three bullet points>!');
    await proxy.waitFrame((f) => f.dir === 'down' && f.frame?.type === 'task', { what: 'the task reaching the tab mid-turn' });
    assert.equal(mock.requests('deepseek').length, 1, 'the task is not typed while the person\'s reply still streams');
    mock.release('person');

    const result = await desk.result(60000);
    const output = String(result.result?.output ?? '');
    assert.ok(output.includes(taskAnswer), `the master got the task's answer: ${output}`);
    assert.ok(!output.includes('PERSON-CONVERSATION'), 'and not the person\'s conversation');
    const bodies = mock.requests('deepseek').map((r) => site.promptFromRequest(r.body));
    assert.deepEqual(bodies, ['How is the weather?', 'Summarise the plan in three bullet points'], 'the task was typed after the person\'s turn');
    const untagged = proxy.frames.find((f) => f.dir === 'up' && f.frame?.type === 'turn_end' && f.frame.text === personAnswer);
    assert.ok(untagged && !untagged.frame.task_id, 'the person\'s turn went up untagged');
  } finally {
    desk.close();
    await tab.close();
  }
});
