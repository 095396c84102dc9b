/**
 * Debug helpers from the seed (mcpAutoSend, mcpSendCmd, …), put on the page window only when the
 * `debug` GM value is on. They never expose the token.
 */
import { userInput } from './protocol.js';

export function installDebugHelpers(win, { hub, runner, capture, adapter, panel, wrap = (fn) => fn }) {
  const helpers = {
    /** Types `text` into the box and sends it, as a `deliver` with auto_send would. */
    mcpAutoSend: (text) => runner.handle({ type: 'deliver', text: String(text), auto_send: true }),
    /** Sends a command to the hub as if the person had typed it. */
    mcpSendCmd: (cmd) => hub.send(userInput(String(cmd))),
    /** Connection, queue and capture state, for the console. */
    mcpStatus: () => ({
      site: adapter.name,
      hub: { ...hub.status },
      queued: runner.queue.length,
      current: runner.current ? { kind: runner.current.kind, task_id: runner.current.task_id } : null,
      streaming: capture.busy,
      lastTurn: capture.lastTurn ? { id: capture.lastTurn.id, chars: capture.lastTurn.text.length } : null,
    }),
    /**
     * The last captured stream exactly as the site sent it, for recording an adapter fixture:
     * `copy(mcpLastStream().text)` in the console, save as test/adapters/fixtures/<site>-<date>.sse.
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
  for (const [name, fn] of Object.entries(helpers)) win[name] = wrap(fn);
}
