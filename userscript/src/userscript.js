/**
 * Bundle entry: collects what the userscript manager grants (GM_* functions, unsafeWindow, the
 * world it put us in) and starts AIcard. Inside the bundle's IIFE, so none of this reaches the
 * page's globals.
 */
/* global GM, GM_getValue, GM_setValue, GM_xmlhttpRequest, GM_info, GM_registerMenuCommand, unsafeWindow, exportFunction */
import { start } from './core/main.js';

function grants() {
  const memory = new Map();
  const asyncGm = typeof GM === 'object' && GM ? GM : null;
  let request = null;
  if (typeof GM_xmlhttpRequest === 'function') request = GM_xmlhttpRequest;
  else if (asyncGm && typeof asyncGm.xmlHttpRequest === 'function') request = (d) => asyncGm.xmlHttpRequest(d);
  return {
    getValue: typeof GM_getValue === 'function' ? GM_getValue : (k, d) => (memory.has(k) ? memory.get(k) : d),
    setValue: typeof GM_setValue === 'function' ? GM_setValue : (k, v) => memory.set(k, v),
    xmlhttpRequest: request,
    info: typeof GM_info === 'object' ? GM_info : null,
    // The manager's own menu: the debug helpers live there (and in the panel), never on the page.
    registerMenuCommand: typeof GM_registerMenuCommand === 'function' ? GM_registerMenuCommand
      : asyncGm && typeof asyncGm.registerMenuCommand === 'function' ? (n, f) => asyncGm.registerMenuCommand(n, f) : null,
  };
}

start({
  win: typeof unsafeWindow !== 'undefined' ? unsafeWindow : window,
  ownWindow: window,
  // This world's WebSocket, captured before page code runs (the page's own in the page world).
  WebSocketImpl: window.WebSocket,
  exportFunction: typeof exportFunction === 'function' ? exportFunction : undefined,
  gm: grants(),
});
