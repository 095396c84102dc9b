/**
 * Entry point of the AIcard userscript (runs at document-start in every supported chat tab):
 * picks the site adapter, installs network capture before the site's code runs, connects to the
 * hub, and wires tasks, deliveries and the panel together. Bundled as one IIFE, so nothing here
 * becomes a page global.
 */
import { adapters as siteAdapters } from '../adapters/index.js';
import simAdapter from '../core-test-site/sim-adapter.js';
import { pickAdapter } from './adapters.js';
import { TurnCapture } from './capture.js';
import { installDebugHelpers } from './debug.js';
import { HubClient } from './hub-client.js';
import { findInput, readInput, findSendButton } from './input.js';
import { installInterceptors } from './intercept.js';
import { Panel } from './panel.js';
import { Settings, TabIdentity } from './storage.js';
import { TaskRunner } from './tasks.js';

// Filled in by the hub when it serves the script (GET /aicard.user.js).
const EMBEDDED_HUB_URL = '__AICARD_HUB_URL__';
const EMBEDDED_TOKEN = '__AICARD_TOKEN__';
const VERSION = process.env.AICARD_VERSION;

export function start(env) {
  const { win, gm } = env;
  const settings = new Settings(gm);
  const debug = Boolean(settings.get('debug', false));
  const log = (level, msg) => {
    if (debug || level === 'error') (level === 'error' ? console.error : console.debug)(`[AIcard] ${msg}`);
  };
  const adapter = pickAdapter([...siteAdapters, simAdapter], win.location.hostname);
  if (!adapter) return null;

  const token = settings.adoptToken(EMBEDDED_TOKEN);
  const hubUrl = settings.adoptHubUrl(EMBEDDED_HUB_URL);
  const timers = {
    setTimeout: win.setTimeout.bind(win), clearTimeout: win.clearTimeout.bind(win),
    setInterval: win.setInterval.bind(win), clearInterval: win.clearInterval.bind(win),
  };
  const doc = win.document;
  const hub = new HubClient({
    hubUrl,
    identity: new TabIdentity(win.sessionStorage),
    WebSocketImpl: env.WebSocketImpl,
    gmRequest: gm.xmlhttpRequest,
    timers,
    log,
    helloFields: () => ({
      token,
      site: adapter.name,
      url: win.location.href,
      title: doc.title || undefined,
      label: settings.get('label', undefined),
      role: settings.get('role', undefined),
      version: VERSION,
    }),
    heartbeatState: () => ({ pending: runner.queue.length + (runner.current ? 1 : 0) }),
  });

  let runner = null;
  const capture = new TurnCapture({ adapter, hub, log, record: debug, claimTask: () => runner?.claimTask() });
  installInterceptors(win, {
    matches: (url, method) => capture.matches(url, method),
    onStream: (meta) => capture.begin(meta),
    log,
  });
  const panel = new Panel({ doc, hub, version: VERSION, findInput: () => findInput(doc, adapter) });
  runner = new TaskRunner({
    doc, adapter, hub, capture, timers, log,
    onChange: () => panel.update({ task: describeJob(runner.current, runner.queue.length) }),
  });

  hub.on('state', (status) => panel.update({ hub: status, role: status.role || panel.state.role }));
  hub.on('frame', (frame) => {
    switch (frame.type) {
      case 'welcome': panel.update({ role: frame.role, label: frame.label ?? settings.get('label', null) }); break;
      case 'task': case 'deliver': runner.handle(frame); break;
      case 'flow_event': panel.flowEvent(frame); break;
      case 'flow_control': runner.control(frame); panel.update({ result: `${frame.action}${frame.reason ? `: ${frame.reason}` : ''}` }); break;
      case 'cmd_result': panel.update({ result: summarize(frame) }); break;
      case 'error': log('warn', `hub error ${frame.code}: ${frame.message}`); break;
      default: break;
    }
  });
  capture.on((kind, turn, detail) => {
    if (kind === 'trouble') panel.update({ result: `⚠ ${detail.reason}` });
  });
  watchPersonSubmits(doc, adapter, runner);
  hub.start();

  const mount = () => panel.mount();
  if (doc.readyState === 'loading') doc.addEventListener('DOMContentLoaded', mount, { once: true });
  else mount();
  if (debug) installDebugHelpers(win, { hub, runner, capture, adapter, panel });
  return { hub, capture, runner, panel, adapter };
}

function describeJob(job, queued) {
  if (!job) return queued ? `排队 queued ${queued}` : '空闲 idle';
  const what = job.kind === 'task' ? `${job.task_id}: ${job.prompt}` : `deliver: ${job.text}`;
  const short = what.length > 60 ? `${what.slice(0, 57)}…` : what;
  return queued ? `${short} (+${queued})` : short;
}

function summarize(frame) {
  const r = frame.result || {};
  const out = String(r.output ?? '');
  return `${r.success === false ? '✗' : '✓'} ${frame.command || ''} ${out.length > 80 ? `${out.slice(0, 77)}…` : out}`.trim();
}

/** Notes what the person sends by hand (Enter in the box, or a click on send). */
function watchPersonSubmits(doc, adapter, runner) {
  const current = () => {
    const input = findInput(doc, adapter);
    return input ? readInput(input) : '';
  };
  doc.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter' || ev.shiftKey || ev.isComposing || !ev.isTrusted) return;
    const input = findInput(doc, adapter);
    if (input && (ev.target === input || input.contains(ev.target))) runner.notePersonSubmit(readInput(input));
  }, true);
  doc.addEventListener('click', (ev) => {
    if (!ev.isTrusted) return;
    const input = findInput(doc, adapter);
    const send = findSendButton(doc, adapter, input);
    if (send && (ev.target === send || send.contains(ev.target))) runner.notePersonSubmit(current());
  }, true);
}
