// The flows page: the flow designer (docs/dashboard.md, "Flow designer"). The graph and the
// YAML side by side, the YAML text the one truth: a graph edit is a splice of the text that
// touches only its node (./doc.js), then both views redraw; a typed edit redraws the graph.
// The hub validates (as `aicard flow validate`) and saves (PUT /api/flows/NAME, refused when
// the file changed on disk since it was opened).
import { parse as parseYaml, stringify } from 'yaml';
import { h, replace } from '../dom.js';
import { t } from '../i18n.js';
import { api } from '../api.js';
import { readFlow, addNode, setField, setDeps, connect, deleteNode, nodeAtLine, variablesFor, KINDS } from './doc.js';
import { drawGraph } from './graph.js';
import { dt, BUTTONS } from './strings.js';

export const SAMPLE = `name: my-flow
description: two reviews, one synthesis
inputs: {topic: {default: "the dashboard"}}
nodes:
  - id: review
    to: [role:worker, role:worker]
    prompt: "Review {{ topic }}"
  - id: synth
    depends_on: review
    prompt: "Merge: {{ nodes.review.output }}"
`;
const BLANK = 'name: my-flow\ndescription: drawn in the designer\ninputs: {topic: {default: "the dashboard"}}\nnodes: []\n';
const TYPE_MS = 60; // a typed edit reaches the graph after this quiet time
const CHECK_MS = 200; // …and the hub's validator after this

function list(v) { return v.split(',').map((x) => x.trim()).filter(Boolean); }

