// The seed manual's debug helpers (docs/userscript.md, "Debug mode"): reached through the
// userscript manager's menu (GM_registerMenuCommand) and the panel, never put on a window; a
// helper that needs a text asks for it (a manager hands its menu callback an event, not a text);
// every result is shown and returned; the token never appears.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { debugHelpers, debugRunner, installDebugMenu, resultText } from '../../src/core/debug.js';

function world() {
  const sent = [];
  const handled = [];
  const hub = { status: { state: 'open', transport: 'ws', token: undefined }, send: (f) => sent.push(f) };
  const runner = { queue: [], current: null, handle: (f) => { handled.push(f); return Promise.resolve('typed'); } };
  const capture = { busy: false, lastTurn: null, unmatched: [{ url: 'https://x/api' }] };
  const doc = { querySelector: () => null, querySelectorAll: () => [] };
  const panel = { describe: () => ({ text: 'AIcard' }) };
  const helpers = debugHelpers({ doc, hub, runner, capture, adapter: { name: 'sim' }, panel });
  return { helpers, sent, handled };
}

test('the manual\'s helpers exist and each is one entry of the manager\'s menu', () => {
  const { helpers } = world();
  for (const name of ['mcpAutoSend', 'mcpTest', 'mcpFindButton', 'mcpSimulateInput', 'mcpSendCmd', 'mcpStatus', 'mcpPanel']) {
    assert.equal(typeof helpers[name], 'function', name);
  }
  const registered = [];
  const run = debugRunner(helpers, { ask: () => null, show: () => {} });
  installDebugMenu((label, fn) => { registered.push({ label, fn }); return registered.length; }, run, Object.keys(helpers));
  assert.equal(registered.length, Object.keys(helpers).length);
  assert.ok(registered.every((r) => /^AIcard 调试 debug: mcp\w+$/.test(r.label)), JSON.stringify(registered.map((r) => r.label)));
  // Without the manager's menu nothing is registered (and nothing fails).
  assert.deepEqual(installDebugMenu(undefined, run, ['mcpStatus']), []);
});

test('a menu entry runs its helper, asks for a text when it needs one, and shows the result', async () => {
  const { helpers, sent, handled } = world();
  const shown = [];
  const asked = [];
  const answers = ['?<skill list>!', null];
  const run = debugRunner(helpers, { ask: (q) => { asked.push(q); return answers.shift(); }, show: (n, r) => shown.push(resultText(n, r)) });
  const menu = {};
  installDebugMenu((label, fn) => { menu[label.split(': ')[1]] = fn; }, run, Object.keys(helpers));
  // A manager passes an event object: the helper asks for its text.
  menu.mcpSendCmd({ type: 'click' });
  assert.equal(sent.length, 1);
  assert.equal(sent[0].type, 'user_input');
  assert.equal(sent[0].text, '?<skill list>!');
  assert.equal(asked.length, 1);
  // Cancelled prompt: nothing is sent.
  menu.mcpSendCmd({ type: 'click' });
  assert.equal(sent.length, 1);
  // A text given directly is used as is; an async helper's result is shown when it comes.
  assert.equal(await menu.mcpAutoSend('hello'), 'typed');
  assert.deepEqual(handled, [{ type: 'deliver', text: 'hello', auto_send: true }]);
  const status = menu.mcpStatus();
  assert.equal(status.site, 'sim');
  assert.equal(status.hub.state, 'open');
  const t = menu.mcpTest();
  assert.deepEqual({ ok: t.ok, input: t.input, sendButton: t.sendButton, hub: t.hub }, { ok: false, input: false, sendButton: false, hub: 'open' });
  assert.deepEqual(menu.mcpSimulateInput('x'), { ok: false, why: 'no input box found' });
  assert.equal(menu.mcpFindButton(), null);
  assert.ok(shown.some((s) => s.startsWith('mcpStatus: {"site":"sim"')), JSON.stringify(shown));
  assert.ok(shown.some((s) => s === 'mcpAutoSend: "typed"'), JSON.stringify(shown));
  assert.ok(shown.every((s) => s.length <= 300));
});
