// The flow designer's model: the YAML text is the one truth. `readFlow` reads it with the
// `yaml` package's Document API (every node with its byte range and lines); each graph edit
// is a list of splices computed on that document, so the text changes only inside the node it
// touches — every other node's bytes, comments and key order stay as they were.
import { parseDocument, isMap, isSeq, isScalar, stringify, Document } from 'yaml';

/** Node kinds of the palette, each with the fields a new node of that kind starts with. */
export const KINDS = {
  prompt: [['to', 'role:worker'], ['prompt', 'Write about {{ topic }}']],
  workers: [['workers', 2], ['prompt', 'Answer independently: {{ topic }}']],
  for_each: [['for_each', { items: ['a', 'b'] }], ['prompt', 'Work on {{ item }}']],
  judge: [['to', ['role:worker', 'role:worker']], ['aggregate', 'judge'], ['judge', 'role:worker'], ['prompt', 'Propose: {{ topic }}']],
  master: [['to', 'master'], ['prompt', 'Result: $RESULT']],
  command: [['command', 'echo done']],
  mcp: [['mcp', { server: 'SERVER', tool: 'TOOL' }]],
  memory: [['memory', { search: '{{ topic }}' }]],
  agent: [['agent', 'AGENT'], ['task', 'Work on {{ topic }}']],
};

const OPTS = { collectionStyle: 'flow', flowCollectionPadding: false, lineWidth: 0 };
const DEP_KEYS = ['depends_on', 'needs'];

function lineStart(text, off) { return text.lastIndexOf('\n', off - 1) + 1; }
function lineEnd(text, off) {
  if (off > 0 && text[off - 1] === '\n') return off;
  const i = text.indexOf('\n', off);
  return i < 0 ? text.length : i + 1;
}

/** Line number (1-based) of each offset, by a table of line starts. */
function lineIndex(text) {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') starts.push(i + 1);
  return (off) => {
    let lo = 0, hi = starts.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (starts[mid] <= off) lo = mid; else hi = mid - 1; }
    return lo + 1;
  };
}

function kindOf(m) {
  for (const k of ['command', 'mcp', 'memory', 'agent', 'for_each', 'workers']) if (m.has(k)) return k;
  if (m.get('aggregate') === 'judge') return 'judge';
  const to = m.get('to');
  if (to === 'master') return 'master';
  return 'prompt';
}

function listOf(v) {
  if (v === undefined || v === null) return [];
  if (isSeq(v)) return v.items.map((x) => String(isScalar(x) ? x.value : x));
  if (isScalar(v)) return v.value === null || v.value === '' ? [] : [String(v.value)];
  return [];
}

/** Reads the flow: `{ok, error, name, inputs, nodes, seed, doc, text}`. `nodes`: each `{id,
 *  name, deps, depsKey, kind, to, fields, start, end}` (`start`/`end`: its first and last line). */
export function readFlow(text) {
  const doc = parseDocument(text, { uniqueKeys: false, prettyErrors: false });
  if (doc.errors.length) {
    const e = doc.errors[0];
    return { ok: false, error: e.message.split('\n')[0], line: e.linePos ? e.linePos[0].line : null, nodes: [], text };
  }
  const lineOf = lineIndex(text);
  const root = doc.contents;
  const seq = isMap(root) ? root.get('nodes', true) : null;
  const nodes = [];
  if (isSeq(seq)) {
    seq.items.forEach((item, index) => {
      if (!isMap(item) || !item.range) return;
      const depPair = item.items.find((p) => DEP_KEYS.includes(p.key && p.key.value));
      const js = item.toJSON();
      nodes.push({
        id: String(item.get('id') ?? `#${index + 1}`),
        name: item.get('name') ?? null,
        deps: depPair ? listOf(depPair.value) : [],
        depsKey: depPair ? depPair.key.value : null,
        kind: kindOf(item),
        to: js.to === undefined ? [] : [].concat(js.to).map(String),
        fields: js,
        index,
        start: lineOf(item.range[0]),
        end: lineOf(Math.max(item.range[0], item.range[1] - 1)),
      });
    });
  }
  const inputs = isMap(root) && isMap(root.get('inputs', true)) ? root.get('inputs', true).items.map((p) => String(p.key.value)) : [];
  // The manual's seed forms (docs/flows.md): shown, not edited — `aicard flow import` first.
  const seed = isMap(root) && (root.has('flow') || root.has('trigger') || root.has('parallel_outputs')
    || nodes.some((n) => n.fields.input_var !== undefined));
  return { ok: true, name: isMap(root) ? root.get('name') ?? null : null, inputs, nodes, seed, doc, text };
}

