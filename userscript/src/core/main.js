/**
 * Entry point of the AIcard userscript (runs at document-start in every supported chat tab):
 * picks the site adapter, installs network capture in the page's realm before the site's code
 * runs (whatever world the manager chose: `realm.js`), connects to the hub over the best way
 * this world allows, and wires tasks, deliveries and the panel together. Bundled as one IIFE,
 * so nothing here becomes a page global.
 *
 * Two windows: `win` is the page's (the manager's `unsafeWindow`), used only for the network
 * hooks; `own` is this world's, used for the DOM, timers and storage, so every callback we hand
 * the browser is one it may call from here (Firefox's sandbox cannot give the page ours).
 */
import { adapters as siteAdapters } from '../adapters/index.js';
import simAdapter from '../core-test-site/sim-adapter.js';
import { pickAdapter } from './adapters.js';
import { overrideFor, withFallback } from '../adapters/lib/bend.js';
import { PersonTurnFallback } from './dom-fallback.js';
import { TurnCapture } from './capture.js';
import { debugHelpers, debugRunner, installDebugMenu, resultText } from './debug.js';
import { HubClient } from './hub-client.js';
import { findInput, readInput, findSendButton } from './input.js';
import { installNetworkHooks } from './realm.js';
import { Panel } from './panel.js';
import { Settings, TabIdentity } from './storage.js';
import { TaskRunner } from './tasks.js';
import { TurnMemory } from './turn-memory.js';

// Filled in by the hub when it serves the script (GET /aicard.user.js).
const EMBEDDED_HUB_URL = '__AICARD_HUB_URL__';
const EMBEDDED_TOKEN = '__AICARD_TOKEN__';
const VERSION = process.env.AICARD_VERSION;

