/**
 * Bundle entry: collects what the userscript manager grants (GM_* functions, unsafeWindow) and
 * starts AIcard. Inside the bundle's IIFE, so none of this reaches the page's globals.
 */
/* global GM_getValue, GM_setValue, GM_xmlhttpRequest, unsafeWindow */
import { start } from './core/main.js';

function grants() {
  const memory = new Map();
  return {
    getValue: typeof GM_getValue === 'function' ? GM_getValue : (k, d) => (memory.has(k) ? memory.get(k) : d),
    setValue: typeof GM_setValue === 'function' ? GM_setValue : (k, v) => memory.set(k, v),
    xmlhttpRequest: typeof GM_xmlhttpRequest === 'function' ? GM_xmlhttpRequest : null,
  };
}

start({
  win: typeof unsafeWindow !== 'undefined' ? unsafeWindow : window,
  // The script's own WebSocket (isolated world under Tampermonkey), captured before page code runs.
  WebSocketImpl: window.WebSocket,
  gm: grants(),
});
