/**
 * A reply's `turn_id` survives a reload of the page (docs/agents.md "never twice"). The hub keys the
 * commands of a looping tab by (tab, turn, index): if a reply that was streaming when the page
 * reloaded comes again afterwards (the site resumes it, or sends the same request again), it must
 * end with the same `turn_id`, or its commands would run a second time.
 *
 * What is kept (sessionStorage, so only this tab and only until it closes): the turn in progress
 * — its id, the prompt that started it, the first characters of its text, whether it ended, the
 * task it answered and whether the hub typed its prompt — and the page life that wrote it. A turn
 * of a *later* page life is the same reply when, within a few minutes:
 * - its prompt is the kept prompt (whitespace aside) and its text begins as the kept text did; or
 * - the site sent no prompt (a resume request) and the kept turn had not ended.
 * Each kept turn is taken over at most once. A reply sent again from its start does not send the
 * hub again what it already had: its chunks go on from the kept `seq` and the kept count of
 * characters, so the hub reads one continuous stream (and finds each command once).
 */

const KEY = 'aicard.turn';
/** How long after a reload a reply may still be the one that was cut. */
export const RESUME_WINDOW_MS = 10 * 60_000;
/** Characters of the reply kept to recognise it. */
const PREFIX_CHARS = 200;
/** Characters a resumed reply must show before it is judged (fewer if the kept text is shorter). */
const JUDGE_CHARS = 24;

const squash = (s) => String(s ?? '').replace(/\s+/g, '');

export class TurnMemory {
  /**
   * @param {Storage} store      the page's sessionStorage (may throw: storage off)
   * @param {object} [o]
   * @param {() => number} [o.now]
   * @param {number} [o.windowMs]
   */
  constructor(store, { now = () => Date.now(), windowMs = RESUME_WINDOW_MS } = {}) {
    this.store = store;
    this.now = now;
    this.windowMs = windowMs;
    /** This page life: records it wrote are never taken over by it. */
    this.life = `${now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  }

  read() {
    try {
      const rec = JSON.parse(this.store.getItem(KEY) || 'null');
      return rec && typeof rec.id === 'string' ? rec : null;
    } catch {
      return null;
    }
  }

  write(rec) {
    try { this.store.setItem(KEY, JSON.stringify(rec)); } catch { /* storage off: this page life only */ }
  }

  /**
   * A turn starts with `prompt` (null when the request carried none): the kept turn it may
   * continue, or null. A candidate still has to pass `judge` on its first text.
   */
  candidate(prompt) {
    const rec = this.read();
    if (!rec || rec.life === this.life || rec.id === this.consumed || this.now() - rec.at > this.windowMs) return null;
    if (prompt === null || prompt === undefined) return rec.ended ? null : rec;
    if (rec.prompt === null || rec.prompt === undefined) return null;
    return squash(prompt) === squash(rec.prompt) ? rec : null;
  }

  /**
   * Is a turn with this candidate and this text (so far) the kept reply? `same`, `new`, or `wait`
   * (too little text yet; `final` says no more will come).
   */
  judge(rec, prompt, text, final) {
    this.consumed = rec.id;
    if (prompt === null || prompt === undefined) return 'same'; // a resume request: the same reply by definition
    const kept = rec.prefix || '';
    const need = Math.min(JUDGE_CHARS, kept.length);
    if (text.length < need && !final) return 'wait';
    const n = Math.min(kept.length, text.length);
    if (n === 0) return kept.length === 0 && text.length === 0 ? 'same' : 'new';
    return kept.slice(0, n) === text.slice(0, n) ? 'same' : 'new';
  }

  /** Keeps `turn` as the turn in progress (called when it starts, while it grows, when it ends). */
  note(turn, { ended = false } = {}) {
    this.write({
      seq: turn.seq || 0,
      sent: turn.sentChars || 0,
      id: turn.id,
      life: this.life,
      at: this.now(),
      prompt: turn.prompt ?? null,
      prefix: String(turn.text || '').slice(0, PREFIX_CHARS),
      ended,
      task_id: turn.taskId || null,
      hub_typed: Boolean(turn.hubTyped),
    });
  }
}
