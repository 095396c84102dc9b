// JSON-patch-ish delta state shared by ChatGPT's "v1" delta encoding and DeepSeek's fragment patches.
//
// An event is `{p?, o?, v}`: `p` a slash path ("/message/content/parts/0" or "response/fragments/-1/content";
// negative indexes count from the end), `o` the op. Omitted `p`/`o` inherit the previous event's, so
// `{"v":"text"}` appends to the last path. `patch`/`BATCH` carry a list of sub-ops whose paths are relative to
// the parent path and whose op defaults to set. What a bare `{"v":…}` continues after a batch is per site
// (`options.batchCursor`): DeepSeek's continues at the batch's own path as a batch (`'self'`: real captures
// send `{"v":[…sub-ops…]}` right after a BATCH, e.g. the CONTENT_FILTER withdrawal at `response`); ChatGPT's is
// assumed to continue the last sub-op (`'last'`, the default). Ops (case-insensitive): add, set/replace,
// append, remove/delete, truncate, patch/batch.

/**
 * Create a patch state. `options.initialOp` is the op used before any event names one (DeepSeek: SET);
 * `options.appendStrings(pathString)` may force string values at some paths to append (DeepSeek's content
 * paths, which most clients always append). `options.batchCursor`: `'last'` (default) or `'self'`, see above.
 */
export function createPatchState(options = {}) {
  const state = {
    root: {},
    cursor: { p: '', o: (options.initialOp || 'set').toLowerCase() },
  };
  const appendStrings = options.appendStrings || (() => false);
  const batchCursorIsSelf = options.batchCursor === 'self';

  function apply(event) {
    if (event === null || typeof event !== 'object' || Array.isArray(event)) return [];
    if (typeof event.p === 'string') state.cursor.p = event.p;
    if (typeof event.o === 'string') state.cursor.o = event.o.toLowerCase();
    const applied = [];
    applyOp(state.cursor.p, state.cursor.o, event.v, applied);
    if (!batchCursorIsSelf && (state.cursor.o === 'patch' || state.cursor.o === 'batch') && applied.length > 0) {
      // a later bare `{"v":…}` continues the last sub-op (its absolute path and op)
      const last = applied[applied.length - 1];
      state.cursor = { p: last.pathString, o: last.op };
    }
    return applied;
  }

  function applyOp(path, op, value, applied) {
    if (op === 'patch' || op === 'batch') {
      if (!Array.isArray(value)) return;
      for (const sub of value) {
        if (sub === null || typeof sub !== 'object') continue;
        const subPath = joinPath(path, typeof sub.p === 'string' ? sub.p : '');
        applyOp(subPath, typeof sub.o === 'string' ? sub.o.toLowerCase() : 'set', sub.v, applied);
      }
      return;
    }
    const segments = splitPath(path);
    let effective = op;
    if (typeof value === 'string' && (op === 'set' || op === 'replace') && appendStrings(path)) effective = 'append';
    const resolved = applyLeaf(segments, effective, value);
    applied.push({ path: resolved, pathString: path, op: effective, value });
  }

  function applyLeaf(segments, op, value) {
    if (segments.length === 0) {
      if (op === 'append' && isObject(state.root) && isObject(value)) Object.assign(state.root, value);
      else if (op !== 'remove' && op !== 'delete') state.root = isObject(value) ? value : { value };
      return [];
    }
    if (!isObject(state.root) && !Array.isArray(state.root)) state.root = {};
    let parent = state.root;
    const resolved = [];
    for (let i = 0; i < segments.length - 1; i += 1) {
      const key = resolveKey(parent, segments[i]);
      resolved.push(key);
      if (parent[key] === null || typeof parent[key] !== 'object') parent[key] = /^\d+$/.test(segments[i + 1]) ? [] : {};
      parent = parent[key];
    }
    const last = segments[segments.length - 1];
    const key = last === '-' && Array.isArray(parent) ? parent.length : resolveKey(parent, last);
    resolved.push(key);
    const current = parent[key];
    switch (op) {
      case 'append':
        if (typeof current === 'string' && typeof value === 'string') parent[key] = current + value;
        else if (Array.isArray(current)) Array.isArray(value) ? current.push(...value) : current.push(value);
        else if (isObject(current) && isObject(value)) Object.assign(current, value);
        else parent[key] = value;
        break;
      case 'remove':
      case 'delete':
        if (Array.isArray(parent)) parent.splice(key, 1);
        else delete parent[key];
        break;
      case 'truncate':
        if ((typeof current === 'string' || Array.isArray(current)) && Number.isInteger(value)) {
          parent[key] = current.slice(0, value);
        }
        break;
      case 'add':
        if (Array.isArray(parent) && key >= parent.length) parent.push(value);
        else parent[key] = value;
        break;
      default:
        parent[key] = value;
    }
    return resolved;
  }

  return {
    apply,
    get root() {
      return state.root;
    },
    set root(value) {
      state.root = value;
    },
    get cursor() {
      return { ...state.cursor };
    },
  };
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function resolveKey(container, segment) {
  if (Array.isArray(container) && /^-?\d+$/.test(segment)) {
    const n = Number(segment);
    return n < 0 ? Math.max(0, container.length + n) : n;
  }
  return segment;
}

const pathCache = new Map();

/** Split a slash path into segments, decoding JSON-pointer escapes (`~1` → `/`, `~0` → `~`). Memoised: a
 * stream repeats a handful of paths thousands of times. Callers must not mutate the result. */
export function splitPath(path) {
  const key = String(path);
  let segments = pathCache.get(key);
  if (!segments) {
    segments = key
      .split('/')
      .filter((s) => s !== '')
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    if (pathCache.size > 512) pathCache.clear();
    pathCache.set(key, segments);
  }
  return segments;
}

function joinPath(parent, child) {
  if (!child) return parent;
  if (!parent) return child;
  return `${parent.replace(/\/$/, '')}/${child.replace(/^\//, '')}`;
}