export function start(env) {
  const { win, gm } = env;
  const own = env.ownWindow || win;
  const settings = new Settings(gm);
  const debug = Boolean(settings.get('debug', false));
  const log = (level, msg) => {
    if (debug || level === 'error') (level === 'error' ? console.error : console.debug)(`[AIcard] ${msg}`);
  };
  const picked = pickAdapter([...siteAdapters, simAdapter], own.location.hostname);
  if (!picked) return null;
  // The person's override of the endpoint and text fields (GM `adapter_overrides`), and the growing-field fallback.
  const adapter = withFallback(picked, overrideFor(settings.get('adapter_overrides', null), picked.name));
  if (own.top !== own) return null; // chat tabs only, never their frames

  const token = settings.adoptToken(EMBEDDED_TOKEN);
  const hubUrl = settings.adoptHubUrl(EMBEDDED_HUB_URL);
  const timers = {
    setTimeout: own.setTimeout.bind(own), clearTimeout: own.clearTimeout.bind(own),
    setInterval: own.setInterval.bind(own), clearInterval: own.clearInterval.bind(own),
  };
  const doc = own.document;

  // Network capture first: the earlier, the fewer of the site's requests escape it.
  let capture = null;
  const hooks = installNetworkHooks({
    win,
    log,
    env: { ownWindow: own, exportFunction: env.exportFunction, info: gm.info },
    bridge: {
      matches: (url, method) => Boolean(capture?.matches(url, method)),
      open: (meta) => capture?.begin(meta) ?? null,
    },
  });

  const sandboxed = hooks.mode === 'xray';
  const hub = new HubClient({
    hubUrl,
    identity: new TabIdentity(own.sessionStorage),
    WebSocketImpl: env.WebSocketImpl,
    gmRequest: gm.xmlhttpRequest,
    manager: gm.info,
    memo: { get: (k, d) => settings.get(k, d), set: (k, v) => settings.set(k, v) },
    // Firefox's sandbox WebSocket says `Origin: null`, which the hub rightly refuses.
    transports: [...(env.WebSocketImpl && !sandboxed ? ['ws'] : []), ...(gm.xmlhttpRequest ? ['sse'] : [])],
    wsCheck: () => localNetworkAccess(own.navigator),
    doc,
    timers,
    log,
    helloFields: () => ({
      token,
      site: adapter.name,
      url: own.location.href,
      title: doc.title || undefined,
      label: settings.get('label', undefined),
      role: settings.get('role', undefined),
      version: VERSION,
    }),
    heartbeatState: () => ({ pending: runner.queue.length + (runner.current ? 1 : 0), trouble: runner.parked || undefined }),
  });

  let runner = null;
  capture = new TurnCapture({
    adapter, hub, log, doc, timers, record: debug, claimTask: () => runner?.claimTask(), memory: new TurnMemory(own.sessionStorage),
  });
  const panel = new Panel({ doc, hub, version: VERSION, debug, findInput: () => findInput(doc, adapter) });
  panel.update({ capture: { mode: hooks.mode, late: hooks.late, path: null } });
  runner = new TaskRunner({
    doc, adapter, hub, capture, timers, log,
    seen: new DeliverySeen(own.sessionStorage),
    onChange: () => panel.update({ task: describeJob(runner.current, runner.queue.length), parked: runner.parked }),
  });

  hub.on('state', (status) => panel.update({ hub: status, role: status.role || panel.state.role }));
  hub.on('frame', (frame) => {
    switch (frame.type) {
      case 'welcome':
        runner.welcome(frame);
        panel.update({ role: frame.role, label: frame.label ?? settings.get('label', null) });
        break;
      case 'task': case 'deliver': runner.handle(frame); break;
      case 'cancel': runner.cancel(frame.task_id); break;
      case 'flow_event':
        if (frame.detail?.kind === 'agent') runner.agentEvent(frame);
        panel.flowEvent(frame);
        break;
      case 'flow_control': runner.control(frame); panel.update({ result: `${frame.action}${frame.reason ? `: ${frame.reason}` : ''}` }); break;
      case 'cmd_output': panel.commandOutput(frame); break;
      case 'cmd_result': panel.commandDone(frame.cmd_id); panel.update({ result: summarize(frame) }); break;
      case 'error': log('warn', `hub error ${frame.code}: ${frame.message}`); break;
      default: break;
    }
  });
  capture.on((kind, turn, detail) => {
    if (kind === 'trouble') panel.update({ result: `⚠ ${detail.reason}` });
    if (kind === 'turn_start') panel.update({ capture: { ...panel.state.capture, path: 'network' } });
    if (kind === 'dom_turn_end') panel.update({ capture: { ...panel.state.capture, path: 'dom' } });
    if (kind === 'parser_miss') panel.update({ result: `⚠ ${PARSER_MISS_NOTICE}` });
  });
  const personFallback = new PersonTurnFallback({ doc, adapter, capture, timers, log });
  watchPersonSubmits(doc, adapter, runner, personFallback);
  // No token: the script was installed from the plain URL, which carries none (a web page could
  // load that one). Connecting would only be refused; say how to pair instead.
  if (token) hub.start();
  else panel.update({ hub: { state: 'unpaired', notice: UNPAIRED_NOTICE } });

  const mount = () => panel.mount();
  if (doc.readyState === 'loading') doc.addEventListener('DOMContentLoaded', mount, { once: true });
  else mount();
  if (debug) {
    // The manager's menu and the panel only: never the page's window (a page must not drive the hub).
    const helpers = debugHelpers({ doc, hub, runner, capture, adapter, panel });
    const run = debugRunner(helpers, {
      ask: (q) => own.prompt(q),
      show: (name, result) => {
        console.debug(`[AIcard] ${name}`, result);
        // mcpPanel describes the panel: showing it there would change what it describes.
        if (name !== 'mcpPanel') panel.update({ debugOut: resultText(name, result) });
      },
    });
    installDebugMenu(gm.registerMenuCommand, run, Object.keys(helpers));
    panel.setDebug(Object.keys(helpers), run);
  }
  return { hub, capture, runner, panel, adapter, hooks };
}

/**
 * Chrome's Local Network Access (Chrome 142 for fetch, 147 for WebSockets): a public page may
 * reach 127.0.0.1 only after the person allowed it. null when it is granted (or the browser has
 * no such permission). Otherwise the WebSocket is still tried, since a page on a private address
 * needs no grant and the state says nothing about that, but only briefly: a pending prompt
 * would hold it, and the SSE channel does not need the grant.
 */
