// A person's Stop of an agent session, at three moments, on the real hub (docs/agents.md "Stop is
// final"), shared by test/browser/agent.test.js (the page-world shim) and test/worlds/agent.test.js
// (every manager's world). One looping master tab (`?<agent loop on>!`) on one mock site:
//
//   (a) during a command: the model wrote `?<sleep 30>!`, it runs; the person types
//       `?<agent stop>!` in the tab → the session ends, the command is cancelled (the panel
//       lists it), nothing is typed into the tab;
//   the person writes a message of their own → a new session, whose results ARE typed and sent;
//   (b) right after that results message was sent (its reply held before it writes a command):
//       Stop from the dashboard (POST /api/agents/sessions/ID/stop) → the reply's command is not
//       run (the panel lists it), nothing is typed;
//   the person writes again → a new session delivers again;
//   (c) while the model streams its answer to those results, holding `?<sleep 30>!` (running) and,
//       later in the stream, another command: the panel's Stop → the sleep is cancelled, the later
//       command never runs, nothing is typed;
//   the person writes again → a new session delivers again, and ends with an answer quoting it.
//
// What counts as "typed into the tab": the `deliver {auto_send: true}` frames the hub sent the
// tab (the recording proxy) and the results messages the mock site received. After each Stop
// none reaches the tab before the person's own next message, and none ever belongs to a stopped
// session; each time the person speaks, the next session must deliver (a hub that never types
// again fails). The memories the not-run commands would have written do not exist.
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { bodyStrings, parseResults } from '../../mock/agent-model.js';

/** Hub flags of the story: no pacing gap, `sleep` may run, a short hold. */
export const STOP_HUB_ARGS = ['--agent-gap', '0-0', '--exec', 'allowlist', '--allow', 'sleep', '--agent-hold-ms', '1000'];