/** A value as YAML text for a key at column `col` (block scalars indented under it). */
function valueText(v, col) {
  const s = (typeof v === 'string' ? stringify(v, { lineWidth: 0, blockQuote: 'literal' }) : stringify(v, OPTS)).replace(/\n$/, '');
  return s.split('\n').map((l, i) => (i && l ? ' '.repeat(col + 2) + l : l)).join('\n');
}

function apply(text, splices) {
  let out = text;
  for (const [a, b, ins] of [...splices].sort((x, y) => y[0] - x[0])) out = out.slice(0, a) + ins + out.slice(b);
  return out;
}

function findItem(flow, id) {
  const seq = flow.doc.contents.get('nodes', true);
  const item = seq.items.find((it) => isMap(it) && String(it.get('id')) === id);
  if (!item) throw new Error(`no node \`${id}\``);
  return { seq, item };
}

/** The item rewritten whole (a flow-style map, or a block map whose first key changes), after
 *  `change(item)` edits its AST: the one node's text, the rest untouched. */
function rewriteItem(flow, item, change) {
  const text = flow.text;
  const clone = item.clone();
  change(clone);
  const col = item.range[0] - lineStart(text, item.range[0]);
  let out = new Document(clone).toString({ flowCollectionPadding: false, lineWidth: 0 }).replace(/\n$/, '');
  out = out.split('\n').map((l, i) => (i && l ? ' '.repeat(col) + l : l)).join('\n');
  const end = item.flow ? item.range[1] : lineEnd(text, item.range[1]);
  return [item.range[0], end, item.flow ? out : `${out}\n`];
}

/** Splices that set `key` of a node's map to `value` (remove it when `value` is empty). */
function setSplices(flow, item, key, value) {
  const text = flow.text;
  const empty = value === undefined || value === null || value === '' || (Array.isArray(value) && !value.length);
  const pair = item.items.find((p) => p.key && p.key.value === key);
  const firstKeyAt = item.items.length ? item.items[0].key.range[0] : item.range[0];
  const col = firstKeyAt - lineStart(text, firstKeyAt);
  const onDashLine = pair && lineStart(text, pair.key.range[0]) + col !== pair.key.range[0];
  if (item.flow || onDashLine) return [rewriteItem(flow, item, (m) => (empty ? m.delete(key) : m.set(key, value)))];
  if (!pair) {
    if (empty) return [];
    const at = lineEnd(text, item.range[1]);
    const nl = at > 0 && text[at - 1] !== '\n' ? '\n' : '';
    return [[at, at, `${nl}${' '.repeat(col)}${key}: ${valueText(value, col)}\n`]];
  }
  const v = pair.value;
  if (empty || !v || !v.range) {
    const end = lineEnd(text, v && v.range ? v.range[2] : pair.key.range[2]);
    if (empty) return [[lineStart(text, pair.key.range[0]), end, '']];
    return [[lineStart(text, pair.key.range[0]), end, `${' '.repeat(col)}${key}: ${valueText(value, col)}\n`]];
  }
  const t = valueText(value, col);
  const old = text.slice(v.range[0], v.range[1]);
  if (t.includes('\n') || old.includes('\n')) {
    // A block value: through the end of its last line (a comment after a scalar goes with it).
    return [[v.range[0], lineEnd(text, Math.max(v.range[1] - 1, v.range[0])), `${t}\n`]];
  }
  return [[v.range[0], v.range[1], t]];
}