async function localNetworkAccess(nav) {
  for (const name of ['local-network-access', 'loopback-network', 'local-network']) {
    let state;
    try {
      state = (await nav.permissions.query({ name })).state;
    } catch {
      continue; // this browser does not know the name
    }
    return state === 'granted' ? null : { notice: LNA_NOTICE, openWithinMs: LNA_OPEN_MS };
  }
  return null;
}

const LNA_OPEN_MS = 1500;

const UNPAIRED_NOTICE = '还没有 hub 令牌：打开 `aicard serve` 打印的安装链接，或运行 `aicard install`，再装一次脚本。'
  + ' / No hub token yet: open the install link `aicard serve` printed (or run `aicard install`) and install the script from it.';

const LNA_NOTICE = '本机网络访问未允许：改用脚本管理器的通道 (SSE)。点地址栏的"允许访问本地网络"可用更快的 WebSocket。'
  + ' / Local Network Access not allowed: using the userscript manager\'s channel (SSE). Allow "local network access" for this site to use the faster WebSocket.';

/** Ids of the deliveries this tab already typed, kept across reloads (sessionStorage). */
class DeliverySeen {
  constructor(store) {
    this.store = store;
    this.key = 'aicard.delivered';
  }

  ids() {
    try { return JSON.parse(this.store.getItem(this.key) || '[]'); } catch { return []; }
  }

  has(id) {
    return this.ids().includes(id);
  }

  add(id) {
    const ids = this.ids().filter((x) => x !== id);
    ids.push(id);
    try { this.store.setItem(this.key, JSON.stringify(ids.slice(-200))); } catch { /* storage off */ }
  }
}

function describeJob(job, queued) {
  if (!job) return queued ? `排队 queued ${queued}` : '空闲 idle';
  const what = job.kind === 'task' ? `${job.task_id}: ${job.prompt}` : `deliver: ${job.text}`;
  const cut = what.length > 60 ? `${what.slice(0, 57)}…` : what;
  const short = job.held ? `${HELD_NOTICE} · ${cut}` : cut;
  return queued ? `${short} (+${queued})` : short;
}

function summarize(frame) {
  const r = frame.result || {};
  const out = String(r.output ?? '');
  return `${r.success === false ? '✗' : '✓'} ${frame.command || ''} ${out.length > 80 ? `${out.slice(0, 77)}…` : out}`.trim();
}

/** The panel's task row while a delivery waits for the person to stop typing. */
const HELD_NOTICE = '等你停手 waiting until you stop typing';

/**
 * Notes what the person sends by hand (Enter in the box, or a click on send), and when they
 * press a key in the box or change it (trusted events only: an automatic send waits while they
 * type, tasks.js `holdMs`).
 */
function watchPersonSubmits(doc, adapter, runner, personFallback) {
  const current = () => {
    const input = findInput(doc, adapter);
    return input ? readInput(input) : '';
  };
  const inBox = (ev) => {
    const input = findInput(doc, adapter);
    return input && (ev.target === input || input.contains(ev.target)) ? input : null;
  };
  doc.addEventListener('input', (ev) => {
    if (ev.isTrusted && inBox(ev)) runner.notePersonEdit();
  }, true);
  doc.addEventListener('keydown', (ev) => {
    if (!ev.isTrusted) return;
    const input = inBox(ev);
    if (!input) return;
    if (ev.key !== 'Enter' || ev.shiftKey || ev.isComposing) { runner.notePersonEdit(); return; }
    personSent(runner, personFallback, readInput(input));
  }, true);
  doc.addEventListener('click', (ev) => {
    if (!ev.isTrusted) return;
    const input = findInput(doc, adapter);
    const send = findSendButton(doc, adapter, input);
    if (send && (ev.target === send || send.contains(ev.target))) personSent(runner, personFallback, current());
  }, true);
}

/** The person sent by hand: noted for the hub, and the page is read if no stream answers it. */
function personSent(runner, personFallback, text) {
  runner.notePersonSubmit(text);
  if (!runner.sending && text && text.trim()) personFallback.sent();
}

const PARSER_MISS_NOTICE = '网络解析失败，改读页面 / parser found no answer, read the page';
