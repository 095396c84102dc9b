// URL matching for `matchRequest`: the page may pass absolute or relative URLs, URL objects or Requests.

const BASE = 'https://relative.invalid/';

/** Parse what fetch/XHR was given into `{host, path, search}`; host is '' for relative URLs. */
export function parseRequestUrl(url) {
  const raw = url && typeof url === 'object' && 'url' in url ? url.url : String(url);
  let parsed;
  try {
    parsed = new URL(raw, BASE);
  } catch {
    return null;
  }
  const host = parsed.host === 'relative.invalid' ? '' : parsed.hostname.toLowerCase();
  return { host, path: parsed.pathname, search: parsed.search, params: parsed.searchParams };
}

/**
 * Build a matcher: POST to one of `hosts` (or a relative URL, i.e. the page's own host) whose path matches
 * one of `paths` (RegExps anchored by the caller).
 */
export function endpointMatcher({ hosts, paths, methods = ['POST'] }) {
  const hostSet = new Set(hosts.map((h) => h.toLowerCase()));
  return function matchRequest(url, method) {
    const m = String(method || 'GET').toUpperCase();
    if (!methods.includes(m)) return false;
    const u = parseRequestUrl(url);
    if (!u) return false;
    if (u.host !== '' && !hostSet.has(u.host)) return false;
    return paths.some((re) => re.test(u.path));
  };
}