/** Sets (or removes, when empty) one field of node `id`. */
export function setField(text, id, key, value) {
  const flow = readFlow(text);
  const { item } = findItem(flow, id);
  return apply(text, setSplices(flow, item, key, value));
}

function depKeyOf(flow, item) {
  const own = item.items.find((p) => DEP_KEYS.includes(p.key && p.key.value));
  if (own) return own.key.value;
  const other = flow.nodes.find((n) => n.depsKey);
  return other ? other.depsKey : 'depends_on';
}

/** Splices that make node `item` depend on exactly `deps`: the file's own key (`needs` or
 *  `depends_on`); a block list gains or loses lines, a flow list or a single string is
 *  rewritten (a single string becomes a list when a second joins it). */
function depSplices(flow, item, deps) {
  const text = flow.text;
  const key = depKeyOf(flow, item);
  const pair = item.items.find((p) => p.key && p.key.value === key);
  const v = pair && pair.value;
  if (v && isSeq(v) && !v.flow && v.items.length && !item.flow) {
    const have = listOf(v);
    const splices = [];
    v.items.forEach((x, i) => {
      if (!deps.includes(have[i])) splices.push([lineStart(text, x.range[0]), lineEnd(text, x.range[1]), '']);
    });
    const added = deps.filter((d) => !have.includes(d));
    if (splices.length === v.items.length && !added.length) return setSplices(flow, item, key, null);
    if (added.length) {
      const first = v.items[0].range[0];
      const dash = text.lastIndexOf('-', first);
      const pad = ' '.repeat(dash - lineStart(text, dash));
      const at = lineEnd(text, v.items[v.items.length - 1].range[1]);
      splices.push([at, at, added.map((d) => `${pad}- ${stringify(d, OPTS).trim()}\n`).join('')]);
    }
    return splices;
  }
  const single = v && isScalar(v) && deps.length === 1;
  return setSplices(flow, item, key, single ? deps[0] : deps);
}

/** Node `to` needs node `from` (an edge from → to). */
export function connect(text, from, to) {
  if (from === to) throw new Error('a node cannot need itself');
  const flow = readFlow(text);
  const { item } = findItem(flow, to);
  const node = flow.nodes.find((n) => n.id === to);
  if (node.deps.includes(from)) return text;
  return apply(text, depSplices(flow, item, [...node.deps, from]));
}

/** Node `to` no longer needs `from`. */
export function disconnect(text, from, to) {
  const flow = readFlow(text);
  const { item } = findItem(flow, to);
  const node = flow.nodes.find((n) => n.id === to);
  return apply(text, depSplices(flow, item, node.deps.filter((d) => d !== from)));
}

/** Sets a node's whole list of dependencies. */
export function setDeps(text, id, deps) {
  const flow = readFlow(text);
  const { item } = findItem(flow, id);
  return apply(text, depSplices(flow, item, deps));
}

/** Deletes node `id` and takes it out of its dependents' lists: `{text, dependents}`. */
export function deleteNode(text, id) {
  const flow = readFlow(text);
  const { seq, item } = findItem(flow, id);
  const splices = [];
  if (seq.flow) splices.push(rewriteSeq(flow, seq, (s) => { s.items = s.items.filter((x) => x !== item); }));
  else splices.push([lineStart(text, item.range[0]), lineEnd(text, item.range[1]), '']);
  const dependents = flow.nodes.filter((n) => n.id !== id && n.deps.includes(id));
  if (!seq.flow) {
    for (const n of dependents) splices.push(...depSplices(flow, findItem(flow, n.id).item, n.deps.filter((d) => d !== id)));
  }
  return { text: apply(text, splices), dependents: dependents.map((n) => n.id) };
}

function rewriteSeq(flow, seq, change) {
  const clone = seq.clone();
  change(clone);
  return [seq.range[0], seq.range[1], new Document(clone).toString(OPTS).replace(/\n$/, '')];
}

