// The Firefox world: Debian's firefox-esr (never a downloaded browser), headless, driven over
// WebDriver BiDi (./bidi.js), with the userscript run the way Violentmonkey's content mode runs
// it (docs/userscript.md, reference/site-runtime.md §3): in a WebExtension content script's sandbox at
// document_start — `window` is the Xray-wrapped window, `unsafeWindow` is
// `window.wrappedJSObject`, `exportFunction` / `cloneInto` exist — with GM_* from ./gm-api.js,
// whose requests the extension's background page performs (exempt from the page's CSP).
//
// Pieces:
//   - a routing proxy (node `net`): Firefox has no --host-resolver-rules, so the profile sends
//     http/https through a local proxy that CONNECTs the mock hostnames to the mock server;
//     127.0.0.1 / localhost (the hub, test servers) stay direct. Any other host is refused and
//     noted in `proxy.refused` (the profile's prefs keep Firefox's own background traffic off);
//   - a temporary MV2 extension generated per launch, installed with BiDi webExtension.install:
//     its background page performs GM requests (`performRequest`) for the content side, which
//     talks to it over a runtime.connect port, and takes orders from this module over a local
//     control WebSocket;
//   - GM values: a manager keeps them per script, shared by every tab; this world keeps that
//     store (what the script wrote with GM_setValue) on the node side. `openTab({values})` seeds
//     one tab: before it navigates, the content script for `https://<host>/*` is (re)registered
//     with `browser.contentScripts.register`, `{...store, ...values}` baked into its code, so
//     GM_getValue answers synchronously at document_start as with a manager's pre-loaded values.
//     openTab calls on one host are serialised so each tab gets its own; a registration is per
//     host, so a page that reloads by itself gets whatever is registered then — `tab.reload()`
//     re-registers this tab's values first.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { connect as netConnect, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer } from 'ws';
import { BiDi, exceptionText, fromRemoteValue, toLocalValue } from './bidi.js';
import { gmApiSource, managerGlobals, performRequestSource } from './gm-api.js';
import { pageLink } from './chromium.js';

export const FIREFOX = process.env.AICARD_FIREFOX || '/usr/bin/firefox-esr';
const EXTENSION_ID = 'aicard-test-manager@aicard.test';
/** Where a content script wants the page's CSP nonce (filled in by the background page). */
const NONCE_MARK = '__AICARD_PAGE_NONCE__';

/**
 * Prefs that keep a headless test Firefox quiet and offline (the machine has no internet: every
 * background connection would only be noise and delay) and keep background tabs running at
 * full speed. The proxy prefs are added by launchFirefox.
 */
