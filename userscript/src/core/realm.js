/**
 * Puts the network hooks (`page-hooks.js`) into the page's own realm, whichever world the
 * userscript manager started us in (SPEC §9):
 *   - `page`: we already run in the page's realm (Tampermonkey `@sandbox raw`, ScriptCat's
 *     default MAIN world, Violentmonkey page mode): the hooks are installed directly;
 *   - `xray`: Firefox's content-script sandbox (Violentmonkey content mode, chosen by itself on
 *     pages whose `script-src` forbids injection): `unsafeWindow` is the page's window without
 *     Xrays, and every function the page will call goes through `exportFunction`;
 *   - `inject`: Chromium's isolated / USER_SCRIPT world, where the page's objects cannot be
 *     reached at all: the hooks go into a `<script>` element (checked against that world's own
 *     CSP, not the page's) and talk back over DOM events with a random name.
 * The hub client, the token and the panel state stay in our world in every case.
 */
import { eventBridge, pageHooks } from './page-hooks.js';

/* global exportFunction, GM_info */

function randomName() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return `aicard-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function toBytes(binary) {
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) out[i] = binary.charCodeAt(i) & 0xff;
  return out;
}

/** What the manager says about the world it chose, when it says anything. */
export function managerWorld(info) {
  const i = info || {};
  const said = String(i.injectInto || i.sandboxMode || i.script?.options?.inject_into || '').toLowerCase();
  if (['page', 'raw'].includes(said)) return 'page';
  if (['content', 'js', 'javascript', 'dom', 'isolated', 'user_script'].includes(said)) return 'isolated';
  return null;
}

/**
 * Decides the mode. `ownWindow` is this world's `window`; `win` is what the manager calls
 * `unsafeWindow`. `hasRuntime` says an extension runtime is visible here, which is true only
 * in an extension's own worlds, never in the page's.
 */
export function chooseMode({ win, ownWindow, exportFn, info, hasRuntime }) {
  if (typeof exportFn === 'function' && win !== ownWindow) return 'xray';
  const said = managerWorld(info);
  if (said === 'page') return 'page';
  if (said === 'isolated' || hasRuntime) return 'inject';
  return 'page';
}

/**
 * Installs the hooks. `bridge` = `{matches(url, method), open(info) → sink}` in our world.
 * Returns `{mode, late}`: `late` when the page's own scripts had started before us, so a site
 * that kept its own reference to `fetch` may escape capture (the DOM fallback covers it).
 */
export function installNetworkHooks({ win, bridge, log, env = {} }) {
  const doc = win.document;
  const late = doc.readyState !== 'loading' || (doc.scripts && doc.scripts.length > 0);
  const exportFn = env.exportFunction ?? (typeof exportFunction === 'function' ? exportFunction : undefined);
  let info = env.info;
  if (info === undefined) {
    try { info = typeof GM_info === 'object' ? GM_info : null; } catch { info = null; }
  }
  const hasRuntime = env.hasRuntime ?? Boolean(globalThis.chrome?.runtime?.id);
  let mode = chooseMode({ win, ownWindow: env.ownWindow ?? globalThis.window, exportFn, info, hasRuntime });

  if (mode === 'inject' && !injectHooks(doc, bridge, log)) {
    log('warn', 'page script injection refused; hooking from this world / 页面脚本注入被拒绝');
    mode = 'page';
  }
  if (mode === 'xray') {
    const wrap = (fn) => exportFn(fn, win);
    // Bytes arrive as the page's typed arrays seen through Xrays: copy them into our realm.
    const ours = {
      matches: (url, method) => bridge.matches(String(url), String(method)),
      open(meta) {
        const sink = bridge.open(meta);
        return sink && { push: (u8) => sink.push(new Uint8Array(u8)), end: () => sink.end(), fail: (r) => sink.fail(String(r)) };
      },
    };
    /* global cloneInto */
    const give = (obj) => (typeof cloneInto === 'function' ? cloneInto(obj, win, { cloneFunctions: true }) : obj);
    pageHooks(win, ours, wrap, give);
  } else if (mode === 'page') {
    pageHooks(win, bridge, (fn) => fn, (obj) => obj);
  }
  return { mode, late };
}

/**
 * `inject` mode: runs the hooks in a page `<script>` and wires its events to `bridge`.
 * Returns false when the script did not run (the page's CSP or Trusted Types refused it).
 */
function injectHooks(doc, bridge, log) {
  const name = randomName();
  const sinks = new Map();
  let ready = false;
  doc.addEventListener(name, (ev) => {
    let msg;
    try { msg = JSON.parse(ev.detail); } catch { return; }
    if (!msg || typeof msg !== 'object') return;
    switch (msg.op) {
      case 'ready': ready = true; break;
      case 'match': if (bridge.matches(String(msg.url), String(msg.method))) ev.preventDefault(); break;
      case 'open': { const sink = bridge.open(msg.info || {}); if (sink) sinks.set(msg.id, sink); break; }
      case 'data': sinks.get(msg.id)?.push(toBytes(String(msg.bytes || ''))); break;
      case 'end': sinks.get(msg.id)?.end(); sinks.delete(msg.id); break;
      case 'fail': sinks.get(msg.id)?.fail(String(msg.reason)); sinks.delete(msg.id); break;
      default: break;
    }
    ev.stopImmediatePropagation();
  }, true);
  const code = `(${pageHooks.toString()})(window, (function () { var b = (${eventBridge.toString()})(window, ${JSON.stringify(name)}); b.ready(); return b; })(), function (f) { return f; }, function (o) { return o; });`;
  try {
    const script = doc.createElement('script');
    script.textContent = code;
    (doc.head || doc.documentElement).appendChild(script);
    script.remove();
  } catch (err) {
    log('warn', `script injection failed: ${err.message}`);
    return false;
  }
  return ready;
}
