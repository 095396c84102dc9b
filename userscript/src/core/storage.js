/**
 * Where the userscript keeps its state: the hub token and settings in the userscript manager's
 * own storage (GM_getValue/GM_setValue — not readable by the page), the tab's client id in the
 * page's sessionStorage (a reload keeps the identity, a new tab gets a new one).
 */

const PLACEHOLDER_PREFIX = '__AICARD_';
const CLIENT_ID_KEY = 'aicard.client_id';
export const DEFAULT_HUB_URL = 'http://127.0.0.1:8027';

/** True when the hub did not fill this placeholder in (script installed from source). */
export function isPlaceholder(value) {
  return typeof value !== 'string' || value === '' || value.startsWith(PLACEHOLDER_PREFIX);
}

/** Wraps the GM value functions; `gm` holds `getValue`/`setValue` (or falls back to memory). */
export class Settings {
  constructor(gm) {
    this.gm = gm;
  }

  get(key, fallback) {
    try {
      const value = this.gm.getValue(key, fallback);
      return value === undefined ? fallback : value;
    } catch {
      return fallback;
    }
  }

  set(key, value) {
    this.gm.setValue(key, value);
  }

  /**
   * Moves the token the hub embedded into GM storage (first run, or the hub's token changed)
   * and returns the stored one. The token is never written to the page.
   */
  adoptToken(embedded) {
    if (!isPlaceholder(embedded) && this.get('token', '') !== embedded) this.set('token', embedded);
    return this.get('token', '');
  }

  /** Hub URL: the embedded one wins (the hub served this script), else the stored or default. */
  adoptHubUrl(embedded) {
    if (!isPlaceholder(embedded)) {
      const url = String(embedded).replace(/\/+$/, '');
      if (this.get('hub_url', '') !== url) this.set('hub_url', url);
      return url;
    }
    return this.get('hub_url', DEFAULT_HUB_URL);
  }
}

/** The tab's client id, kept in sessionStorage so a reload resumes the same identity. */
export class TabIdentity {
  constructor(sessionStorage) {
    this.store = sessionStorage;
  }

  get clientId() {
    try {
      return this.store.getItem(CLIENT_ID_KEY) || undefined;
    } catch {
      return undefined;
    }
  }

  set clientId(id) {
    try {
      this.store.setItem(CLIENT_ID_KEY, id);
    } catch {
      // Storage disabled by the site: identity lasts for this page only.
    }
  }
}
