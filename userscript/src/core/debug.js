/**
 * The seed manual's debug helpers (mcpAutoSend, mcpTest, mcpFindButton, mcpSimulateInput, …) and
 * a few of ours (docs/userscript.md, "Debug mode"). They exist only when the `debug` value is on
 * in the userscript manager's own storage (GM_setValue: a page cannot set it), and they are
 * reached through the manager's menu (GM_registerMenuCommand) or the panel's debug buttons —
 * never as functions on the page's window: a page must never drive the hub. They never expose
 * the token.
 */
import { userInput } from './protocol.js';
import { findInput, findSendButton, readInput, setInput } from './input.js';

/** Helpers that ask for a text first (the menu and the panel prompt for it). */
const NEEDS_TEXT = {
  mcpAutoSend: '要发送的文字 / text to type and send',
  mcpSendCmd: '发给 hub 的命令 / command for the hub',
  mcpSimulateInput: '要填入输入框的文字（不发送）/ text to put in the box (not sent)',
};

/** Where an element is and what it says, for the console (never the element itself). */
function describeElement(el) {
  if (!el) return null;
  const r = el.getBoundingClientRect();
  return {
    tag: el.tagName.toLowerCase(),
    label: (el.getAttribute('aria-label') || el.getAttribute('title') || el.textContent || '').trim().slice(0, 60),
    disabled: Boolean(el.disabled) || el.getAttribute('aria-disabled') === 'true',
    rect: { x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width), height: Math.round(r.height) },
  };
}

/** The helpers, by name: plain functions of this script's world. */
export function debugHelpers({ doc, hub, runner, capture, adapter, panel }) {
  const input = () => findInput(doc, adapter);
  return {
    /** Types `text` into the box and sends it, as a `deliver` with auto_send would. */
    mcpAutoSend: (text) => runner.handle({ type: 'deliver', text: String(text), auto_send: true }),
    /** Sends a command to the hub as if the person had typed it. */
    mcpSendCmd: (cmd) => hub.send(userInput(String(cmd))),
    /** Puts `text` into the box without sending it (what a task's typing does first). */
    mcpSimulateInput: (text) => {
      const box = input();
      if (!box) return { ok: false, why: 'no input box found' };
      setInput(box, String(text));
      return { ok: readInput(box) === String(text), text: readInput(box) };
    },
    /** The send button this site's adapter (or the fallback) finds. */
    mcpFindButton: () => describeElement(findSendButton(doc, adapter, input())),
    /** One self-check: adapter, hub connection, input box and send button. */
    mcpTest: () => {
      const box = input();
      const send = findSendButton(doc, adapter, box);
      const checks = {
        adapter: adapter.name,
        hub: hub.status.state,
        transport: hub.status.transport || null,
        input: Boolean(box),
        sendButton: Boolean(send),
      };
      return { ok: checks.hub === 'open' && checks.input && checks.sendButton, ...checks };
    },
    /** Connection, queue and capture state. */
    mcpStatus: () => ({
      site: adapter.name,
      hub: { ...hub.status },
      queued: runner.queue.length,
      current: runner.current ? { kind: runner.current.kind, task_id: runner.current.task_id } : null,
      streaming: capture.busy,
      lastTurn: capture.lastTurn ? { id: capture.lastTurn.id, chars: capture.lastTurn.text.length } : null,
    }),
    /**
     * The last captured stream exactly as the site sent it, for recording an adapter fixture
     * (saved as test/adapters/fixtures/<site>-<date>.sse).
     */
    mcpLastStream: () => {
      const turn = capture.lastTurn;
      if (!turn || !turn.raw) return null;
      const bytes = new Uint8Array(turn.rawBytes);
      let offset = 0;
      for (const part of turn.raw) { bytes.set(part, offset); offset += part.length; }
      let binary = '';
      for (const b of bytes) binary += String.fromCharCode(b);
      return {
        site: adapter.name, url: turn.meta.url, method: turn.meta.method, status: turn.meta.status,
        contentType: turn.meta.contentType, requestBody: turn.meta.requestBody, answer: turn.text,
        text: new TextDecoder().decode(bytes), base64: btoa(binary), reads: turn.raw.map((r) => r.length),
      };
    },
    /** Requests seen after a send that no adapter matched: where a moved endpoint went. */
    mcpUnmatched: () => capture.unmatched.map((u) => ({ ...u })),
    /** The panel's text, position and buttons. */
    mcpPanel: () => panel.describe(),
  };
}

/**
 * Runs helper `name` for the menu or the panel: asks for its text when it needs one and none was
 * given (a manager passes its menu event, not a text), shows the result, and returns it.
 */
export function debugRunner(helpers, { ask, show }) {
  return (name, arg) => {
    const fn = helpers[name];
    if (!fn) throw new Error(`no debug helper ${name}`);
    let value = arg;
    if (NEEDS_TEXT[name] && typeof value !== 'string') {
      value = ask(NEEDS_TEXT[name]);
      if (value === null || value === undefined) return undefined;
    }
    const result = fn(value);
    if (result && typeof result.then === 'function') {
      return result.then((r) => { show(name, r); return r; }, (e) => { show(name, { error: String(e) }); throw e; });
    }
    show(name, result);
    return result;
  };
}

/** The menu's entries: one per helper, in the manager's own menu (GM_registerMenuCommand). */
export function installDebugMenu(register, run, names) {
  if (typeof register !== 'function') return [];
  return names.map((name) => register(`AIcard 调试 debug: ${name}`, (ev) => run(name, typeof ev === 'string' ? ev : undefined)));
}

/** The text the panel shows for a helper's result (short; the console has it whole). */
export function resultText(name, result) {
  let text;
  try { text = JSON.stringify(result); } catch { text = String(result); }
  return `${name}: ${text === undefined ? 'ok' : text}`.slice(0, 300);
}
