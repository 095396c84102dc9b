// The mock sites' scripted agent model (docs/agents.md, the browser tests of the agent loop): what a mock
// site answers when no reply was queued for it and the prompt asks for the agent script.
//
// - A prompt holding `AGENT-TEST` (a task, after the hub's primer): the reply writes ONE command,
//   by default `?<memory AGENT-PROBE … tag: agent-test>!`, whose result (`remembered #N`) only
//   the hub can know, followed by a long tail so that a reply held mid-stream (`AGENT-HOLD«name»`
//   in the prompt) is held after its command. `AGENT-CMD«BODY»` in the prompt picks another
//   command (`?<BODY>!`).
// - A prompt holding the hub's results message (`⟦aicard result 1/1⟧ … → ✓`): the reply quotes what
//   the first result said, with no command, so the session ends with that answer. It never
//   writes a result header itself.
// The same prompt always gets the same reply, as a re-sent request after a reload would.
//
// The prompt is found in the site's request body whatever its encoding (JSON, JSON inside JSON,
// form fields, multipart, a framed JSON body): every string in it is looked at.

export const AGENT_MARK = 'AGENT-TEST';
export const DEFAULT_AGENT_COMMAND = 'memory AGENT-PROBE 斑马 zebra 🦓 tag: agent-test';
const HEADER = /^⟦aicard result (\d+)\/(\d+)⟧ (.*) → (✓|✗)\s*$/;
const TAIL = ' 我先做这一步，等 AIcard 把结果发回来再继续。 I will wait for AIcard to send the result back before going on.';

/** Every string a request body holds: itself, its form fields, and JSON (nested JSON too). */
export function bodyStrings(body) {
  const out = [];
  const seen = new Set();
  const visit = (value, depth) => {
    if (depth > 24 || value === null || value === undefined) return;
    if (typeof value === 'string') {
      if (seen.has(value)) return;
      seen.add(value);
      out.push(value);
      const t = value.trim();
      // JSON, or JSON after a binary frame header (Kimi's Connect frames).
      const at = depth === 0 ? t.search(/[{[]/) : (t.startsWith('{') || t.startsWith('[') ? 0 : -1);
      if (at !== -1 && t.length > at + 1) {
        try { visit(JSON.parse(t.slice(at)), depth + 1); } catch { /* not JSON */ }
      }
      if (depth === 0 && /^[\w.%-]+=/.test(t)) {
        try { for (const [, v] of new URLSearchParams(t)) visit(v, depth + 1); } catch { /* not a form */ }
      }
      return;
    }
    if (Array.isArray(value)) { for (const v of value) visit(v, depth + 1); return; }
    if (typeof value === 'object') for (const v of Object.values(value)) visit(v, depth + 1);
  };
  visit(String(body ?? ''), 0);
  return out;
}

/** The results blocks of a hub results message: `[{index, of, command, ok, output}]`. */
export function parseResults(text) {
  const lines = String(text).split(/\r?\n/);
  const blocks = [];
  let current = null;
  for (const line of lines) {
    const m = HEADER.exec(line);
    if (m) {
      current = { index: Number(m[1]), of: Number(m[2]), command: m[3], ok: m[4] === '✓', lines: [] };
      blocks.push(current);
    } else if (current) {
      current.lines.push(line);
    }
  }
  return blocks.map(({ lines: body, ...b }) => {
    // The footer (`round k/N · …`) and notes (`⚠ …`) follow the last block's output.
    const end = body.findIndex((l) => /^round \d+\/\d+/.test(l) || /^⚠/.test(l));
    const output = (end === -1 ? body : body.slice(0, end)).join('\n').trim();
    return { ...b, output };
  });
}

/** `MARK«value»` in `text`, or null. */
function tagged(text, mark) {
  const m = new RegExp(`${mark}«([^»]*)»`).exec(text);
  return m ? m[1] : null;
}

/**
 * The reply of the agent script to this request body: `{answer, hold?}`, or null when the prompt
 * does not ask for it.
 */
export function agentReply(body) {
  const strings = bodyStrings(body);
  const results = strings.find((s) => s.split(/\r?\n/).some((l) => HEADER.test(l)));
  if (results) {
    const [first] = parseResults(results);
    const said = first.output.split(/\r?\n/).map((l) => l.trim()).filter(Boolean).join(' / ').slice(0, 300);
    return {
      answer: `结果说 / The result said: «${said}» ${first.ok ? '✓' : '✗'}。任务完成 / done.`,
    };
  }
  const task = strings.find((s) => s.includes(AGENT_MARK));
  if (!task) return null;
  const command = tagged(task, 'AGENT-CMD') || DEFAULT_AGENT_COMMAND;
  const hold = tagged(task, 'AGENT-HOLD');
  return {
    answer: `好的，先记下来 / First I write it down: ?<${command}>!\n${TAIL.repeat(6).trim()}`,
    ...(hold ? { hold } : {}),
  };
}
