/**
 * Wire protocol v1 frame builders and the hub→tab frame reader (docs/protocol.md, HELPERS.md).
 * This is the only file that knows frame field names; everything else calls these builders,
 * so this file and docs/protocol.md describe one protocol.
 */

export const PROTOCOL_VERSION = 1;

/**
 * Task states a tab reports in `task_update` (docs/protocol.md); `held`: it waits to type because the
 * person is typing in the box (`deliveryHeld`); `attaching`: it puts the task's files into the
 * composer (`attaching`, with `done` of `of`).
 */
export const TASK_STATES = Object.freeze(['accepted', 'attaching', 'sent', 'streaming', 'done', 'failed', 'held']);

/** Frame types the hub may send to a tab (docs/protocol.md "Hub → client"). */
export const HUB_FRAME_TYPES = Object.freeze([
  'welcome', 'cmd_result', 'cmd_output', 'task', 'cancel', 'deliver', 'flow_control', 'flow_event', 'ack', 'error', 'heartbeat',
]);

/** Copies only the defined optional fields, so frames never carry `null` placeholders. */
function withOptional(frame, optional) {
  for (const [key, value] of Object.entries(optional)) {
    if (value !== undefined && value !== null && value !== '') frame[key] = value;
  }
  return frame;
}

/** `hello` — the first frame on both sockets and the first POST of the SSE fallback. */
export function hello({ token, clientId, site, url, title, label, role, version }) {
  if (!token) throw new Error('hello needs the hub token / 缺少令牌');
  if (!site) throw new Error('hello needs the site name / 缺少站点名');
  return withOptional({ type: 'hello', token, site }, {
    client_id: clientId, url, title, label, role, version,
  });
}

/**
 * `chunk` — one delta of the assistant's answer; the model's thinking, kept apart by the
 * adapters, rides along as `reasoning` (the hub never scans it for commands).
 */
export function chunk(turnId, seq, text, reasoning) {
  return withOptional({ type: 'chunk', turn_id: turnId, seq, text }, { reasoning });
}

/**
 * `turn_end` — the reply is complete; `text` is the exact full answer, never empty (an empty
 * answer is a parser miss); `extra.source` says how it was read: `network` or `dom`.
 */
export function turnEnd(turnId, text, taskId, extra = {}) {
  return withOptional({ type: 'turn_end', turn_id: turnId, text }, { task_id: taskId, ...extra });
}

/** `flow_report` — the seed's stream lifecycle report. */
export function flowReport(turnId, event, { status, fragmentCount } = {}) {
  if (!['flow_start', 'status_update', 'flow_end'].includes(event)) {
    throw new Error(`unknown flow_report event: ${event}`);
  }
  return withOptional({ type: 'flow_report', turn_id: turnId, event }, {
    status, fragment_count: fragmentCount,
  });
}

/** `user_input` — what the person submitted in this tab (commands typed by hand). */
export function userInput(text) {
  return { type: 'user_input', text };
}

/** `task_update.trouble` kinds (docs/flows.md). */
export const TROUBLES = Object.freeze(['rate_limited', 'captcha', 'login', 'network', 'site_error', 'parser_miss', 'content_filter', 'attachment_refused']);

/** `task_update` — progress of a hub task in this tab; `trouble` says why the site refused. */
export function taskUpdate(taskId, state, error, trouble) {
  if (!TASK_STATES.includes(state)) throw new Error(`unknown task state: ${state}`);
  if (trouble !== undefined && !TROUBLES.includes(trouble)) throw new Error(`unknown trouble: ${trouble}`);
  return withOptional({ type: 'task_update', task_id: taskId, state }, { error, trouble });
}

/**
 * `task_update {task_id, state: "attaching", done, of}` — the tab puts the task's files into the
 * composer: `done` of the `of` files have finished uploading on the site (sent at 0 and after each).
 */
export function attaching(taskId, done, of) {
  if (!taskId) throw new Error('attaching needs the task_id');
  return { type: 'task_update', task_id: taskId, state: 'attaching', done, of };
}

/**
 * `task_update {deliver_id, state: "held"}` — an automatic delivery waits because the person
 * pressed a key in the input box within the hub's `hold_ms`: sent when the hold begins and every
 * 2 s while it lasts; the hub starts its arrival window for that delivery again on each.
 */
export function deliveryHeld(deliverId) {
  if (!deliverId) throw new Error('held needs the deliver_id');
  return { type: 'task_update', deliver_id: deliverId, state: 'held' };
}

/**
 * `task_update {deliver_id, state: "attaching", done, of}` — an agent loop's delivery carries files
 * (`attachments`): the tab puts them into the composer first; each report restarts the hub's arrival
 * window for that delivery as `held` does.
 */
export function deliveryAttaching(deliverId, done, of) {
  if (!deliverId) throw new Error('attaching needs the deliver_id');
  return { type: 'task_update', deliver_id: deliverId, state: 'attaching', done, of };
}

/**
 * `task_update {deliver_id, state: "failed", error, trouble}` — the tab could not send an agent
 * loop's delivery (a file the site refused: `attachment_refused`, `error` naming the file and the
 * site's reason). Nothing was sent; the hub's loop pauses the session and says why.
 */
export function deliveryFailed(deliverId, error, trouble) {
  if (!deliverId) throw new Error('failed needs the deliver_id');
  if (trouble !== undefined && !TROUBLES.includes(trouble)) throw new Error(`unknown trouble: ${trouble}`);
  return withOptional({ type: 'task_update', deliver_id: deliverId, state: 'failed' }, { error, trouble });
}

/**
 * `ack` — the tab received `received` (over SSE: the event stream's first event, `welcome`;
 * the hub attaches the stream only then, so a stream the manager buffers never takes tasks).
 */
export function ack(received) {
  return { type: 'ack', received };
}

/** App heartbeat on the `/heartbeat` socket (HELPERS.md). */
export function heartbeat({ time = Date.now(), flowId, flowRole, step, cmdCount, resultCount, pending, trouble } = {}) {
  return withOptional({ type: 'heartbeat', time }, {
    flow_id: flowId, flow_role: flowRole, step, cmd_count: cmdCount, result_count: resultCount, pending, trouble,
  });
}

/**
 * Reads one hub→tab frame. Returns `{frame}` for a known frame, `{ignored}` for an unknown
 * type (newer hubs may add types), or `{error}` for text that is not a JSON object.
 */
export function readHubFrame(text) {
  let frame;
  try {
    frame = JSON.parse(text);
  } catch (err) {
    return { error: `malformed JSON from hub: ${err.message}` };
  }
  if (!frame || typeof frame !== 'object' || Array.isArray(frame) || typeof frame.type !== 'string') {
    return { error: 'hub frame is not an object with a type' };
  }
  if (!HUB_FRAME_TYPES.includes(frame.type)) return { ignored: frame.type };
  return { frame };
}
