/**
 * Reconnect policy for the hub client: exponential backoff with jitter, and the small state
 * machine that decides when to retry and when to switch between the WebSocket and the
 * SSE+POST fallback. Pure (time and randomness are injected) so the arithmetic is unit tested.
 */

export const DEFAULT_POLICY = Object.freeze({
  baseMs: 500,        // first retry waits about this long
  factor: 2,          // each failed attempt multiplies the wait
  maxMs: 30_000,      // never wait longer than this
  jitter: 0.5,        // fraction of the delay that is randomised (0 = none, 1 = full jitter)
});

/**
 * Delay before retry number `attempt` (0-based): `min(maxMs, baseMs * factor^attempt)`, of
 * which the `jitter` fraction is replaced by a uniform random share. Always within
 * `[capped * (1 - jitter), capped]`.
 */
export function backoffDelay(attempt, policy = DEFAULT_POLICY, random = Math.random) {
  const { baseMs, factor, maxMs, jitter } = { ...DEFAULT_POLICY, ...policy };
  const exp = Math.max(0, attempt);
  const capped = Math.min(maxMs, baseMs * Math.pow(factor, exp));
  const j = Math.min(1, Math.max(0, jitter));
  return Math.round(capped * (1 - j) + capped * j * random());
}

/**
 * The reconnect state machine. States: `idle` → `connecting` → `open` → (`waiting` →
 * `connecting`)* … `stopped`. Transports are tried in the order given (`ws` first when the page
 * may open one, then `sse`: SSE + POST through GM_xmlhttpRequest). A transport that fails
 * without ever having opened hands over to the next one **at once** (no waiting on a refused
 * WebSocket); only when every transport failed in a row does the machine back off. A transport
 * that has opened once is kept, with backoff: its later failures mean the hub is down, not that
 * the way is blocked. `block(kind)` drops a transport for the rest of the page's life (the
 * page's CSP refused it, or Local Network Access is not granted); the last one is never dropped.
 */
export class ReconnectMachine {
  constructor(policy = DEFAULT_POLICY, random = Math.random, transports = ['ws', 'sse']) {
    this.policy = { ...DEFAULT_POLICY, ...policy };
    this.random = random;
    this.state = 'idle';
    this.order = transports.length ? [...transports] : ['ws'];
    this.blocked = new Set();
    this.transport = this.order[0];
    this.attempt = 0;
    this.tried = new Set();
    this.opened = Object.fromEntries(this.order.map((t) => [t, false]));
  }

  /** Transports still allowed, in order. */
  get usable() {
    return this.order.filter((t) => !this.blocked.has(t));
  }

  /** Begin (or retry) a connection. Returns the transport to use. */
  connect() {
    if (this.state === 'stopped') return null;
    this.state = 'connecting';
    return this.transport;
  }

  /** The current transport proved it receives (its welcome arrived). */
  open() {
    if (this.state === 'stopped') return;
    this.state = 'open';
    this.attempt = 0;
    this.tried.clear();
    this.opened[this.transport] = true;
  }

  /** Never use `kind` again on this page (unless it is the only one left). */
  block(kind) {
    if (this.usable.length > 1 || !this.usable.includes(kind)) this.blocked.add(kind);
    if (this.blocked.has(this.transport)) this.transport = this.usable[0];
  }

  /**
   * The connection failed or was lost. Returns `{delayMs, transport}` for the next try,
   * or null when stopped.
   */
  lost() {
    if (this.state === 'stopped') return null;
    const wasOpen = this.state === 'open';
    this.state = 'waiting';
    if (!wasOpen && !this.opened[this.transport]) {
      this.tried.add(this.transport);
      const next = this.usable.find((t) => !this.tried.has(t));
      if (next) {
        this.transport = next;
        return { delayMs: 0, transport: next };
      }
      this.tried.clear();
      this.transport = this.usable[0];
    }
    const delayMs = backoffDelay(this.attempt, this.policy, this.random);
    this.attempt += 1;
    return { delayMs, transport: this.transport };
  }

  stop() {
    this.state = 'stopped';
  }
}
