/**
 * Puts the network hooks (`page-hooks.js`) into the page's own realm, whichever world the
 * userscript manager started us in (docs/userscript.md):
 *   - `page`: we already run in the page's realm (Tampermonkey `@sandbox raw`, ScriptCat's
 *     default MAIN world, Violentmonkey page mode): the hooks are installed directly;
 *   - `xray`: Firefox's content-script sandbox (Violentmonkey content mode, chosen by itself on
 *     pages whose `script-src` forbids injection; Tampermonkey's USERSCRIPT_WORLD): the hooks go
 *     on the page's window without Xrays (`unsafeWindow.wrappedJSObject` under Violentmonkey,
 *     whose `unsafeWindow` there is the sandbox's own global), and every function the page will
 *     call goes through `exportFunction`;
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

/** The manager's name as it gives it in `GM_info.scriptHandler`, lower-case ('' when unsaid). */
export function managerName(info) {
  try { return String((info && info.scriptHandler) || '').toLowerCase(); } catch { return ''; }
}

/**
 * What the manager says about the world it chose, when it says anything:
 *   - Violentmonkey: `injectInto` 'page' | 'content' (its `auto` falls back to content by itself
 *     on a page whose CSP refuses page scripts, and then says 'content');
 *   - Tampermonkey: `sandboxMode` 'raw' (the page), 'js' (Firefox's USERSCRIPT_WORLD, raw
 *     elsewhere), 'dom' (the isolated world);
 *   - ScriptCat: its `sandboxMode` is a reserved field, always 'raw' even in its USER_SCRIPT
 *     world, so it says nothing; the features decide.
 * Returns 'page', 'sandbox' (Tampermonkey 'js') or 'isolated', or null.
 */
export function managerWorld(info) {
  const i = info || {};
  const handler = managerName(i);
  let said = '';
  try {
    said = String(i.injectInto || (handler === 'scriptcat' ? '' : i.sandboxMode) || i.script?.options?.inject_into || '').toLowerCase();
  } catch { said = ''; }
  if (['page', 'raw'].includes(said)) return 'page';
  if (['js', 'javascript'].includes(said)) return 'sandbox';
  if (['content', 'dom', 'isolated', 'user_script'].includes(said)) return 'isolated';
  return null;
}

/**
 * True for Firefox's own `exportFunction` (a content-script sandbox). Violentmonkey also defines
 * `exportFunction` and `cloneInto` in its page mode and in Chromium, as plain functions that
 * hand back what they are given: those say nothing about Xrays.
 */
export function isNativeExport(exportFn) {
  if (typeof exportFn !== 'function') return false;
  try {
    return /\{\s*\[native code\]\s*\}\s*$/.test(Function.prototype.toString.call(exportFn));
  } catch {
    return false;
  }
}

/**
 * Decides the mode: first from what the manager says (GM_info), then from the features.
 * `ownWindow` is this world's `window`; `win` is what the manager calls `unsafeWindow`.
 * `hasRuntime` says an extension runtime is visible here, which is true only in an extension's
 * own worlds, never in the page's. A manager's wrapper makes `window !== unsafeWindow` in the
 * page world too (Violentmonkey page mode, Tampermonkey), so that alone proves nothing.
 */
export function chooseMode({ win, ownWindow, exportFn, info, hasRuntime }) {
  const sandbox = isNativeExport(exportFn);
  const said = managerWorld(info);
  if (said === 'page') return 'page';
  if (said === 'sandbox') return sandbox ? 'xray' : 'page';
  if (said === 'isolated') return sandbox ? 'xray' : 'inject';
  if (sandbox && win !== ownWindow) return 'xray';
  if (hasRuntime) return 'inject';
  return 'page';
}

/**
 * The page's own window as seen from Firefox's sandbox. Violentmonkey's content mode gives the
 * sandbox's global as `unsafeWindow` (setting `fetch` there patches only the sandbox's): the
 * page's window is its `wrappedJSObject`. Tampermonkey's USERSCRIPT_WORLD gives the page's
 * window already, which has no `wrappedJSObject`.
 */
export function pageWindowOf(win) {
  try {
    const page = win && win.wrappedJSObject;
    if (page && typeof page === 'object') return page;
  } catch { /* not an Xray */ }
  return win;
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
    const page = pageWindowOf(win);
    const wrap = (fn) => exportFn(fn, page);
    // Bytes arrive as the page's typed arrays seen through Xrays: copy them into our realm.
    const ours = {
      matches: (url, method) => bridge.matches(String(url), String(method)),
      open(meta) {
        const sink = bridge.open(meta);
        return sink && { push: (u8) => sink.push(new Uint8Array(u8)), end: () => sink.end(), fail: (r) => sink.fail(String(r)) };
      },
    };
    /* global cloneInto */
    const give = (obj) => (typeof cloneInto === 'function' ? cloneInto(obj, page, { cloneFunctions: true }) : obj);
    pageHooks(page, ours, wrap, give);
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
