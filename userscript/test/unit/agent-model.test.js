// The mock sites' scripted agent model (mock/agent-model.js): the task gets one command, the hub's
// results message gets an answer quoting the result, on every mock site's own request encoding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentReply, bodyStrings, DEFAULT_AGENT_COMMAND, parseResults } from '../../mock/agent-model.js';
import { sites } from '../../mock/sites/index.js';

const RESULTS = [
  '⟦aicard result 1/1⟧ memory AGENT-PROBE 斑马 zebra 🦓 tag: agent-test → ✓',
  '已记住 / remembered #7 (global)',
  'round 1/25 · 完成后写 / when finished write: ?‹done 最终答案 / FINAL ANSWER›!',
].join('\n');

/** The body a mock page would POST for `prompt` (its own request builder, run as the page runs it). */
async function bodyFor(site, prompt) {
  const m = /var buildRequest = ([\s\S]*?);\n\s*var input = /.exec(site.page());
  assert.ok(m, `${site.name}: request builder found in its page`);
  // The page's own code, as the page runs it (with the page's `location`).
  const build = new Function('location', `return (${m[1]});`)({ hostname: site.hosts[0], href: `https://${site.hosts[0]}/`, search: '', pathname: '/' });
  const ctx = { uuid: () => '00000000-0000-4000-8000-000000000000', turn: 2, now: 1789181711000, host: site.hosts[0] };
  const req = build(prompt, ctx);
  if (typeof req.body === 'string') return req.body;
  return new Response(req.body).text(); // FormData (xinghuo): the multipart text the server reads
}

test('the task: one command, the default one unless the prompt picks another', () => {
  const first = agentReply(JSON.stringify({ prompt: 'primer …\n\nAGENT-TEST: write a memory' }));
  assert.equal((first.answer.match(/\?</g) || []).length, 1);
  assert.ok(first.answer.includes(`?<${DEFAULT_AGENT_COMMAND}>!`));
  assert.equal(first.hold, undefined);
  const picked = agentReply(JSON.stringify({ prompt: 'AGENT-TEST AGENT-CMD«help done» AGENT-HOLD«r1»' }));
  assert.ok(picked.answer.startsWith('好的') && picked.answer.includes('?<help done>!'));
  assert.equal(picked.hold, 'r1');
  // The command comes early: a reply held halfway is held after its command.
  assert.ok(picked.answer.indexOf('>!') < picked.answer.length / 3);
});

test('the results message: the answer quotes the first result and holds no command or header', () => {
  const reply = agentReply(JSON.stringify({ prompt: RESULTS }));
  assert.equal(reply.answer, '结果说 / The result said: «已记住 / remembered #7 (global)» ✓。任务完成 / done.');
  assert.ok(!reply.answer.includes('?<') && !reply.answer.includes('⟦'));
  const failed = agentReply(JSON.stringify({ prompt: '⟦aicard result 1/2⟧ echo hi → ✗\nshell is off\n⟦aicard result 2/2⟧ help → ✓\nusage\nround 2/25 · …' }));
  assert.match(failed.answer, /«shell is off» ✗/);
  assert.deepEqual(parseResults(RESULTS).map((b) => [b.index, b.of, b.ok, b.output]), [[1, 1, true, '已记住 / remembered #7 (global)']]);
});

test('the primer\'s description of the format is not a results message; other prompts get nothing', () => {
  const primer = '结果格式 / results: ⟦aicard result k/N⟧ COMMAND → ✓|✗, then its output\nAGENT-TEST go';
  assert.match(agentReply(JSON.stringify({ prompt: primer })).answer, /\?<memory/);
  assert.equal(agentReply(JSON.stringify({ prompt: 'hello' })), null);
  assert.equal(agentReply(''), null);
});

test('every mock site\'s request body: the task and the results message are found', async () => {
  for (const site of sites) {
    const task = await bodyFor(site, '说明 primer\nAGENT-TEST 请写一条记忆');
    assert.match(agentReply(task)?.answer || '', /\?<memory AGENT-PROBE/, `${site.name}: task`);
    const results = await bodyFor(site, RESULTS);
    assert.match(agentReply(results)?.answer || '', /remembered #7/, `${site.name}: results`);
    assert.ok(bodyStrings(results).length >= 1);
  }
});
