// The real hub for the dashboard's browser tests: the `aicard` binary started on port 0 with a
// temp data dir and flows dir, and simulated chat tabs — WebSocket clients speaking the tab
// protocol (hello, task_update, chunk, turn_end) that answer tasks by a script.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = join(here, '..', '..');
const TARGET = process.env.CARGO_TARGET_DIR || join(REPO, 'target');
export const HUB_BIN = process.env.AICARD_BIN || join(TARGET, 'debug', 'aicard');

/** `args`: more `aicard serve` arguments (e.g. `['--planner', 'planner']`). */
export async function startHub({ token = 'dash-test-token', flows = {}, args = [] } = {}) {
  if (!existsSync(HUB_BIN)) throw new Error(`${HUB_BIN} missing: run cargo build --bin aicard`);
  const dataDir = mkdtempSync(join(tmpdir(), 'aicard-dash-'));
  const flowsDir = join(dataDir, 'flows');
  mkdirSync(flowsDir);
  for (const [name, text] of Object.entries(flows)) writeFileSync(join(flowsDir, `${name}.yaml`), text);
  const child = spawn(HUB_BIN, ['serve', '--port', '0', '--data-dir', dataDir, '--token', token, '--flows', flowsDir, ...args],
    { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'warn' } });
  const out = [];
  const { url, login } = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hub did not start:\n${out.join('')}`)), 20000);
    const onData = (d) => {
      out.push(String(d));
      const text = out.join('');
      const m = /listening on (http:\/\/\S+)/.exec(text);
      const l = /dashboard: (http:\/\/\S+\/login\?code=\w+)/.exec(text);
      if (m && l) { clearTimeout(timer); resolve({ url: m[1], login: l[1] }); }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (d) => out.push(String(d)));
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`hub exited ${code}:\n${out.join('')}`)); });
  });
  const api = async (method, path, body) => {
    const r = await fetch(url + path, {
      method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return r.json();
  };
  return {
    url, login, token, dataDir, flowsDir, output: out, api,
    async close() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A simulated tab. `reply(prompt, n)` → `{text, delay}` or `{fail, trouble?}` (`trouble`:
 * `rate_limited`, `captcha`, `login`… as the userscript reports it); n counts this tab's tasks.
 * `command(text)` types a command as the person would and resolves with its `cmd_result`.
 */
export async function simTab(hub, { label, site = 'sim', role = 'worker', reply }) {
  const ws = new WebSocket(hub.url.replace('http', 'ws') + '/realtime');
  await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
  const send = (v) => ws.send(JSON.stringify(v));
  let n = 0;
  const waiting = []; // resolvers of command() calls, oldest first
  const welcome = new Promise((res) => {
    ws.on('message', (raw) => {
      const v = JSON.parse(String(raw));
      if (v.type === 'welcome') res(v);
      if (v.type === 'cmd_result' && waiting.length) waiting.shift()(v);
      if (v.type !== 'task') return;
      const r = reply(v.prompt, n++) || { text: `ok: ${v.prompt}` };
      send({ type: 'task_update', task_id: v.task_id, state: 'accepted' });
      setTimeout(() => {
        if (ws.readyState !== WebSocket.OPEN) return;
        if (r.fail) { send({ type: 'task_update', task_id: v.task_id, state: 'failed', error: r.fail, trouble: r.trouble }); return; }
        const turn = `turn-${v.task_id}`;
        send({ type: 'chunk', turn_id: turn, seq: 0, text: r.text });
        send({ type: 'turn_end', turn_id: turn, text: r.text, task_id: v.task_id });
      }, r.delay || 0);
    });
  });
  send({ type: 'hello', token: hub.token, site, label, role, url: `https://${site}.example/chat/${label}`, title: `${label} chat` });
  const w = await welcome;
  const command = (text) => new Promise((resolve) => { waiting.push(resolve); send({ type: 'user_input', text }); });
  return { id: w.client_id, ws, send, command, close: () => ws.close() };
}
