// The designer's text edits (src/designer/doc.js), without a browser: each edit changes only
// the lines of the node it touches; connecting keeps the file's own key; deleting a node takes
// it out of its dependents' lists.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFlow, addNode, setField, connect, disconnect, deleteNode, setDeps } from '../src/designer/doc.js';

const SRC = `# top comment
name: demo   # its name
inputs: {topic: {default: "x"}}
nodes:
  # the first node
  - id: a   # first
    prompt: "hi {{ topic }}"
  - id: b
    needs: a
    to: [sim-a, sim-b]
    prompt: |
      multi
      line
  - {id: c, depends_on: [a], prompt: yo}
  - id: d
    needs:
      - a
      - b
    prompt: end   # trailing
`;

/** The lines that differ (a line diff by common prefix and suffix). */
function changed(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  let i = 0; while (i < x.length && i < y.length && x[i] === y[i]) i++;
  let j = 0; while (j < x.length - i && j < y.length - i && x[x.length - 1 - j] === y[y.length - 1 - j]) j++;
  return { removed: x.slice(i, x.length - j), added: y.slice(i, y.length - j), from: i + 1 };
}

test('reads nodes with their lines, deps and the key each file uses', () => {
  const f = readFlow(SRC);
  assert.ok(f.ok);
  assert.deepEqual(f.nodes.map((n) => [n.id, n.deps, n.depsKey, n.start, n.end]), [
    ['a', [], null, 6, 7], ['b', ['a'], 'needs', 8, 13], ['c', ['a'], 'depends_on', 14, 14], ['d', ['a', 'b'], 'needs', 15, 19]]);
  assert.deepEqual(f.inputs, ['topic']);
});

test('setting a field rewrites only that value; other nodes and comments stay', () => {
  const out = setField(SRC, 'a', 'prompt', 'changed');
  assert.deepEqual(changed(SRC, out), { removed: ['    prompt: "hi {{ topic }}"'], added: ['    prompt: changed'], from: 7 });
  const multi = setField(SRC, 'b', 'prompt', 'one\ntwo');
  assert.deepEqual(changed(SRC, multi).added, ['    prompt: |-', '      one', '      two']);
  const added = setField(SRC, 'a', 'on_failure', 'continue');
  assert.deepEqual(changed(SRC, added), { removed: [], added: ['    on_failure: continue'], from: 8 });
  const gone = setField(SRC, 'd', 'prompt', '');
  assert.deepEqual(changed(SRC, gone).removed, ['    prompt: end   # trailing']);
  const flow = setField(SRC, 'c', 'to', 'master');
  const c = changed(SRC, flow);
  assert.equal(c.removed.length, 1); assert.match(c.added[0], /^ {2}- \{id: c, depends_on: \[a\], prompt: yo, to: master\}$/);
  assert.ok(readFlow(flow).ok);
});

test('connect keeps the file key, a single string becomes a list; disconnect undoes it', () => {
  const one = connect(SRC, 'c', 'b');
  assert.deepEqual(changed(SRC, one), { removed: ['    needs: a'], added: ['    needs: [a, c]'], from: 9 });
  assert.equal(disconnect(one, 'c', 'b'), SRC.replace('needs: a', 'needs: [a]'), 'a list stays a list');
  const block = connect(SRC, 'c', 'd');
  assert.deepEqual(changed(SRC, block), { removed: [], added: ['      - c'], from: 19 });
  const fresh = connect(SRC, 'c', 'a');
  assert.deepEqual(changed(SRC, fresh).added, ['    needs: [c]'], 'the key the file uses (needs first)');
  assert.throws(() => connect(SRC, 'a', 'a'));
});

test('delete removes the node and takes it out of its dependents, saying which', () => {
  const { text, dependents } = deleteNode(SRC, 'b');
  assert.deepEqual(dependents, ['d']);
  const f = readFlow(text);
  assert.deepEqual(f.nodes.map((n) => [n.id, n.deps]), [['a', []], ['c', ['a']], ['d', ['a']]]);
  assert.ok(text.includes('  # the first node\n  - id: a   # first\n'));
  assert.ok(text.includes('    prompt: end   # trailing\n'));
  const a = deleteNode(SRC, 'a');
  assert.deepEqual(a.dependents, ['b', 'c', 'd']);
  assert.deepEqual(readFlow(a.text).nodes.map((n) => [n.id, n.deps]), [['b', []], ['c', []], ['d', ['b']]]);
});

test('add appends one node; from nothing too', () => {
  const { text, id } = addNode(SRC, 'command');
  assert.equal(id, 'command');
  assert.deepEqual(changed(SRC, text), { removed: [], added: ['  - id: command', '    command: echo done'], from: 20 });
  let t = 'name: fresh\nnodes: []\n';
  t = addNode(t, 'prompt', 'one').text;
  t = addNode(t, 'prompt', 'two', ['one']).text;
  assert.equal(t, 'name: fresh\nnodes:\n  - id: one\n    to: role:worker\n    prompt: Write about {{ topic }}\n  - id: two\n    depends_on: [one]\n    to: role:worker\n    prompt: Write about {{ topic }}\n');
  assert.equal(setDeps(t, 'two', []), t.replace('    depends_on: [one]\n', ''));
});
