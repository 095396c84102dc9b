// Cumulative-snapshot differ: sites that resend the whole text so far (Qianwen CN, Gemini, legacy ChatGPT,
// legacy ChatGLM) are turned into deltas by emitting only the suffix beyond the previous snapshot.

/**
 * Create a differ. `next(full)` returns the new suffix. A shorter snapshot that is a prefix of the previous
 * one emits nothing and is forgotten (a late or repeated frame). A snapshot that rewrites earlier text emits
 * nothing for the rewritten part (text already streamed to the hub cannot be taken back) but becomes the new
 * base, so growth after it still streams.
 */
export function createSnapshotDiffer() {
  let previous = '';
  return {
    next(full) {
      if (typeof full !== 'string') return '';
      if (full.startsWith(previous)) {
        const suffix = full.slice(previous.length);
        previous = full;
        return suffix;
      }
      if (!previous.startsWith(full)) previous = full;
      return '';
    },
    /** Extend the snapshot by an incremental piece (no diff needed); returns the piece. */
    append(piece) {
      if (typeof piece !== 'string') return '';
      previous += piece;
      return piece;
    },
    /** The latest snapshot. */
    get text() {
      return previous;
    },
  };
}
