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
  switchAfter: 2,     // consecutive never-opened failures of one transport before trying the other
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
 * `connecting`)* … `stopped`. Transports: `ws` first; a transport that fails `switchAfter`
 * times in a row without ever opening makes the machine try the other one (Chrome's Local
 * Network Access prompt denied blocks the WebSocket but not GM_xmlhttpRequest). A transport
 * that has opened once is kept: its later failures mean the hub is down, not blocked.
 */
export class ReconnectMachine {
  constructor(policy = DEFAULT_POLICY, random = Math.random) {
    this.policy = { ...DEFAULT_POLICY, ...policy };
    this.random = random;
    this.state = 'idle';
    this.transport = 'ws';
    this.attempt = 0;
    this.failuresWithoutOpen = 0;
    this.opened = { ws: false, sse: false };
  }

  /** Begin (or retry) a connection. Returns the transport to use. */
  connect() {
    if (this.state === 'stopped') return null;
    this.state = 'connecting';
    return this.transport;
  }

  /** The current transport said hello and got a welcome. */
  open() {
    if (this.state === 'stopped') return;
    this.state = 'open';
    this.attempt = 0;
    this.failuresWithoutOpen = 0;
    this.opened[this.transport] = true;
  }

  /**
   * The connection failed or was lost. Returns `{delayMs, transport}` for the next try,
   * or null when stopped.
   */
  lost() {
    if (this.state === 'stopped') return null;
    const wasOpen = this.state === 'open';
    if (!wasOpen && !this.opened[this.transport]) {
      this.failuresWithoutOpen += 1;
      if (this.failuresWithoutOpen >= this.policy.switchAfter) {
        this.transport = this.transport === 'ws' ? 'sse' : 'ws';
        this.failuresWithoutOpen = 0;
      }
    }
    const delayMs = backoffDelay(this.attempt, this.policy, this.random);
    this.attempt += 1;
    this.state = 'waiting';
    return { delayMs, transport: this.transport };
  }

  stop() {
    this.state = 'stopped';
  }
}
