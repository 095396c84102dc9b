/**
 * Debug helpers from the seed (mcpAutoSend, mcpSendCmd, …), put on the page window only when the
 * `debug` GM value is on. They never expose the token.
 */
import { userInput } from './protocol.js';

export function installDebugHelpers(win, { hub, runner, capture, adapter, panel }) {
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
    /** The panel's text, position and buttons. */
    mcpPanel: () => panel.describe(),
  };
  for (const [name, fn] of Object.entries(helpers)) win[name] = fn;
}