export const QUIET_PREFS = {
  // Start-up, first-run, session restore.
  'browser.shell.checkDefaultBrowser': false,
  'browser.startup.homepage_override.mstone': 'ignore',
  'browser.startup.page': 0,
  'browser.startup.homepage': 'about:blank',
  'browser.newtabpage.enabled': false,
  'browser.newtab.preload': false,
  'browser.aboutwelcome.enabled': false,
  'startup.homepage_welcome_url': 'about:blank',
  'startup.homepage_welcome_url.additional': '',
  'browser.sessionstore.resume_from_crash': false,
  'browser.tabs.warnOnClose': false,
  'browser.warnOnQuit': false,
  'toolkit.startup.max_resumed_crashes': -1,
  'datareporting.policy.firstRunURL': '',
  'browser.uitour.enabled': false,
  'dom.disable_beforeunload': true,
  // Updates (app, add-ons, search, system add-ons, GMP plugins).
  'app.update.disabledForTesting': true,
  'app.update.auto': false,
  'app.update.checkInstallTime': false,
  'extensions.update.enabled': false,
  'extensions.update.autoUpdateDefault': false,
  'extensions.getAddons.cache.enabled': false,
  'extensions.systemAddon.update.enabled': false,
  'extensions.systemAddon.update.url': '',
  'extensions.blocklist.enabled': false,
  'extensions.webservice.discoverURL': '',
  'extensions.htmlaboutaddons.recommendations.enabled': false,
  'extensions.getAddons.discovery.api_url': '',
  'browser.search.update': false,
  'browser.search.geoip.url': '',
  'browser.region.network.url': '',
  'browser.region.update.enabled': false,
  'media.gmp-manager.updateEnabled': false,
  'media.gmp-manager.url': '',
  'media.gmp-gmpopenh264.enabled': false,
  'media.gmp-widevinecdm.enabled': false,
  // Telemetry, studies, Normandy, ping centre, crash reports.
  'toolkit.telemetry.enabled': false,
  'toolkit.telemetry.unified': false,
  'toolkit.telemetry.archive.enabled': false,
  'toolkit.telemetry.server': '',
  'datareporting.healthreport.uploadEnabled': false,
  'datareporting.policy.dataSubmissionEnabled': false,
  'app.normandy.enabled': false,
  'app.normandy.api_url': '',
  'app.shield.optoutstudies.enabled': false,
  'browser.ping-centre.telemetry': false,
  'browser.tabs.crashReporting.sendReport': false,
  'breakpad.reportURL': '',
  // Safe Browsing, tracking-protection lists, remote settings, certificate revocation.
  'browser.safebrowsing.malware.enabled': false,
  'browser.safebrowsing.phishing.enabled': false,
  'browser.safebrowsing.downloads.enabled': false,
  'browser.safebrowsing.downloads.remote.enabled': false,
  'browser.safebrowsing.blockedURIs.enabled': false,
  'browser.safebrowsing.provider.google.updateURL': '',
  'browser.safebrowsing.provider.google4.updateURL': '',
  'browser.safebrowsing.provider.mozilla.updateURL': '',
  'browser.safebrowsing.update.enabled': false,
  'privacy.trackingprotection.enabled': false,
  'privacy.trackingprotection.pbmode.enabled': false,
  'browser.contentblocking.category': 'standard',
  // Honoured on a release build only with MOZ_REMOTE_SETTINGS_DEVTOOLS=1 in the environment.
  'services.settings.server': 'data:,#remote-settings-dummy/v1',
  'services.settings.poll_interval': 86400 * 365,
  'security.remote_settings.crlite_filters.enabled': false,
  'security.remote_settings.intermediates.enabled': false,
  'security.OCSP.enabled': 0,
  'security.certerrors.mitm.priming.enabled': false,
  // Captive portal, connectivity checks, DoH, push, prefetching, speculative connections.
  'network.captive-portal-service.enabled': false,
  'network.connectivity-service.enabled': false,
  'network.trr.mode': 5,
  'network.dns.disablePrefetch': true,
  'network.prefetch-next': false,
  'network.predictor.enabled': false,
  'network.http.speculative-parallel-limit': 0,
  'browser.urlbar.speculativeConnect.enabled': false,
  'browser.places.speculativeConnect.enabled': false,
  'dom.push.enabled': false,
  'dom.push.connection.enabled': false,
  'dom.push.serverURL': '',
  'geo.provider.network.url': '',
  'identity.fxaccounts.enabled': false,
  'browser.discovery.enabled': false,
  'browser.newtabpage.activity-stream.feeds.telemetry': false,
  'browser.newtabpage.activity-stream.telemetry': false,
  'browser.newtabpage.activity-stream.feeds.snippets': false,
  'browser.newtabpage.activity-stream.feeds.topsites': false,
  'browser.newtabpage.activity-stream.feeds.section.topstories': false,
  'browser.newtabpage.activity-stream.feeds.system.topstories': false,
  'browser.newtabpage.activity-stream.showSponsored': false,
  'browser.newtabpage.activity-stream.showSponsoredTopSites': false,
  'browser.newtabpage.activity-stream.default.sites': '',
  'browser.topsites.contile.enabled': false,
  'browser.urlbar.suggest.quicksuggest.sponsored': false,
  'browser.urlbar.quicksuggest.enabled': false,
  'messaging-system.rsexperimentloader.enabled': false,
  'nimbus.enabled': false,
  'network.cookie.cookieBehavior': 0,
  // Background tabs keep their timers (tests drive several tabs at once).
  'dom.min_background_timeout_value': 4,
  'dom.min_background_timeout_value_without_budget_throttling': 4,
  'dom.timeout.enable_budget_timer_throttling': false,
  'dom.suspend_inactive.enabled': false,
  'dom.ipc.processPriorityManager.enabled': false,
  'browser.tabs.unloadOnLowMemory': false,
  // Temporary add-ons (webExtension.install) without prompts; extension consoles quiet.
  'xpinstall.signatures.required': false,
  'extensions.autoDisableScopes': 0,
  'extensions.enabledScopes': 5,
  'extensions.installDistroAddons': false,
  'devtools.console.stdout.content': false,
};

function prefsJs(prefs) {
  return Object.entries(prefs).map(([k, v]) => `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});`).join('\n') + '\n';
}