/** Polls `read()` until `ok(value)` (worlds whose page CSP forbids string evaluation). */
export async function until(read, ok, { timeoutMs, what }) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await read();
    if (ok(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(last)?.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A master client without a browser (the person's desk): sends commands, collects cmd_results. */
export async function openDesk(url, token) {
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
  /** Runs `?<BODY>!` and resolves with its cmd_result (matched by its command text). */
  const same = (r, body) => [body, `?<${body}>!`].includes(String(r.command ?? '').trim());
  const run = (body, timeoutMs = 30000) => {
    const taken = new Set(results.filter((r) => same(r, body)));
    ws.send(JSON.stringify({ type: 'user_input', text: `?<${body}>!` }));
    return new Promise((resolve, reject) => {
      const check = () => {
        const hit = results.find((r) => same(r, body) && !taken.has(r));
        if (hit) { clearTimeout(timer); waiters.delete(check); resolve(hit); }
      };
      const timer = setTimeout(() => { waiters.delete(check); reject(new Error(`no cmd_result for ${body} in ${timeoutMs} ms`)); }, timeoutMs);
      waiters.add(check);
      check();
    });
  };
  return { run, close: () => ws.close() };
}

/** The proxy's frames of one tab (its WebSocket connections and its SSE channel). */
export function framesOf(proxy, clientId) {
  const conns = new Set([`http:${clientId}`]);
  for (const f of proxy.frames) if (f.dir === 'down' && f.frame?.type === 'welcome' && f.frame.client_id === clientId) conns.add(f.conn);
  return proxy.frames.filter((f) => conns.has(f.conn));
}

/** The results messages a mock site received since request number `from`. */
export function resultsTypedInto(mock, site, from = 0) {
  return mock.requests(site).slice(from).map((r) => bodyStrings(r.body).find((s) => parseResults(s).length)).filter(Boolean);
}

/** Words of the scripted model's replies that hold no command (what streams around them). */
const FILLER = ' 我先想一想，再写下一步。 Let me think this through before I write the next step.'.repeat(8);

/**
 * Runs the story in `tab`: `{clientId, say(text), clickStop(), panelText()}` — `say` is the person
 * typing a message in the box and sending it (trusted input), `clickStop` a click on the panel's
 * Stop button. `hub` is the real hub (`url`, `token`), `proxy` its recording proxy, `desk` an
 * openDesk client, `tag` makes this run's memories unique (letters and digits).
 */
export async function stopStory({ tab, hub, proxy, desk, mock, site, tag, log = () => {} }) {
  const mine = () => framesOf(proxy, tab.clientId);
  const index = (f) => proxy.frames.indexOf(f);
  const after = (mark) => (f) => index(f) >= mark && mine().includes(f);
  const waitMine = (mark, pred, what, timeoutMs = 30000) => proxy.waitFrame((f) => after(mark)(f) && pred(f), { timeoutMs, what });
  const down = (type) => (f) => f.dir === 'down' && f.frame?.type === type;
  const up = (type) => (f) => f.dir === 'up' && f.frame?.type === type;
  const autoSends = (mark) => mine().filter((f) => index(f) >= mark && down('deliver')(f) && f.frame.auto_send);
  const agentEvent = (state, pred = () => true) => (f) => down('flow_event')(f) && f.frame.detail?.kind === 'agent' && f.frame.state === state && pred(f.frame);
  const userInput = (text) => (f) => up('user_input')(f) && f.frame.text === text;
  const cmdResult = (command) => (f) => down('cmd_result')(f) && String(f.frame.command ?? '').trim().replace(/^\?<|>!$/g, '').trim() === command;
  const panelHas = (text, what) => until(() => tab.panelText(), (t) => typeof t === 'string' && t.includes(text), { timeoutMs: 10000, what });
  /** Waits for the panel's line `LABEL: … COMMAND …` (a list line, not the last result's row). */
  const panelLists = (label, command, what) => until(() => tab.panelText(), (t) => typeof t === 'string'
    && t.split('\n').some((line) => line.startsWith(`${label}: `) && line.includes(command)), { timeoutMs: 10000, what });
  const memoryAbsent = async (word) => {
    const out = String((await desk.run(`memory search ${word}`)).result?.output ?? '');
    assert.match(out, /没有找到 \/ no memory/, `the not-run command wrote no memory (${word}): ${out}`);
  };
  const memoryPresent = async (word) => {
    const out = String((await desk.run(`memory search ${word}`)).result?.output ?? '');
    assert.match(out, /: 1 hit\(s\)/, `the command that ran wrote its memory (${word}): ${out}`);
  };
  /** The person speaks: resolves with the index of the `user_input` the tab reported. */
  const speak = async (text) => {
    const mark = proxy.frames.length;
    await tab.say(text);
    const f = await waitMine(mark, userInput(text), `the person's message reported: ${text.slice(0, 40)}`, 15000);
    return index(f);
  };
  /** After a Stop at `stopMark` of `session`: the person's next message at `spokeAt`; checks what was typed. */
  const nothingTypedBetween = (stopMark, session, spokeAt, moment) => {
    const early = autoSends(stopMark).filter((f) => index(f) < spokeAt);
    assert.deepEqual(early.map((f) => f.frame.deliver_id), [], `${moment}: no automatic send reached the tab between the Stop and the person's own message`);
    const stale = autoSends(stopMark).filter((f) => String(f.frame.agent?.session) === String(session));
    assert.deepEqual(stale.map((f) => f.frame.deliver_id), [], `${moment}: nothing of the stopped session was ever sent to the tab`);
  };
  /** The person's message started a new session that delivered: its results typed into the site. */
  const deliveredAgain = async (mark, stopped, probe, moment) => {
    const d = await waitMine(mark, (f) => down('deliver')(f) && f.frame.auto_send, `${moment}: after the person spoke, the next session's results are sent to the tab`);
    assert.notEqual(String(d.frame.agent?.session), String(stopped), `${moment}: a new session, not the stopped one`);
    const typed = await until(() => resultsTypedInto(mock, site, requestsAt[mark] ?? 0), (r) => r.some((m) => m.includes(probe)),
      { timeoutMs: 20000, what: `${moment}: the results message of ${probe} typed into the site` });
    return { deliver: d, typed };
  };
  const requestsAt = {};
  const markNow = () => { const m = proxy.frames.length; requestsAt[m] = mock.requests(site).length; return m; };

  // The person turns the loop on in this tab.
  let mark = markNow();
  await speak('?<agent loop on>!');
  await waitMine(mark, cmdResult('agent loop on'), 'the answer to agent loop on');
  await waitMine(mark, up('turn_end'), 'the model answered the loop command');
  const fromStory = mock.requests(site).length;

  // (a) Stop typed in the tab while a command runs.
  log('(a) during a command');
  mark = markNow();
  await speak(`AGENT-TEST AGENT-CMD«sleep 30» 请等 30 秒 / wait 30 s (${tag}a)`);
  const runningA = await waitMine(mark, agentEvent('running', (e) => e.detail.command === 'sleep 30'), '(a) the session runs sleep 30');
  const sessionA = runningA.frame.run_id;
  const stopA = markNow();
  const stopAt = await speak('?<agent stop>!');
  const stopSent = Date.now();
  await waitMine(stopA, agentEvent('ended', (e) => e.run_id === sessionA), '(a) the session ended', 5000);
  const endedMs = Date.now() - stopSent;
  assert.ok(endedMs <= 1500, `(a) the Stop acted within about 1 s (${endedMs} ms after the tab reported it)`);
  const cancelled = await waitMine(stopA, cmdResult('sleep 30'), '(a) the running sleep answered (cancelled, not after 30 s)', 10000);
  assert.equal(cancelled.frame.result?.success, false, `(a) the sleep was cancelled: ${JSON.stringify(cancelled.frame.result)}`);
  await panelLists('已取消 / cancelled', 'sleep 30', '(a) the panel lists the cancelled command');
  await waitMine(stopAt, up('turn_end'), '(a) the model answered the typed stop message');

  // The person speaks; (b) the dashboard's Stop right after the new session's results were sent.
  log('(b) right after a results message was sent');
  const probeB = `PROBEB${tag}`;
  const notRunB = `NOTRUNB${tag}`;
  mock.next(site, { answer: `好的，记下来 / I write it down: ?<memory ${probeB} 斑马 tag: agent-test>!${FILLER}` });
  mock.next(site, { answer: `${FILLER} 下一步 / next: ?<memory ${notRunB} 不该写 tag: agent-test>! 完。`, hold: `stop-b-${tag}` });
  mark = markNow();
  const spokeB = await speak(`请记下 ${probeB} / write it down (${tag}b)`);
  nothingTypedBetween(stopA, sessionA, spokeB, '(a)');
  const b = await deliveredAgain(mark, sessionA, probeB, '(a)');
  const sessionB = b.deliver.frame.agent.session;
  await mock.held(`stop-b-${tag}`);
  const stopB = markNow();
  const res = await fetch(`${hub.url}/api/agents/sessions/${encodeURIComponent(sessionB)}/stop`, { method: 'POST', headers: { Authorization: `Bearer ${hub.token}` } });
  assert.equal(res.status, 200, `(b) the dashboard's Stop: ${await res.clone().text()}`);
  await waitMine(stopB, agentEvent('ended', (e) => e.run_id === sessionB), '(b) the session ended', 5000);
  mock.release(`stop-b-${tag}`);
  await waitMine(stopB, (f) => up('turn_end')(f) && f.frame.text.includes(notRunB), '(b) the held reply ended, its command written');
  await panelLists('未运行 / not run', `memory ${notRunB}`, '(b) the panel lists the command that did not run');

  // The person speaks; (c) the panel's Stop while the model streams an answer holding commands.
  log('(c) while the model streams');
  const probeC = `PROBEC${tag}`;
  const notRunC = `NOTRUNC${tag}`;
  mock.next(site, { answer: `好的 / OK: ?<memory ${probeC} 斑马 tag: agent-test>!${FILLER}` });
  mock.next(site, { answer: `先等 / first I wait: ?<sleep 30>!${FILLER} 然后 / then: ?<memory ${notRunC} 不该写 tag: agent-test>! 完。`, hold: `stop-c-${tag}` });
  mark = markNow();
  const spokeC = await speak(`请记下 ${probeC} / write it down (${tag}c)`);
  nothingTypedBetween(stopB, sessionB, spokeC, '(b)');
  const c = await deliveredAgain(mark, sessionB, probeC, '(b)');
  const sessionC = c.deliver.frame.agent.session;
  await mock.held(`stop-c-${tag}`);
  await waitMine(mark, agentEvent('running', (e) => e.run_id === sessionC && e.detail.command === 'sleep 30'), '(c) the streamed sleep 30 runs');
  await panelHas('⋯ sleep 30', '(c) the panel shows the command running');
  const stopC = markNow();
  await tab.clickStop();
  await waitMine(stopC, userInput('?<agent stop>!'), '(c) the panel\'s Stop sent', 5000);
  const clicked = Date.now();
  await waitMine(stopC, agentEvent('ended', (e) => e.run_id === sessionC), '(c) the session ended', 5000);
  assert.ok(Date.now() - clicked <= 1500, `(c) the Stop acted within about 1 s (${Date.now() - clicked} ms)`);
  const cancelledC = await waitMine(stopC, cmdResult('sleep 30'), '(c) the running sleep answered (cancelled)', 10000);
  assert.equal(cancelledC.frame.result?.success, false, `(c) the sleep was cancelled: ${JSON.stringify(cancelledC.frame.result)}`);
  mock.release(`stop-c-${tag}`);
  await waitMine(stopC, (f) => up('turn_end')(f) && f.frame.text.includes(notRunC), '(c) the held reply ended, its later command written');
  await panelLists('未运行 / not run', `memory ${notRunC}`, '(c) the panel lists the later command, not run');
  await panelLists('已取消 / cancelled', 'sleep 30', '(c) the panel lists the cancelled sleep');

  // The person speaks; the next session delivers and ends with the answer.
  log('the person speaks after (c)');
  const probeD = `PROBED${tag}`;
  mark = markNow();
  const spokeD = await speak(`AGENT-TEST AGENT-CMD«memory ${probeD} 斑马 zebra tag: agent-test» 请记下来 / write it down (${tag}d)`);
  nothingTypedBetween(stopC, sessionC, spokeD, '(c)');
  await deliveredAgain(mark, sessionC, probeD, '(c)');
  await waitMine(mark, (f) => up('turn_end')(f) && f.frame.text.startsWith('结果说'), 'the final answer quoting the result');

  // Across the story: three results messages typed, each of a session the person started.
  const typed = resultsTypedInto(mock, site, fromStory);
  assert.deepEqual(typed.map((m) => parseResults(m)[0].command.replace(/ 斑马.*$/, '')), [`memory ${probeB}`, `memory ${probeC}`, `memory ${probeD}`],
    'exactly the three results messages of the sessions the person started; none of a stopped one');
  const inputs = mine().filter(up('user_input')).map((f) => f.frame.text).filter((text) => !text.startsWith('?<agent loop on'));
  assert.equal(inputs.filter((x) => x === '?<agent stop>!').length, 2, 'the typed stop and the panel\'s');
  assert.ok(!inputs.some((x) => x.includes('⟦aicard result')), 'the results typed by the hub are never the person\'s input');
  for (const word of [probeB, probeC, probeD]) await memoryPresent(word);
  for (const word of [notRunB, notRunC]) await memoryAbsent(word);
  return { sessions: [sessionA, sessionB, sessionC] };
}
