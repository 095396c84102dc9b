// Content-Security-Policy for the mock sites. A site's policy is data in its definition (`csp`: directive →
// list of sources, `NONCE` where the real page puts its per-response nonce); the server draws a fresh nonce
// per HTML response, puts it in the header and on the page's inline <script>. Real policies and their
// sources: shared/reference/site-runtime.md §1b.

import { randomBytes } from 'node:crypto';

/** Placeholder for the per-response nonce in a policy's source list. */
export const NONCE = "'nonce'";

/** A fresh nonce (base64, 128 bits), as a real server draws one per response. */
export function newNonce() {
  return randomBytes(16).toString('base64');
}

/** The header value of `csp` with `nonce` filled in ("a b; c d"). */
export function cspHeader(csp, nonce) {
  if (typeof csp === 'string') return csp.replaceAll(NONCE, `'nonce-${nonce}'`);
  return Object.entries(csp)
    .map(([directive, sources]) => [directive, ...(sources || []).map((s) => (s === NONCE ? `'nonce-${nonce}'` : s))].join(' '))
    .join('; ');
}

/**
 * The policy for a site whose real header nobody has published (DeepSeek's only quoted policy is
 * Report-Only, the other Chinese sites have none on record): as strict as the strictest real one —
 * inline scripts only with the nonce, and connections only to the site's own https/wss origins, so a
 * page-world fetch or WebSocket to 127.0.0.1/localhost is refused as on ChatGPT and Claude.
 */
export function strictCsp(hosts) {
  const origins = hosts.flatMap((h) => [`https://${h}`, `wss://${h}`]);
  return {
    'script-src': [NONCE],
    'connect-src': ["'self'", ...origins],
    'object-src': ["'none'"],
    'base-uri': ["'self'"],
  };
}