/**
 * A forward proxy for Firefox: `CONNECT host:port` and absolute-form http requests for a host in
 * `routes` (host → local port) are tunnelled to 127.0.0.1:that port; anything else gets 502 and
 * is noted in `refused`. Returns `{port, refused, close()}`.
 */
export async function startRoutingProxy(routes) {
  const refused = [];
  const sockets = new Set();
  const server = createNetServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) { if (head.length > 65536) client.destroy(); return; }
      client.off('data', onData);
      const text = head.subarray(0, end).toString('latin1');
      const [method, target] = text.split('\r\n')[0].split(' ');
      let host;
      if (method === 'CONNECT') host = target.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
      else {
        try { host = new URL(target).hostname; } catch { host = (/\r\nhost:\s*([^\r\n:]+)/i.exec(text) || [])[1]; }
      }
      host = String(host || '').toLowerCase();
      const port = routes.get(host);
      if (!port) {
        refused.push(`${method} ${target}`);
        client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      const upstream = netConnect(port, '127.0.0.1');
      sockets.add(upstream);
      upstream.on('close', () => { sockets.delete(upstream); client.destroy(); });
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.setNoDelay(true);
      client.setNoDelay(true);
      upstream.once('connect', () => {
        if (method === 'CONNECT') {
          client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
          const rest = head.subarray(end + 4);
          if (rest.length) upstream.write(rest);
        } else {
          // Node's http server takes absolute-form request targets, so the request passes as is.
          upstream.write(head);
        }
        client.pipe(upstream);
        upstream.pipe(client);
      });
    };
    client.on('data', onData);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    refused,
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(() => resolve()); }),
  };
}

/** The generated extension's background page: GM requests, content-script registrations. */
function backgroundSource(controlUrl) {
  return `'use strict';
const performRequest = ${performRequestSource()};
const registered = new Map();
const templates = new Map(); // host → {matches, code}; code may wait for the page's nonce
const NONCE_MARK = ${JSON.stringify(JSON.stringify(NONCE_MARK))};
async function registerCode(key, matches, code) {
  const old = registered.get(key);
  registered.delete(key);
  if (old) await old.unregister();
  registered.set(key, await browser.contentScripts.register({ matches, js: [{ code }], runAt: 'document_start', allFrames: false }));
}
// Violentmonkey in Firefox reads the page's nonce from its CSP header before the page loads and
// gives it to the script it adds to the page: the same here, at the response's headers.
browser.webRequest.onHeadersReceived.addListener(async (d) => {
  let host = '';
  try { host = new URL(d.url).hostname; } catch (e) { return {}; }
  const t = templates.get(host);
  if (!t || !t.code.includes(NONCE_MARK)) return {};
  const csp = (d.responseHeaders || []).find((h) => h.name.toLowerCase() === 'content-security-policy');
  const m = csp && /'nonce-([^']+)'/.exec(csp.value || '');
  await registerCode(host, t.matches, t.code.replace(NONCE_MARK, JSON.stringify(m ? m[1] : '')));
  return {};
}, { urls: ['<all_urls>'], types: ['main_frame'] }, ['blocking', 'responseHeaders']);
const control = new WebSocket(${JSON.stringify(controlUrl)});
const tell = (msg) => { if (control.readyState === WebSocket.OPEN) control.send(JSON.stringify(msg)); };
control.onmessage = async (ev) => {
  const msg = JSON.parse(ev.data);
  try {
    const result = null;
    if (msg.op === 'register') {
      templates.set(msg.key, { matches: msg.matches, code: msg.code });
      await registerCode(msg.key, msg.matches, msg.code.replace(NONCE_MARK, '""'));
    }
    tell({ reply: msg.id, result });
  } catch (err) {
    tell({ reply: msg.id, error: String(err && (err.stack || err.message) || err) });
  }
};
browser.runtime.onConnect.addListener((port) => {
  const url = port.sender && port.sender.url || '';
  const open = new Map();
  const post = (out) => {
    if (out.op !== 'head' && out.op !== 'chunk') open.delete(out.id);
    try { port.postMessage(out); } catch (e) { /* the tab went away */ }
  };
  port.onMessage.addListener((m) => {
    if (!m || typeof m !== 'object') return;
    if (m.op === 'xhr') open.set(m.id, performRequest(m, post));
    else if (m.op === 'abort') { const r = open.get(m.id); open.delete(m.id); if (r) r.abort(); }
    else if (m.op === 'setValue') tell(m.value === undefined ? { event: 'deleteValue', url, key: m.key } : { event: 'setValue', url, key: m.key, value: m.value });
  });
  port.onDisconnect.addListener(() => { for (const r of open.values()) r.abort(); open.clear(); });
});
`;
}

