// The worlds of the browser matrix (docs/userscript.md, issue 29), shared by the matrix's flow story
// (matrix.test.js) and the agent loop's cells (agent.test.js): each manager's model in the
// browsers it supports, with Local Network Access granted and denied where Chromium has it.
// `hooks`: the hook mode every tab must report (page, inject, xray), where the world fixes it.
import { launchChromium } from './chromium.js';
import { launchFirefox } from './firefox.js';

const chromiumWith = (manager, world, more = {}) => (o) => launchChromium({ ...o, world, manager, ...more });
const firefoxWith = (manager, more = {}) => (o) => launchFirefox({ ...o, manager, ...more });
export const WORLDS = [
  { id: 'scriptcat-chromium-main', lna: ['granted', 'denied'], hooks: 'page', launch: chromiumWith('scriptcat', 'MAIN') },
  // Denied: the SSE channel, read as Violentmonkey fills responseText.
  { id: 'violentmonkey-chromium-page', lna: ['denied'], hooks: 'page', launch: chromiumWith('violentmonkey', 'MAIN') },
  // Granted: the isolated world's WebSocket; the hooks go in through a <script>.
  { id: 'violentmonkey-chromium-content', lna: ['granted'], hooks: 'inject', launch: chromiumWith('violentmonkey', 'USER_SCRIPT') },
  { id: 'tampermonkey-chromium-main', lna: ['denied'], hooks: 'page', launch: chromiumWith('tampermonkey', 'MAIN') },
  // Firefox ESR 140 has no Local Network Access yet: one cell each, named for what it is.
  { id: 'violentmonkey-firefox-auto', lna: ['none'], hooks: 'page', launch: firefoxWith('violentmonkey') },
  { id: 'violentmonkey-firefox-content', lna: ['none'], hooks: 'xray', launch: firefoxWith('violentmonkey-content') },
  { id: 'tampermonkey-firefox', lna: ['none'], hooks: 'xray', launch: firefoxWith('tampermonkey') },
  // The per-tab *.localhost names sent elsewhere (a DNS override, a proxy): nine tabs on the SSE
  // channel still each read their frames, over 127.0.0.1 and localhost in turn.
  { id: 'no-localhost-names-chromium', lna: ['denied'], launch: chromiumWith('scriptcat', 'MAIN', { resolverRules: ['MAP *.localhost ~NOTFOUND'] }) },
  // Firefox's network.dns.forceResolve: every name DNS would resolve goes to 127.0.0.2, where
  // nothing listens (the mock sites go through the test's proxy, the hub by its IP).
  { id: 'no-localhost-names-firefox', lna: ['none'], launch: firefoxWith('violentmonkey', { prefs: { 'network.dns.forceResolve': '127.0.0.2' } }) },
];
