/**
 * Adapter selection and the contract every site adapter fulfils (see docs/userscript.md).
 */

/** Picks the adapter whose `hosts` contain `hostname` (exact, or a subdomain of it). */
export function pickAdapter(adapters, hostname) {
  const host = String(hostname).toLowerCase();
  for (const adapter of adapters) {
    for (const h of adapter.hosts || []) {
      const want = h.toLowerCase();
      if (host === want || host.endsWith(`.${want}`)) return adapter;
    }
  }
  return null;
}

/** Checks an adapter against the contract; returns a list of problems (empty when valid). */
export function validateAdapter(a) {
  const problems = [];
  if (!a || typeof a !== 'object') return ['adapter is not an object'];
  if (typeof a.name !== 'string' || !/^[a-z0-9_-]+$/.test(a.name)) problems.push('name must be a lowercase word');
  if (!Array.isArray(a.hosts) || a.hosts.length === 0) problems.push('hosts must list at least one hostname');
  if (typeof a.matchRequest !== 'function') problems.push('matchRequest(url, method) missing');
  if (typeof a.createParser !== 'function') problems.push('createParser() missing');
  if (!a.input || !Array.isArray(a.input.selectors)) problems.push('input.selectors missing');
  if (a.input && !['textarea', 'contenteditable'].includes(a.input.kind)) problems.push('input.kind must be textarea or contenteditable');
  if (!a.send || !Array.isArray(a.send.selectors)) problems.push('send.selectors missing');
  for (const opt of ['promptFromRequest', 'trouble']) {
    if (a[opt] !== undefined && typeof a[opt] !== 'function') problems.push(`${opt} must be a function`);
  }
  return problems;
}