/**
 * The content script for one host: the GM api over a port to the background, then the userscript
 * in a function scope with `const unsafeWindow = window.wrappedJSObject`, in the content-script
 * sandbox. With `manager`, as that manager runs it instead (`managerContentScript`).
 */
export function contentScriptSource({ userscript, values = {}, textMode = 'final', streams = true, info = {}, manager = null }) {
  if (manager) return managerContentScript({ userscript, values, manager });
  const gmInfo = { injectInto: 'content', scriptHandler: 'AIcard test manager', version: '1.0', ...scriptMeta(userscript), ...info };
  return `(function () {
if (window.top !== window) return;
const { GM_xmlhttpRequest, GM_getValue, GM_setValue, GM_deleteValue, GM_info } = (function () {
  const port = browser.runtime.connect({ name: 'gm' });
  const link = { post: (m) => port.postMessage(m), onMessage: (fn) => port.onMessage.addListener(fn) };
  return ${gmApiSource()}({ link, values: ${JSON.stringify(values)}, info: ${JSON.stringify(gmInfo)}, textMode: ${JSON.stringify(textMode)}, streams: ${JSON.stringify(Boolean(streams))} });
})();
const unsafeWindow = window.wrappedJSObject;
{
${userscript}
}
})();
`;
}

/**
 * Violentmonkey (its default `auto`) and Tampermonkey (its default `raw`) in Firefox: the page
 * mode first — a \`<script>\` the content script adds, the GM api talking to it over DOM events —
 * and, where the page's CSP refuses that script (it never ran), the sandbox: Violentmonkey's
 * content mode (`unsafeWindow` = the sandbox's global), Tampermonkey's USERSCRIPT_WORLD
 * (`unsafeWindow` = the page's window, Firefox's exportFunction). Each with its GM_info and its
 * `window` wrapper (gm-api.js managerGlobals). `manager: 'violentmonkey-content'` skips the page.
 */
function managerContentScript({ userscript, values, manager }) {
  const name = manager.replace(/-content$/, '');
  const pageFirst = manager !== 'violentmonkey-content';
  // Violentmonkey copies the page's nonce onto its script (Tampermonkey does not: on the mock
  // sites, all with a nonce-only script-src, it ends up in its USERSCRIPT_WORLD).
  const nonceExpr = name === 'violentmonkey' ? JSON.stringify(NONCE_MARK) : '""';
  const page = managerGlobals(name, 'page', 'firefox');
  const sandbox = managerGlobals(name, 'sandbox', 'firefox');
  const meta = scriptMeta(userscript);
  const ev = `aicard-gm-${randomBytes(8).toString('hex')}`;
  const body = (linkExpr, model) => `const { GM_xmlhttpRequest, GM_getValue, GM_setValue, GM_deleteValue, GM_info } = (${gmApiSource()})(Object.assign({
  link: ${linkExpr}, values: ${JSON.stringify(values)}, info: ${JSON.stringify({ ...model.info, ...meta })},
}, ${JSON.stringify(model.gm)}));
const __page = window;
const __global = globalThis;
{
${model.prelude}
${userscript}
}`;
  const pageCode = `(function () { window[${JSON.stringify(`${ev}:ran`)}] = 1;
${body(pageLink(ev), page)}
})();`;
  return `(function () {
if (window.top !== window) return;
const port = browser.runtime.connect({ name: 'gm' });
const portListeners = [];
port.onMessage.addListener((m) => { for (const fn of portListeners) fn(m); });
let ran = false;
if (${JSON.stringify(pageFirst)}) {
  const EV = ${JSON.stringify(ev)};
  const down = (m) => window.dispatchEvent(new CustomEvent(EV + ':down', { detail: JSON.stringify(m) }));
  window.addEventListener(EV + ':up', (e) => {
    if (typeof e.detail !== 'string') return;
    e.stopImmediatePropagation();
    const m = JSON.parse(e.detail);
    if (m && m.op === 'hello') { down({ op: 'ready' }); return; }
    port.postMessage(m);
  });
  portListeners.push(down);
  try {
    const s = document.createElement('script');
    const nonce = ${nonceExpr};
    if (nonce) s.setAttribute('nonce', nonce);
    s.textContent = ${JSON.stringify(pageCode)};
    (document.head || document.documentElement).appendChild(s);
    s.remove();
    ran = window.wrappedJSObject[${JSON.stringify(`${ev}:ran`)}] === 1;
  } catch (e) { ran = false; }
  if (!ran) portListeners.length = 0;
}
if (!ran) {
${body('{ post: (m) => port.postMessage(m), onMessage: (fn) => portListeners.push(fn) }', sandbox)}
}
})();
`;
}