/** The designer page. `query`: the hash's parameters (`open=NAME`, `plan=ID`). */
export async function designerPage(query) {
  const { flows } = await api.flows();
  const st = {
    text: SAMPLE, flow: null, file: '', base: null, saved: null, selected: null, connectFrom: null,
    moved: new Map(), problems: new Map(), undo: [], redo: [], typing: 0, graph: null, plan: null, planText: null,
  };
  const box = h('section', { class: 'flows-page designer' });
  const pick = h('select', { id: 'flow-pick', 'aria-label': `${dt('open')} / ${t('flow')}` },
    h('option', { value: '', text: dt('tpl_sample') }), h('option', { value: '@blank', text: dt('tpl_blank') }),
    flows.map((f) => h('option', { value: f, text: f })));
  const fileInput = h('input', { id: 'flow-file', 'aria-label': dt('file'), placeholder: dt('file'), size: 18 });
  const kind = h('select', { id: 'node-kind', 'aria-label': dt('kind') }, Object.keys(KINDS).map((k) => h('option', { value: k, text: k })));
  const newId = h('input', { id: 'node-id', 'aria-label': dt('new_id'), placeholder: dt('new_id'), size: 12 });
  const btn = (key, onclick) => h('button', { type: 'button', 'data-act': key, onclick, text: BUTTONS[key] });
  const addB = btn('add', () => act(doAdd));
  const connB = btn('connect', () => act(startConnect));
  const delB = btn('delete', () => act(doDelete));
  const undoB = btn('undo', () => undo());
  const redoB = btn('redo', () => redo());
  const saveB = btn('save', () => save());
  const msg = h('p', { class: 'msg', id: 'designer-msg', role: 'status', 'aria-live': 'polite' });
  const banner = h('div', { class: 'banner', id: 'designer-banner' });
  const graphBox = h('div', { class: 'dag-box graph-box', id: 'preview', role: 'region', 'aria-label': dt('graph') });
  const gutter = h('pre', { class: 'gutter', 'aria-hidden': 'true' });
  const editor = h('textarea', { id: 'editor', spellcheck: 'false', rows: 26, cols: 64, 'aria-label': `${dt('yaml')} — ${t('editor')}`, wrap: 'off' });
  const verdict = h('p', { class: 'verdict', id: 'verdict' });
  const diags = h('ul', { class: 'diags', id: 'diags' });
  const form = h('form', { class: 'node-form', id: 'node-form', 'aria-label': t('node'), onsubmit: (e) => e.preventDefault() });
  const inputs = h('form', { class: 'inputs', id: 'inputs', onsubmit: (e) => e.preventDefault() });
  const runMsg = h('p', { class: 'msg', id: 'run-msg' });
  const conflict = h('div', { class: 'conflict', id: 'conflict', hidden: true });

  const say = (text, bad = false) => { msg.textContent = text; msg.className = `msg${bad ? ' error' : ''}`; };
  const readOnly = () => Boolean(st.flow && st.flow.seed);

  // ---- the two views, drawn from the text
  const drawLines = () => {
    const bad = new Set([...diags.querySelectorAll('[data-line]')].map((b) => Number(b.dataset.line)));
    const n = st.text.split('\n').length;
    gutter.textContent = Array.from({ length: n }, (_, i) => `${bad.has(i + 1) ? '⚠' : ' '}${String(i + 1).padStart(3)}`).join('\n');
    gutter.scrollTop = editor.scrollTop;
  };
  const redraw = () => {
    const flow = st.flow && st.flow.text === st.text ? st.flow : readFlow(st.text);
    if (!flow.ok) {
      replace(graphBox, h('p', { class: 'empty stale', id: 'preview-stale', text: `${dt('yaml_error')}: ${flow.error}` }));
      st.flow = null;
      drawLines();
      return;
    }
    st.flow = flow;
    if (st.selected && !flow.nodes.some((n) => n.id === st.selected)) st.selected = null;
    // A redraw keeps the keyboard where it was: on the same node.
    const had = graphBox.contains(document.activeElement) ? document.activeElement.dataset.node : null;
    const top = graphBox.scrollTop, left = graphBox.scrollLeft;
    replace(graphBox, drawGraph(flow, {
      moved: st.moved, problems: st.problems, selected: st.selected, connectFrom: st.connectFrom,
      on: { select: pickNode, connect: (a, b) => act(() => doConnect(a, b)), move: () => {}, key: nodeKey },
    }));
    graphBox.scrollTop = top; graphBox.scrollLeft = left;
    if (had) focusNode(had);
    drawLines();
    const ro = readOnly();
    editor.readOnly = ro;
    for (const b of [addB, connB, delB, saveB]) b.disabled = ro;
    banner.hidden = !ro && !st.plan;
    if (ro) {
      const name = st.file || 'FILE';
      replace(banner, h('p', {}, dt('seed'), ' ', h('code', { text: `aicard flow import flows/${name}.yaml -o flows/${name}-native.yaml` })));
    }
  };
  const setText = (text, { from = 'graph', keepForm = false } = {}) => {
    if (text === st.text) return;
    if (from === 'typing') {
      const now = Date.now();
      if (now - st.typing > 800) st.undo.push(st.text);
      st.typing = now;
    } else { st.undo.push(st.text); st.typing = 0; }
    st.redo = [];
    st.text = text;
    if (from !== 'typing') {
      const top = editor.scrollTop;
      editor.value = text;
      editor.scrollTop = top;
    }
    redraw();
    if (!keepForm) drawForm();
    buttons();
    recheck();
  };
  const buttons = () => {
    undoB.disabled = !st.undo.length;
    redoB.disabled = !st.redo.length;
    const dirty = st.saved !== null && st.text !== st.saved;
    box.dataset.dirty = dirty ? 'true' : 'false';
  };
  const jumpTo = (line, col) => {
    const lines = st.text.split('\n');
    let at = 0;
    for (let i = 0; i < line - 1 && i < lines.length; i++) at += lines[i].length + 1;
    at += Math.max(0, col - 1);
    editor.focus();
    editor.setSelectionRange(at, at + 1);
  };

  // ---- validation by the hub: problems on their node and at their line
  const check = async () => {
    const text = st.text;
    const r = await api.validate(st.file ? `${st.file}.yaml` : 'flow.yaml', text);
    if (text !== st.text) return; // a newer edit is on its way
    st.graph = r.ok ? r.graph : null;
    st.problems = new Map();
    const flow = st.flow;
    for (const d of r.diagnostics) {
      const id = flow ? nodeAtLine(flow, d.line) : null;
      if (id) { if (!st.problems.has(id)) st.problems.set(id, []); st.problems.get(id).push(`${d.line}:${d.col} ${d.message}`); }
    }
    replace(diags, r.diagnostics.map((d) => h('li', {},
      h('button', { type: 'button', class: 'at', 'data-line': d.line, onclick: () => jumpTo(d.line, d.col), text: `${d.line}:${d.col}` }), ' ',
      flow && nodeAtLine(flow, d.line) ? h('strong', { text: `${nodeAtLine(flow, d.line)}: ` }) : null, d.message)));
    verdict.textContent = r.ok ? `✓ ${t('valid')} — ${r.output.trim()}` : `✗ ${t('invalid')} (${r.diagnostics.length})`;
    verdict.className = `verdict ${r.ok ? 'ok' : 'bad'}`;
    verdict.dataset.output = r.output;
    redraw();
    drawInputs();
  };
  let checkTimer = null;
  const recheck = () => { clearTimeout(checkTimer); checkTimer = setTimeout(() => check().catch((e) => say(e.message, true)), CHECK_MS); };

  // ---- graph edits (each one an undo step)
  const act = (fn) => {
    if (readOnly()) return;
    try { fn(); } catch (e) { say(`✗ ${e.message}`, true); }
  };
  const doAdd = () => {
    const r = addNode(st.text, kind.value, newId.value.trim() || null);
    newId.value = '';
    st.selected = r.id;
    setText(r.text);
    say(`${dt('added')}: ${r.id}`);
    focusNode(r.id);
  };
  const startConnect = () => {
    if (!st.selected) { say(dt('nothing_selected'), true); return; }
    st.connectFrom = st.selected;
    say(`${dt('connect_pick')} ${st.connectFrom} ${dt('connect_hint')}`);
    redraw();
    focusNode(st.connectFrom);
  };
  const doConnect = (from, to) => {
    st.connectFrom = null;
    setText(connect(st.text, from, to));
    say(`${dt('connected')}: ${from} → ${to}`);
    focusNode(to);
  };
  const doDelete = () => {
    if (!st.selected) { say(dt('nothing_selected'), true); return; }
    const id = st.selected;
    const r = deleteNode(st.text, id);
    st.selected = null;
    st.moved.delete(id);
    setText(r.text);
    say(`${dt('deleted')}: ${id}${r.dependents.length ? ` — ${dt('from_dependents')}: ${r.dependents.join(', ')}` : ''}`);
    const first = graphBox.querySelector('[role="group"]');
    if (first) first.focus(); else addB.focus();
  };
  const focusNode = (id) => {
    const el = [...graphBox.querySelectorAll('[data-node]')].find((x) => x.dataset.node === id);
    if (el) el.focus();
  };
  const pickNode = (id) => {
    if (st.connectFrom && st.connectFrom !== id) { act(() => doConnect(st.connectFrom, id)); return; }
    st.selected = id;
    redraw();
    drawForm();
    focusNode(id);
  };
  const nodeKey = (e, id, p) => {
    const step = e.shiftKey ? 40 : 10;
    const d = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] }[e.key];
    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pickNode(id); } else if (e.key === 'Escape' && st.connectFrom) {
      st.connectFrom = null; say(''); redraw(); focusNode(id);
    } else if ((e.key === 'Delete' || e.key === 'Backspace') && !readOnly()) {
      e.preventDefault(); st.selected = id; act(doDelete);
    } else if ((e.key === 'c' || e.key === 'C') && !e.ctrlKey && !e.metaKey && !readOnly()) {
      e.preventDefault(); st.selected = id; act(startConnect);
    } else if (d) {
      e.preventDefault();
      const cur = st.moved.get(id) || p;
      st.moved.set(id, { x: Math.max(0, cur.x + d[0]), y: Math.max(0, cur.y + d[1]) });
      redraw();
      focusNode(id);
    }
  };

  // ---- the selected node's form
  const drawForm = () => {
    const n = st.flow && st.selected ? st.flow.nodes.find((x) => x.id === st.selected) : null;
    if (!n) { replace(form, h('p', { class: 'empty', text: dt('selected_none') })); return; }
    const f = n.fields;
    const id = n.id;
    const ro = readOnly();
    const edit = (apply) => { if (!ro) { try { setText(apply(st.text), { keepForm: true }); } catch (e) { say(`✗ ${e.message}`, true); } } };
    const yamlText = (v) => (v === undefined ? '' : typeof v === 'string' ? v : stringify(v, { collectionStyle: 'flow', flowCollectionPadding: false }).trim());
    const timers = {};
    const later = (key, fn) => { clearTimeout(timers[key]); timers[key] = setTimeout(fn, 120); };
    const field = (key, label, el, toValue) => {
      el.setAttribute('aria-label', label);
      el.readOnly = ro;
      el.addEventListener('input', () => later(key, () => edit((text) => setField(text, id, key, toValue(el.value)))));
      return h('label', { class: `f-${key}` }, h('span', { text: label }), el);
    };
    const prompt = h('textarea', { rows: 4, value: f.prompt ?? '', spellcheck: 'false' });
    const vars = h('ul', { class: 'vars', 'aria-label': dt('variables') });
    const showVars = () => {
      const before = prompt.value.slice(0, prompt.selectionStart);
      const m = /\$\{?[\w.-]*$/.exec(before);
      const all = variablesFor(st.flow, id);
      const shown = m ? all.filter((v) => v.replace('{', '').startsWith(m[0].replace('{', ''))) : all;
      replace(vars, shown.map((v) => h('li', {}, h('button', {
        type: 'button', class: 'var', text: v,
        onclick: () => {
          const at = prompt.selectionStart;
          const from = m ? at - m[0].length : at;
          prompt.setRangeText(v, from, at, 'end');
          prompt.dispatchEvent(new Event('input'));
          prompt.focus();
        },
      }))));
    };
    prompt.addEventListener('input', showVars);
    prompt.addEventListener('click', showVars);
    prompt.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowDown' && e.altKey) { e.preventDefault(); vars.querySelector('button')?.focus(); }
    });
    const onFailure = h('select', {}, ['', 'fail', 'continue'].map((v) => h('option', { value: v, selected: (f.on_failure ?? '') === v, text: v || '—' })));
    onFailure.addEventListener('change', () => edit((text) => setField(text, id, 'on_failure', onFailure.value || null)));
    const parseOr = (v) => { if (!v.trim()) return null; try { return parseYaml(v); } catch { return v; } };
    const toValue = (v) => { const l = list(v); return l.length > 1 ? l : l[0] || null; };
    replace(form,
      h('h3', { text: `${t('node')}: ${id}` }),
      h('label', { class: 'f-id' }, h('span', { text: dt('f_id') }), h('input', { value: id, readonly: true, 'aria-label': dt('f_id') })),
      field('name', dt('f_name'), h('input', { value: f.name ?? '' }), (v) => v || null),
      field('to', dt('f_to'), h('input', { value: [].concat(f.to ?? []).join(', ') }), toValue),
      field('prompt', dt('f_prompt'), prompt, (v) => v || null),
      h('div', { class: 'vars-box' }, h('span', { class: 'legend-title', text: `${dt('variables')} (Alt+↓):` }), vars),
      (() => {
        const el = h('input', { value: n.deps.join(', ') });
        el.setAttribute('aria-label', dt('f_needs'));
        el.readOnly = ro;
        el.addEventListener('input', () => later('needs', () => edit((text) => setDeps(text, id, list(el.value)))));
        return h('label', { class: 'f-needs' }, h('span', { text: dt('f_needs') }), el);
      })(),
      field('retry', dt('f_retry'), h('input', { value: yamlText(f.retry) }), parseOr),
      field('timeout', dt('f_timeout'), h('input', { value: yamlText(f.timeout) }), parseOr),
      h('label', { class: 'f-on_failure' }, h('span', { text: dt('f_on_failure') }), (onFailure.setAttribute('aria-label', dt('f_on_failure')), onFailure)),
      field('files', dt('f_files'), h('input', { value: [].concat(f.files ?? []).join(', ') }), (v) => (list(v).length ? list(v) : null)));
    showVars();
  };

  // ---- inputs and Run
  const drawInputs = () => {
    const old = Object.fromEntries([...inputs.querySelectorAll('input')].map((i) => [i.name, i.value]));
    const g = st.graph;
    const run = h('button', { id: 'run-flow', type: 'button', onclick: start, disabled: !g, title: g ? null : t('fix_first'), text: BUTTONS.run });
    replace(inputs, g && g.inputs.length ? h('h4', { text: t('inputs') }) : null, (g ? g.inputs : []).map((inp) => h('label', {},
      h('span', { text: `${inp.name}${inp.required ? ' *' : ''}` }),
      h('input', { name: inp.name, value: old[inp.name] ?? inp.default ?? '', required: inp.required, placeholder: inp.description || '' }))),
    st.plan ? h('button', { id: 'plan-approve', type: 'button', onclick: approve, disabled: !g, text: dt('approve') }) : run);
  };
  const values = () => Object.fromEntries([...inputs.querySelectorAll('input')].map((i) => [i.name, i.value]));
  const start = async () => {
    if (!st.graph) { await check(); return; }
    try {
      const r = await api.start(st.graph.name, values(), st.text);
      if (!r.run_id) { runMsg.textContent = `✗ ${r.error || t('invalid')}`; await check(); return; }
      location.hash = `#/runs/${encodeURIComponent(r.run_id)}`;
    } catch (e) { runMsg.textContent = e.message; }
  };
  const approve = async () => {
    try {
      let id = st.plan;
      if (st.text !== st.planText) {
        const m = await api.answerPlan(id, 'modify', { yaml: st.text });
        if (m.ok === false) throw new Error(m.error);
        id = m.id;
      }
      const r = await api.answerPlan(id, 'approve', { inputs: values() });
      if (r.ok === false) throw new Error(r.error);
      const after = await api.plan(id);
      location.hash = after.run_id ? `#/runs/${encodeURIComponent(after.run_id)}` : `#/plans/${encodeURIComponent(id)}`;
    } catch (e) { runMsg.textContent = e.message; }
  };

  // ---- save: validated by the hub, refused when the file changed on disk
  const save = async (base = st.base) => {
    const name = fileInput.value.trim() || (st.flow && st.flow.name) || '';
    if (!name) { say(dt('file'), true); fileInput.focus(); return; }
    const text = st.text;
    const r = await api.saveFlow(name, text, base);
    if (r.status === 200) {
      st.file = name; st.base = r.body.hash; st.saved = text; fileInput.value = name;
      conflict.hidden = true;
      say(`✓ ${dt('saved')}: flows/${r.body.file}`);
      buttons();
      return;
    }
    if (r.status === 409) {
      const disk = r.body.disk;
      replace(conflict, h('p', { role: 'alert', text: `${dt('conflict')} ${r.body.error}` }),
        h('div', { class: 'both' },
          h('div', {}, h('h4', { text: dt('mine') }), h('pre', { class: 'mine', text: text })),
          h('div', {}, h('h4', { text: dt('disk') }), h('pre', { class: 'disk', text: disk ?? '—' }))),
        h('div', { class: 'actions' },
          h('button', { type: 'button', onclick: () => save(r.body.disk_hash), text: dt('keep_mine') }),
          disk !== null ? h('button', {
            type: 'button', text: dt('take_disk'),
            onclick: () => { st.base = r.body.disk_hash; st.saved = disk; conflict.hidden = true; setText(disk); },
          }) : null));
      conflict.hidden = false;
      say(`✗ ${dt('not_saved')}: ${r.body.error}`, true);
      return;
    }
    say(`✗ ${dt('not_saved')}: ${r.body.error || r.status}`, true);
    if (r.body.diagnostics) await check();
  };

  // ---- undo / redo, and the keys of the whole designer
  const undo = () => {
    if (!st.undo.length) return;
    st.redo.push(st.text);
    const text = st.undo.pop();
    const redo = st.redo;
    st.text = text; editor.value = text; st.typing = 0;
    st.redo = redo;
    redraw(); drawForm(); buttons(); recheck();
  };
  const redo = () => {
    if (!st.redo.length) return;
    st.undo.push(st.text);
    const text = st.redo.pop();
    st.text = text; editor.value = text; st.typing = 0;
    redraw(); drawForm(); buttons(); recheck();
  };
  // On the document: an undo that removes the focused node leaves the focus on the body.
  const onKey = (e) => {
    if (!(e.ctrlKey || e.metaKey)) return;
    const k = e.key.toLowerCase();
    if (k === 'z' && !e.shiftKey) { e.preventDefault(); undo(); } else if ((k === 'z' && e.shiftKey) || k === 'y') { e.preventDefault(); redo(); } else if (k === 's') { e.preventDefault(); save(); }
  };
  document.addEventListener('keydown', onKey);

  // ---- typing in the YAML
  let typeTimer = null;
  editor.addEventListener('input', () => {
    clearTimeout(typeTimer);
    typeTimer = setTimeout(() => setText(editor.value, { from: 'typing' }), TYPE_MS);
  });
  editor.addEventListener('scroll', () => { gutter.scrollTop = editor.scrollTop; });

  // ---- opening: a template, a file, a plan draft
  const load = async (text, { file = '', base = null, plan = null } = {}) => {
    st.file = file; st.base = base; st.saved = file ? text : null; st.plan = plan; st.planText = plan ? text : null;
    st.undo = []; st.redo = []; st.selected = null; st.moved = new Map(); st.problems = new Map();
    st.text = text; editor.value = text; fileInput.value = file;
    conflict.hidden = true;
    replace(banner, plan ? h('p', {}, `${dt('plan_from')}: `, h('a', { href: `#/plans/${encodeURIComponent(plan)}`, text: plan })) : null);
    redraw(); drawForm(); buttons();
    await check();
  };
  pick.addEventListener('change', async () => {
    const v = pick.value;
    if (!v) await load(SAMPLE);
    else if (v === '@blank') await load(BLANK);
    else {
      try {
        const f = await api.flowFile(v);
        await load(f.source, { file: v, base: f.hash });
      } catch {
        const f = await api.flow(v); // a flow saved on the hub, not a file: saved as a new file
        await load(f.source);
      }
    }
  });

  box.append(
    h('h2', { text: dt('designer') }),
    h('div', { class: 'flow-tools', role: 'toolbar', 'aria-label': dt('designer') }, pick, fileInput, kind, newId, addB, connB, delB, undoB, redoB, saveB),
    h('p', { class: 'note', text: dt('keys') }),
    banner, msg, conflict,
    h('div', { class: 'designer-body' },
      h('div', { class: 'graph-col' }, h('h4', { text: dt('graph') }), graphBox, form),
      h('div', { class: 'yaml-col' }, h('h4', { text: dt('yaml') }), h('div', { class: 'yaml-edit' }, gutter, editor), verdict, diags, inputs, runMsg)));

  if (query.plan) {
    const d = await api.plan(query.plan);
    await load(d.yaml, { plan: d.state === 'draft' ? d.id : null });
  } else if (query.open && flows.includes(query.open)) {
    pick.value = query.open;
    const f = await api.flowFile(query.open);
    await load(f.source, { file: query.open, base: f.hash });
  } else await load(SAMPLE);
  window.__aicard.designer = { text: () => st.text };
  return { el: box, dispose: () => document.removeEventListener('keydown', onKey) };
}