/** An id not yet used: `kind`, `kind2`, … */
export function freshId(flow, kind) {
  const used = new Set(flow.nodes.map((n) => n.id));
  if (!used.has(kind)) return kind;
  for (let i = 2; ; i++) if (!used.has(`${kind}${i}`)) return `${kind}${i}`;
}

/** Adds a node of `kind` at the end of `nodes:` (needing `deps`): `{text, id}`. */
export function addNode(text, kind, id, deps = []) {
  const flow = readFlow(text);
  if (!flow.ok) throw new Error(flow.error);
  const nid = id || freshId(flow, kind);
  if (flow.nodes.some((n) => n.id === nid)) throw new Error(`id \`${nid}\` is taken`);
  if (!/^[A-Za-z0-9_-]+$/.test(nid)) throw new Error(`id \`${nid}\`: letters, digits, - and _ only`);
  const pairs = [['id', nid]];
  if (deps.length) pairs.push([flow.nodes.find((n) => n.depsKey)?.depsKey || 'depends_on', deps]);
  pairs.push(...(KINDS[kind] || KINDS.prompt));
  const root = flow.doc.contents;
  const seq = isMap(root) ? root.get('nodes', true) : null;
  const block = (col) => pairs.map(([k, v], i) => `${' '.repeat(col)}${i ? '  ' : '- '}${k}: ${valueText(v, col + 2)}`).join('\n');
  if (isSeq(seq) && !seq.flow && seq.items.length) {
    const last = seq.items[seq.items.length - 1];
    const dash = text.lastIndexOf('-', last.range[0]);
    const col = dash - lineStart(text, dash);
    const at = lineEnd(text, last.range[1]);
    const nl = at > 0 && text[at - 1] !== '\n' ? '\n' : '';
    return { text: apply(text, [[at, at, `${nl}${block(col)}\n`]]), id: nid };
  }
  if (isSeq(seq) && seq.flow) {
    const obj = Object.fromEntries(pairs);
    if (!seq.items.length) return { text: apply(text, [[text.lastIndexOf(':', seq.range[0]) + 1, seq.range[1], `\n${block(2)}`]]), id: nid };
    const close = text.lastIndexOf(']', seq.range[1]);
    return { text: apply(text, [[close, close, `, ${stringify(obj, OPTS).trim()}`]]), id: nid };
  }
  const pair = isMap(root) ? root.items.find((p) => p.key && p.key.value === 'nodes') : null;
  if (pair) { // `nodes:` with nothing after it
    const at = lineEnd(text, pair.key.range[2]);
    return { text: apply(text, [[at, at, `${block(2)}\n`]]), id: nid };
  }
  const nl = text && !text.endsWith('\n') ? '\n' : '';
  return { text: `${text}${nl}nodes:\n${block(2)}\n`, id: nid };
}

/** Which node holds a line (a diagnostic's place), or null. */
export function nodeAtLine(flow, line) {
  const n = flow.nodes.find((x) => line >= x.start && line <= x.end);
  return n ? n.id : null;
}

/** Variables a node's prompt may read: inputs, builtins, and its upstream nodes' outputs. */
export function variablesFor(flow, id) {
  const byId = new Map(flow.nodes.map((n) => [n.id, n]));
  const up = new Set();
  const walk = (x) => { for (const d of byId.get(x)?.deps || []) if (!up.has(d)) { up.add(d); walk(d); } };
  walk(id);
  const vars = [...flow.inputs.map((i) => `$${i}`), '$RESULT', '$run_id', '$flow_name'];
  for (const u of up) vars.push(`\${${u}.output}`, `\${${u}.outputs}`);
  for (const n of flow.nodes) if (up.has(n.id) && n.fields.output_var) vars.push(`$${n.fields.output_var}`);
  const fe = byId.get(id)?.fields.for_each;
  if (fe) vars.push(`$${fe.as || 'item'}`);
  return vars;
}