/** `GM_info.script` from the userscript's metadata block (name, version, namespace). */
function scriptMeta(userscript) {
  const block = /\/\/ ==UserScript==([\s\S]*?)\/\/ ==\/UserScript==/.exec(userscript || '');
  if (!block) return {};
  const script = {};
  for (const m of block[1].matchAll(/^\/\/ @(name|version|namespace)\s+(.+)$/gm)) if (!(m[1] in script)) script[m[1]] = m[2].trim();
  return { script };
}

const KEYS = {
  Enter: '\uE007', Tab: '\uE004', Escape: '\uE00C', Backspace: '\uE003', Delete: '\uE017',
  ArrowLeft: '\uE012', ArrowUp: '\uE013', ArrowRight: '\uE014', ArrowDown: '\uE015',
  Shift: '\uE008', Control: '\uE009', Alt: '\uE00A', Meta: '\uE03D', Home: '\uE011', End: '\uE010',
};

/** In-page: the first visible element matching one of `selectors`, in their order. */
function firstVisible(selectors) {
  for (const sel of selectors) {
    for (const el of document.querySelectorAll(sel)) {
      const r = el.getBoundingClientRect();
      const cs = getComputedStyle(el);
      if (r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none') return el;
    }
  }
  return null;
}

/**
 * Starts Firefox with the userscript in every mock host's content-script sandbox.
 * `gm.textMode`: 'final' (text at readyState 4) or 'growing' (Violentmonkey); `gm.streams`:
 * whether `responseType: 'stream'` is honoured (defaults as gm-api.js: 'final', true). `routes`:
 * more `host → local port` for the proxy (https pages of a test's own). Returns `{openTab(
 * {host, path, values, userscript?, gm?}), close(), storedValues(), bidi, proxy, output, launchMs}`.
 */
export async function launchFirefox({ mock, userscript, gm = {}, firefox = FIREFOX, prefs = {}, routes: extraRoutes = {}, manager = null } = {}) {
  if (!existsSync(firefox)) throw new Error(`${firefox} missing (Debian package firefox-esr)`);
  const started = Date.now();
  const scheme = mock?.scheme || 'https';
  const routes = new Map(Object.entries(extraRoutes));
  for (const h of mock?.hosts || []) routes.set(h.toLowerCase(), mock.port);
  const cleanup = [];
  const run = async (fn) => { try { await fn(); } catch { /* best effort */ } };
  let child = null;
  let bidi = null;
  // A test process that exits or is killed (the runner's timeout) takes its Firefox with it.
  const tempDirs = [];
  const killOnExit = () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    for (const d of tempDirs) { try { rmSync(d, { recursive: true, force: true }); } catch { /* best effort */ } }
  };
  const onSignal = (signal) => { killOnExit(); unhook(); process.kill(process.pid, signal); };
  const unhook = () => { process.off('exit', killOnExit); process.off('SIGINT', onSignal); process.off('SIGTERM', onSignal); };
  process.on('exit', killOnExit);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // The routing proxy.
    const proxy = await startRoutingProxy(routes);
    cleanup.push(() => proxy.close());

    // The control channel to the extension's background page.
    const key = randomBytes(12).toString('hex');
    const control = new WebSocketServer({ host: '127.0.0.1', port: 0, verifyClient: ({ req }) => req.url === `/${key}` });
    await new Promise((resolve) => control.once('listening', resolve));
    cleanup.push(() => new Promise((resolve) => { for (const c of control.clients) c.terminate(); control.close(() => resolve()); }));
    let bg = null;
    const calls = new Map();
    let nextCall = 0;
    const store = {}; // the script's GM values as it wrote them (GM_setValue / GM_deleteValue), all tabs
    const bgConnected = new Promise((resolve) => {
      control.on('connection', (socket) => {
        bg = socket;
        socket.on('message', (data) => {
          const msg = JSON.parse(String(data));
          if (msg.reply) {
            const call = calls.get(msg.reply);
            calls.delete(msg.reply);
            if (call) { if (msg.error) call.reject(new Error(msg.error)); else call.resolve(msg.result); }
          } else if (msg.event === 'setValue') store[msg.key] = msg.value;
          else if (msg.event === 'deleteValue') delete store[msg.key];
        });
        resolve();
      });
    });
    const callBg = (msg) => new Promise((resolve, reject) => {
      if (!bg) { reject(new Error('extension background not connected')); return; }
      nextCall += 1;
      calls.set(nextCall, { resolve, reject });
      bg.send(JSON.stringify({ ...msg, id: nextCall }));
    });
    /** (Re-)registers the content script of `host` with `{...store, ...values}` baked in. */
    const register = (host, { values, userscript: script, textMode, streams, manager: kind }) => callBg({
      op: 'register', key: host, matches: [`${scheme}://${host}/*`],
      code: contentScriptSource({ userscript: script, values: { ...store, ...values }, textMode, streams, manager: kind }),
    });
    // One registration per host: openTab / reload on the same host take turns until each has loaded.
    const hostLocks = new Map();
    const withHost = async (host, fn) => {
      const prev = hostLocks.get(host) || Promise.resolve();
      let release;
      const mine = new Promise((r) => { release = r; });
      hostLocks.set(host, prev.then(() => mine));
      await prev;
      try { return await fn(); } finally { release(); }
    };

    // The extension.
    const extDir = mkdtempSync(join(tmpdir(), 'aicard-ff-ext-'));
    tempDirs.push(extDir);
    cleanup.push(() => rmSync(extDir, { recursive: true, force: true }));
    writeFileSync(join(extDir, 'manifest.json'), JSON.stringify({
      manifest_version: 2,
      name: 'AIcard test manager',
      version: '1.0',
      description: 'Runs the AIcard userscript in content-script sandboxes for tests.',
      browser_specific_settings: { gecko: { id: EXTENSION_ID } },
      permissions: ['<all_urls>', 'webRequest', 'webRequestBlocking'],
      background: { scripts: ['background.js'] },
    }, null, 2));
    writeFileSync(join(extDir, 'background.js'), backgroundSource(`ws://127.0.0.1:${control.address().port}/${key}`));

    // The profile.
    const profile = mkdtempSync(join(tmpdir(), 'aicard-ff-profile-'));
    tempDirs.push(profile);
    cleanup.push(() => rmSync(profile, { recursive: true, force: true }));
    writeFileSync(join(profile, 'user.js'), prefsJs({
      ...QUIET_PREFS,
      'network.proxy.type': 1,
      'network.proxy.http': '127.0.0.1',
      'network.proxy.http_port': proxy.port,
      'network.proxy.ssl': '127.0.0.1',
      'network.proxy.ssl_port': proxy.port,
      'network.proxy.share_proxy_settings': false,
      'network.proxy.no_proxies_on': 'localhost, .localhost, 127.0.0.1', // .localhost: the SSE channel's per-tab names
      'network.proxy.allow_hijacking_localhost': false,
      'network.proxy.failover_direct': false,
      ...prefs,
    }));

    // Firefox.
    child = spawn(firefox, ['--headless', '--no-remote', '--remote-debugging-port=0', '--profile', profile, 'about:blank'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MOZ_CRASHREPORTER_DISABLE: '1', MOZ_CRASHREPORTER: '', MOZ_DISABLE_AUTO_SAFE_MODE: '1', MOZ_REMOTE_SETTINGS_DEVTOOLS: '1' },
    });
    const output = [];
    child.stdout.on('data', (d) => output.push(String(d)));
    const wsUrl = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`firefox did not offer BiDi in 30 s:\n${output.join('').slice(-3000)}`)), 30000);
      child.stderr.on('data', (d) => {
        output.push(String(d));
        const m = /WebDriver BiDi listening on (ws:\/\/\S+)/.exec(output.join(''));
        if (m) { clearTimeout(timer); resolve(m[1]); }
      });
      child.once('exit', (code, signal) => { clearTimeout(timer); reject(new Error(`firefox exited (${code ?? signal}):\n${output.join('').slice(-3000)}`)); });
    });
    const mark = (what) => { if (process.env.AICARD_FF_DEBUG) console.error(`[firefox world] ${what} at ${Date.now() - started} ms`); };
    mark('bidi offered');
    bidi = await BiDi.connect(`${wsUrl.replace(/\/$/, '')}/session`);
    await bidi.send('session.new', { capabilities: { alwaysMatch: { acceptInsecureCerts: true, unhandledPromptBehavior: { default: 'ignore' } } } });
    mark('session');
    await bidi.send('webExtension.install', { extensionData: { type: 'path', path: extDir } });
    mark('extension installed');
    await Promise.race([bgConnected, new Promise((_, reject) => setTimeout(() => reject(new Error('extension background did not connect in 15 s')), 15000))]);
    mark('background connected');
    await bidi.send('session.subscribe', { events: ['log.entryAdded'] });
    mark('ready');
    const logListeners = new Set();
    bidi.on('log.entryAdded', (e) => { for (const fn of logListeners) fn(e); });

    const tabs = new Set();

    async function openTab({ host, path = '/', values = {}, userscript: script = userscript, gm: gmOverride = {} } = {}) {
      if (!host) throw new Error('openTab: host required');
      host = host.toLowerCase();
      const mode = { ...gm, ...gmOverride };
      const setup = { values: { ...values }, userscript: script, textMode: mode.textMode || 'final', streams: mode.streams !== false, manager };
      return withHost(host, async () => {
        await register(host, setup);
        const { context } = await bidi.send('browsingContext.create', { type: 'tab' });
        const tab = makeTab(context, host, setup);
        tabs.add(tab);
        try {
          await bidi.send('browsingContext.navigate', { context, url: `${scheme}://${host}${path}`, wait: 'interactive' });
        } catch (err) {
          await run(() => tab.close());
          throw err;
        }
        return tab;
      });
    }

    function makeTab(context, host, setup) {
      const errors = [];
      const logs = [];
      const onLog = (e) => {
        if (e.source?.context !== context) return;
        logs.push(e);
        if (e.level === 'error' && e.type === 'javascript') errors.push(Object.assign(new Error(e.text), { entry: e }));
      };
      logListeners.add(onLog);
      const target = { context };
      const check = (res) => {
        if (res.type === 'exception') throw new Error(`in page: ${exceptionText(res)}`);
        return fromRemoteValue(res.result);
      };
      const evaluateRemote = async (fnOrSource, args, ownership = 'none') => {
        if (typeof fnOrSource === 'function') {
          return bidi.send('script.callFunction', {
            functionDeclaration: String(fnOrSource), target, arguments: args.map(toLocalValue),
            awaitPromise: true, resultOwnership: ownership, userActivation: false,
            serializationOptions: { maxObjectDepth: 32, maxDomDepth: 0 },
          });
        }
        return bidi.send('script.evaluate', { expression: String(fnOrSource), target, awaitPromise: true, resultOwnership: ownership, serializationOptions: { maxObjectDepth: 32, maxDomDepth: 0 } });
      };
      const tab = {
        context,
        errors,
        logs,
        /** Runs `fn(arg)` (or an expression) in the page's own realm; resolves with its value. */
        async evaluate(fnOrSource, ...rest) {
          return check(await evaluateRemote(fnOrSource, rest.length ? [rest[0]] : []));
        },
        /** Polls `fn(arg)` in the page until it returns something truthy; resolves with it. */
        async waitFor(fn, arg, { timeout = 10000, interval = 50 } = {}) {
          const end = Date.now() + timeout;
          let lastError = null;
          for (;;) {
            try {
              const v = await tab.evaluate(fn, arg);
              if (v) return v;
              lastError = null;
            } catch (err) {
              if (/no such frame/.test(err.message)) throw err;
              lastError = err;
            }
            if (Date.now() > end) throw new Error(`waitFor timed out after ${timeout} ms: ${String(fn).slice(0, 160)}${lastError ? `\nlast error: ${lastError.message}` : ''}`);
            await new Promise((r) => setTimeout(r, interval));
          }
        },
        /** The element (a BiDi shared reference) of the first visible match, waiting for one. */
        async element(selectors, { timeout = 10000 } = {}) {
          await tab.waitFor(firstVisible, selectors, { timeout });
          const res = await evaluateRemote(firstVisible, [selectors]);
          const el = check(res);
          if (!el || !el.sharedId) throw new Error(`no element for ${selectors.join(', ')}`);
          return el;
        },
        /** Moves the mouse to the centre of `el` and clicks it (trusted events). */
        async click(el) {
          await tab.evaluate((e) => e.scrollIntoView({ block: 'center', inline: 'center' }), el);
          await bidi.send('browsingContext.activate', { context });
          await bidi.send('input.performActions', {
            context,
            actions: [{
              type: 'pointer', id: 'mouse', parameters: { pointerType: 'mouse' },
              actions: [
                { type: 'pointerMove', x: 0, y: 0, origin: { type: 'element', element: { sharedId: el.sharedId } } },
                { type: 'pointerDown', button: 0 }, { type: 'pointerUp', button: 0 },
              ],
            }],
          });
        },
        /** Clicks at viewport point (x, y) (trusted events; the panel's buttons, in its closed shadow root). */
        async clickAt(x, y) {
          await bidi.send('browsingContext.activate', { context });
          await bidi.send('input.performActions', {
            context,
            actions: [{
              type: 'pointer', id: 'mouse', parameters: { pointerType: 'mouse' },
              actions: [
                { type: 'pointerMove', x: Math.round(x), y: Math.round(y), origin: 'viewport' },
                { type: 'pointerDown', button: 0 }, { type: 'pointerUp', button: 0 },
              ],
            }],
          });
          await bidi.send('input.releaseActions', { context });
        },
        /**
         * Types `text` with key actions, one grapheme per keyDown/keyUp (CJK and emoji included;
         * '\n' is Shift+Enter, a new line in a chat box).
         */
        async type(text) {
          const actions = [];
          for (const { segment } of new Intl.Segmenter().segment(String(text))) {
            if (segment === '\n' || segment === '\r\n') {
              actions.push({ type: 'keyDown', value: KEYS.Shift }, { type: 'keyDown', value: KEYS.Enter }, { type: 'keyUp', value: KEYS.Enter }, { type: 'keyUp', value: KEYS.Shift });
            } else actions.push({ type: 'keyDown', value: segment }, { type: 'keyUp', value: segment });
          }
          await bidi.send('browsingContext.activate', { context });
          await bidi.send('input.performActions', { context, actions: [{ type: 'key', id: 'keyboard', actions }] });
        },
        /** Presses one key ('Enter', 'Tab', … or a character). */
        async press(key) {
          const value = KEYS[key] || key;
          await bidi.send('browsingContext.activate', { context });
          await bidi.send('input.performActions', { context, actions: [{ type: 'key', id: 'keyboard', actions: [{ type: 'keyDown', value }, { type: 'keyUp', value }] }] });
        },
        /**
         * As a person: clicks the first visible input of `inputSelectors`, types `text`, then clicks
         * the send button (first visible of `sendSelectors`, once it is enabled) or, with none on
         * the page, presses `sendKey`.
         */
        async typeAndSend(inputSelectors, sendSelectors, text, sendKey = 'Enter') {
          const input = await tab.element(inputSelectors);
          await tab.click(input);
          await tab.type(text);
          let send = null;
          if (sendSelectors && sendSelectors.length) {
            const found = check(await evaluateRemote(firstVisible, [sendSelectors]));
            if (found && found.sharedId) {
              await tab.waitFor((e) => !e.disabled && e.getAttribute('aria-disabled') !== 'true', found, { timeout: 5000 });
              send = found;
            }
          }
          if (send) await tab.click(send);
          else await tab.press(sendKey);
          await bidi.send('input.releaseActions', { context });
        },
        async screenshot(path) {
          const { data } = await bidi.send('browsingContext.captureScreenshot', { context });
          mkdirSync(join(path, '..'), { recursive: true });
          writeFileSync(path, Buffer.from(data, 'base64'));
          return path;
        },
        /** Reloads with this tab's values (over what the script has stored since) registered. */
        async reload() {
          await withHost(host, async () => {
            await register(host, setup);
            await bidi.send('browsingContext.reload', { context, wait: 'interactive' });
          });
        },
        async close() {
          if (!tabs.has(tab)) return;
          tabs.delete(tab);
          logListeners.delete(onLog);
          await run(() => bidi.send('browsingContext.close', { context }));
        },
      };
      return tab;
    }

    async function close() {
      for (const tab of [...tabs]) await run(() => tab.close());
      if (bidi && !bidi.closed) {
        const exited = child.exitCode === null ? new Promise((r) => child.once('exit', r)) : Promise.resolve();
        await run(() => Promise.race([bidi.send('browser.close'), new Promise((r) => setTimeout(r, 5000))]));
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10000))]);
        await run(() => bidi.close());
      }
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await exited;
      }
      unhook();
      for (const fn of cleanup.reverse()) await run(fn);
    }

    return { openTab, close, storedValues: () => ({ ...store }), bidi, proxy, output, launchMs: Date.now() - started };
  } catch (err) {
    await run(() => bidi?.close());
    if (child && child.exitCode === null) child.kill('SIGKILL');
    unhook();
    for (const fn of cleanup.reverse()) await run(fn);
    throw err;
  }
}
