// The AIcard dashboard: tabs, runs (live DAG, node panel, timeline, pause/resume/stop), the
// flow editor, plan drafts and agents (their sessions, rounds, Stop). Hash routes: #/tabs,
// #/runs, #/runs/ID, #/flows (the designer, designer/; ?open=NAME, ?plan=ID), #/plans, #/plans/ID, #/agents, #/agents/SESSION, #/skills (skills.js).
import { h, s, replace, clear } from './dom.js';
import { t, toggleLang, getLang } from './i18n.js';
import { api, ApiError } from './api.js';
import { badge, legend, tabBadge, tabLegend, pauseIcon } from './states.js';
import { drawDag } from './dag.js';
import * as live from './live.js';
import { designerPage } from './designer/page.js';
import { dt } from './designer/strings.js';
import { skillsPage } from './skills.js';

const app = document.getElementById('app');
const main = h('main', { id: 'main' });
const status = h('span', { class: 'live', id: 'live' });
let streamState = null; // the event stream's readyState, once it has said one

/** The stream's state in the top bar, in the page's language (redrawn when it changes). */
function showStatus() {
  status.title = t('event_stream');
  if (streamState === null) { status.className = 'live'; status.textContent = ''; return; }
  const on = streamState === 1;
  status.className = `live ${on ? 'on' : 'off'}`;
  status.dataset.state = on ? 'on' : 'off';
  status.textContent = on ? `● ${t('live')}` : `○ ${t('reconnecting')}`;
}
let page = null; // { route, onEvent?, dispose? }
let tabsCache = [];

window.__aicard = { live: live.debug, ready: false };

function fmtTime(ms) {
  if (!ms) return t('unknown');
  const d = new Date(ms);
  return d.toLocaleTimeString(getLang() === 'zh' ? 'zh-CN' : 'en-GB', { hour12: false }) + `.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

function fmtMs(ms) {
  if (ms === null || ms === undefined) return t('unknown');
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function safeUrl(u) {
  try {
    const url = new URL(u);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch { return null; }
}

function throttle(fn, ms) {
  let timer = null, again = false;
  const run = async () => {
    again = false;
    try { await fn(); } finally {
      timer = setTimeout(() => { timer = null; if (again) run(); }, ms);
    }
  };
  return () => { if (timer) again = true; else run(); };
}

function errorBox(e) {
  return h('p', { class: 'error', role: 'alert', text: e instanceof Error ? e.message : String(e) });
}

function header() {
  const nav = h('nav', {},
    [['#/tabs', 'tabs'], ['#/runs', 'runs'], ['#/flows', 'flows'], ['#/plans', 'plans'], ['#/agents', 'agents'], ['#/skills', 'skills']].map(([href, key]) =>
      h('a', { href, 'data-nav': key, text: t(key) })));
  return h('header', {},
    h('h1', { text: t('title') }), nav, (showStatus(), status),
    h('button', { class: 'lang', id: 'lang', onclick: () => { toggleLang(); render(); }, text: t('lang') }));
}

// ---------------------------------------------------------------- Tabs

async function tabsPage() {
  const box = h('section', { class: 'tabs-page' }, h('h2', { text: t('tabs') }), tabLegend());
  const table = h('div');
  box.append(table);
  const load = async () => {
    const { tabs: all, quotas = [] } = await api.tabs();
    tabsCache = all;
    const tabs = oneRowPerTab(all);
    // Per-site quotas (?<tabs budget SITE N/hour>! or a role card): use against each.
    const quotaList = quotas.length
      ? h('ul', { class: 'quotas', 'data-quotas': '' }, quotas.map((q) => h('li', { 'data-site': q.site,
        text: `${q.site}: ${q.used}/${q.sends} (${q.quota}, ${t(q.from === 'card' ? 'quota_card' : 'quota_command')})`
          + (q.wait_ms > 0 ? ` — ${t('quota_next')} ${Math.ceil(q.wait_ms / 1000)} s` : '') })))
      : null;
    if (!tabs.length) { replace(table, h('p', { class: 'empty', text: t('no_tabs') }), quotaList); return; }
    const rows = tabs.map((tab) => {
      const role = h('select', { 'aria-label': t('role'), 'data-field': 'role' },
        ['worker', 'foreman', 'master'].map((r) => h('option', { value: r, selected: r === tab.role, text: t(r) })));
      const group = h('input', { value: tab.group || '', 'aria-label': t('group'), size: 8, 'data-field': 'group' });
      const msg = h('span', { class: 'msg' });
      const save = h('button', {
        text: t('save'),
        onclick: async () => {
          try { const r = await api.setRole(tab.id, role.value, group.value); msg.textContent = r.message; } catch (e) { msg.textContent = e.message; }
        },
      });
      const url = safeUrl(tab.url);
      return h('tr', { 'data-tab': tab.id, 'data-identity': tabIdentity(tab) },
        h('td', {}, url ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer', text: tab.site }) : tab.site),
        h('td', { text: tab.label || tab.id }),
        h('td', { 'data-col': 'role', 'data-role': tab.role, text: t(tab.role) }),
        h('td', { text: tab.group || '—' }),
        h('td', { text: tab.node || t('unknown') }),
        h('td', {}, tabBadge(tab.status || tab.state, tab.cooling_ms ? `${Math.ceil(tab.cooling_ms / 1000)} s ${t('left')}` : tab.engine?.parked)),
        h('td', {}, h('span', { class: `badge health-${tab.health}`, text: t(tab.health) })),
        h('td', { class: 'engine' }, engineText(tab.engine)),
        h('td', { class: 'num', text: tab.queue }),
        h('td', { class: 'change' }, role, group, save, msg));
    });
    replace(table, h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, ['site', 'label', 'role', 'group', 'node', 'state', 'health', 'engine', 'queue', 'actions'].map((k) => h('th', { text: t(k) })))),
      h('tbody', {}, rows)), quotaList ? h('h3', { text: t('quotas') }) : null, quotaList);
  };
  await load();
  const refresh = throttle(load, 300);
  // Tabs turn busy, cool down or get parked as tasks run: the journal says when.
  return { el: box, onEvent: (kind) => { if (kind === 'tab' || kind === 'journal') refresh(); } };
}

/** Who a tab is to the person: its label, else its client id. */
function tabIdentity(tab) {
  return tab.label || tab.id;
}

/** One row per tab identity: a tab that went away and came back (a reload, a reconnect) is
 *  one tab, not a live row plus offline ghosts. A connected tab hides the offline rows of its
 *  identity; of offline rows alone, the one seen last stays. Live tabs are never hidden. */
function oneRowPerTab(tabs) {
  const groups = new Map();
  for (const tab of tabs) {
    const k = tabIdentity(tab);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(tab);
  }
  const keep = new Set();
  for (const group of groups.values()) {
    const live = group.filter((x) => (x.status || x.state) !== 'offline');
    if (live.length) live.forEach((x) => keep.add(x));
    else keep.add(group.reduce((a, b) => ((b.last_seen_ms || 0) > (a.last_seen_ms || 0) ? b : a)));
  }
  return tabs.filter((x) => keep.has(x));
}

/** The decision engine's figures for a tab: success, time to first chunk, s/1k, in flight. */
function engineText(e) {
  if (!e) return t('unknown');
  const secs = (v) => (v === null || v === undefined ? t('unknown') : `${v.toFixed(1)} s`);
  return [
    `${t('success')} ${e.outcomes ? `${e.successes}/${e.outcomes} (${Math.round(e.success_p * 100)}%)` : t('unknown')}`,
    `${t('ttft')} ${secs(e.ttft_s)}`,
    `${t('s_per_1k')} ${secs(e.s_per_1k)}`,
    `${t('in_flight')} ${e.in_flight}`,
    ...answersText(e.answers),
  ].join(' · ');
}

/** Which path the tab's answers took (network / page text / empty), and its site's flag. */
function answersText(a) {
  if (!a?.tab) return [];
  const parts = [`${t('answers')} ${a.tab.network}/${a.tab.dom}/${a.tab.empty}`];
  if (a.flag) parts.push(`⚠ ${a.flag}`);
  return parts;
}

// ---------------------------------------------------------------- Runs

const RUN_KINDS = ['flows', 'calls', 'all'];
const RUN_KIND_KEY = 'aicard.runsKind';

/** Which runs the list shows: the hash's `?kind=` (#/runs?kind=calls), else the last choice
 *  (localStorage), else flow runs — API and MCP calls would bury them. */
function runKind() {
  const q = /[?&]kind=(\w+)/.exec(location.hash);
  if (q && RUN_KINDS.includes(q[1])) return q[1];
  try { const k = localStorage.getItem(RUN_KIND_KEY); if (RUN_KINDS.includes(k)) return k; } catch { /* storage unavailable */ }
  return 'flows';
}

async function runsPage() {
  const kind = runKind();
  try { localStorage.setItem(RUN_KIND_KEY, kind); } catch { /* private mode */ }
  const filter = h('div', { class: 'filter', role: 'group', 'aria-label': t('runs_show') }, h('span', { class: 'legend-title', text: `${t('runs_show')}:` }));
  const box = h('section', { class: 'runs-page', 'data-kind': kind }, h('h2', { text: t('runs') }), filter);
  const table = h('div');
  box.append(table);
  const rows = new Map(); // run id → its "Updated" cell
  const drawFilter = (counts) => {
    replace(filter, h('span', { class: 'legend-title', text: `${t('runs_show')}:` }), RUN_KINDS.map((k) => h('a', {
      href: `#/runs?kind=${k}`, class: ['kind', k === kind ? 'active' : ''], 'data-kind': k,
      'aria-current': k === kind ? 'true' : null,
    }, `${t(`kind_${k}`)} `, h('span', { class: 'count', text: counts ? counts[k] : '…' }))));
  };
  drawFilter(null);
  const load = async () => {
    const { runs, counts } = await api.runs(kind);
    drawFilter(counts);
    rows.clear();
    if (!runs.length) { replace(table, h('p', { class: 'empty', text: t(counts && counts.all ? 'no_runs_kind' : 'no_runs') })); return; }
    replace(table, h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, ['run', 'flow', 'state', 'started', 'updated'].map((k) => h('th', { text: t(k) })))),
      h('tbody', {}, runs.map((r) => {
        const updated = h('td', { 'data-col': 'updated', 'data-ms': r.updated_ms, text: fmtTime(r.updated_ms) });
        rows.set(r.run_id, updated);
        return h('tr', { 'data-run': r.run_id },
          h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(r.run_id)}`, text: r.run_id })),
          h('td', { text: r.flow }),
          h('td', {}, badge(r.state)),
          h('td', { text: new Date(r.started_ms).toLocaleString() }),
          updated);
      }))));
  };
  await load();
  const refresh = throttle(load, 500);
  // Every journal event of a listed run moves its "Updated" at once; a run that starts or
  // changes state reloads the list (its badge, the counts).
  const touch = (d) => {
    const cell = rows.get(d.run_id);
    if (!cell || !d.at_ms || d.at_ms <= Number(cell.dataset.ms || 0)) return;
    cell.dataset.ms = String(d.at_ms);
    cell.textContent = fmtTime(d.at_ms);
  };
  return {
    el: box,
    onEvent: (kind2, d) => {
      if (kind2 === 'journal') touch(d);
      if (kind2 === 'run' || (kind2 === 'journal' && /^run_/.test(d.event?.type || ''))) refresh();
    },
  };
}

function timeline(detail) {
  const now = Date.now();
  const start = detail.run.started_ms;
  const nodes = detail.nodes.filter((n) => n.queued_ms);
  const end = Math.max(start + 1, ...nodes.map((n) => n.ended_ms || now), detail.run.updated_ms);
  const W = 720, ROW = 22, LEFT = 150, width = LEFT + W + 20;
  const x = (ms) => LEFT + ((ms - start) / (end - start)) * W;
  const svg = s('svg', { class: 'timeline', width, height: 30 + nodes.length * ROW, viewBox: `0 0 ${width} ${30 + nodes.length * ROW}` },
    s('text', { x: LEFT, y: 14, class: 'axis', text: fmtTime(start) }),
    s('text', { x: LEFT + W, y: 14, class: 'axis', 'text-anchor': 'end', text: fmtTime(end) }),
    s('line', { x1: LEFT, x2: LEFT + W, y1: 20, y2: 20, class: 'axis-line' }));
  nodes.forEach((n, i) => {
    const y = 26 + i * ROW;
    const x1 = x(n.queued_ms), x2 = Math.max(x1 + 2, x(n.ended_ms || now));
    svg.append(s('text', { x: 4, y: y + 13, class: 'label', text: n.id }),
      s('rect', { x: x1, y, width: x2 - x1, height: ROW - 6, rx: 3, class: `bar st-${n.state}` },
        s('title', { text: `${n.id}: ${t(n.state)} ${fmtTime(n.queued_ms)} → ${n.ended_ms ? fmtTime(n.ended_ms) : '…'} (${fmtMs((n.ended_ms || now) - n.queued_ms)})` })));
  });
  return svg;
}

function attemptsTable(item) {
  return h('table', { class: 'grid attempts' },
    h('thead', {}, h('tr', {}, ['attempt', 'chosen_tab', 'outcome', 'started', 'queue_ms', 'first_chunk', 'total', 'error'].map((k) => h('th', { text: t(k) })))),
    h('tbody', {}, item.attempts.map((a) => h('tr', { 'data-attempt': a.attempt },
      h('td', { text: a.attempt }),
      h('td', { text: a.client || t('unknown') }),
      h('td', {}, badge(a.outcome)),
      h('td', { text: fmtTime(a.started_ms) }),
      h('td', { text: fmtMs(a.queue_ms) }),
      h('td', { 'data-col': 'first_chunk', title: a.first_chunk_ms == null ? t('no_chunk') : null, text: fmtMs(a.first_chunk_ms) }),
      h('td', { text: fmtMs(a.total_ms) }),
      h('td', { class: 'err', text: a.error || '' })))));
}

/** The decision engine's score table, laid out to fit the panel (cells wrap; nothing is cut),
 *  with the table as `?<manager why RUN NODE>!` prints it underneath, folded. */
function scoreTable(item) {
  const secs = (v) => (v === null || v === undefined ? t('unknown') : `${v.toFixed(1)} s`);
  const lines = item.why_table.split('\n');
  const pick = lines[lines.length - 1];
  const rows = item.why_rows || [];
  return h('div', { class: 'why-scores' },
    h('h5', { text: t('score_table') }),
    rows.length ? h('table', { class: 'grid why' },
      h('thead', {}, h('tr', {}, ['tab', 'state', 'success', 'ttft', 's_per_1k', 'in_flight', 'expected', 'score'].map((k) => h('th', { text: t(k) })))),
      h('tbody', {}, rows.map((r) => h('tr', { class: r.picked ? 'picked' : null, 'data-tab': r.tab },
        h('td', {}, r.picked ? '▶ ' : '', r.tab),
        h('td', { text: r.state }),
        h('td', { class: 'num', text: `${r.successes}/${r.outcomes} · ${Math.round(r.p * 100)}%` }),
        h('td', { class: 'num', text: secs(r.ttft_s) }),
        h('td', { class: 'num', text: secs(r.s_per_1k) }),
        h('td', { class: 'num', text: r.in_flight }),
        h('td', { class: 'num', text: secs(r.expected_s) }),
        h('td', { class: 'num', text: r.score === null || r.score === undefined ? t('unknown') : r.score.toFixed(1) }))))) : null,
    h('p', { class: 'why-pick', text: pick }),
    h('details', {}, h('summary', { text: t('as_text') }), h('pre', { class: 'why-table', text: item.why_table })));
}

function tabLink(client) {
  const tab = tabsCache.find((x) => x.id === client || x.label === client);
  const url = tab && safeUrl(tab.url);
  return url ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer', class: 'tablink', text: `${t('open_tab')} ↗` }) : null;
}

function itemDetail(item) {
  const last = item.attempts[item.attempts.length - 1];
  return h('div', { class: 'item', 'data-item': item.index },
    h('h4', {}, `${item.label} `, badge(item.state)),
    h('dl', {},
      h('dt', { text: t('chosen_tab') }), h('dd', {}, item.client || t('unknown'), ' ', item.client ? tabLink(item.client) : null),
      h('dt', { text: t('why') }), h('dd', { class: 'why', text: item.why || t('unknown') }),
      h('dt', { text: t('prompt') }), h('dd', {}, last && last.prompt ? h('pre', { class: 'prompt', text: last.prompt }) : t('unknown'))),
    item.why_table ? scoreTable(item) : null,
    h('h5', { text: `${t('attempts')} (${item.attempts.length})` }),
    attemptsTable(item),
    item.output ? [h('h5', { text: t('output') }), h('pre', { class: 'output', text: item.output })] : null,
    item.error ? [h('h5', { text: t('error') }), h('pre', { class: 'error', text: item.error })] : null);
}

async function nodePanel(runId, nodeId, panel, keepOffset) {
  const n = await api.node(runId, nodeId, keepOffset || 0, 100);
  const box = h('div', { class: 'panel-body', 'data-panel-node': nodeId });
  box.append(h('div', { class: 'panel-head' },
    h('h3', {}, `${t('node_panel')} ${n.id} `, badge(n.state)),
    h('button', { class: 'close', text: t('close'), onclick: () => { clear(panel); panel.hidden = true; panel.dataset.node = ''; } })));
  if (n.template) box.append(h('h5', { text: t('template') }), h('pre', { class: 'template', text: n.template }));
  if (n.total <= 50) {
    for (const item of n.items) box.append(itemDetail(item));
  } else {
    const detail = h('div', { class: 'item-detail' });
    const list = h('ol', { class: 'items', start: n.offset + 1 }, n.items.map((it) => h('li', {},
      h('button', {
        class: 'item-row', 'data-item': it.index,
        onclick: async () => {
          panel.dataset.item = String(it.index);
          const one = await api.node(runId, nodeId, it.index, 1);
          replace(detail, itemDetail(one.items[0]));
        },
      }, badge(it.state), ` ${it.label}`, it.client ? ` · ${it.client}` : '', it.attempts.length > 1 ? ` · ${it.attempts.length} ${t('attempts')}` : ''))));
    const pager = h('p', { class: 'pager' }, `${t('items')} ${n.offset + 1}–${n.offset + n.items.length} ${t('of')} ${n.total} `,
      n.offset > 0 ? h('button', { text: '‹', onclick: () => nodePanel(runId, nodeId, panel, Math.max(0, n.offset - 100)) }) : null,
      n.offset + n.items.length < n.total ? h('button', { text: `${t('more')} ›`, onclick: () => nodePanel(runId, nodeId, panel, n.offset + 100) }) : null);
    box.append(pager, list, detail);
    if (panel.dataset.item && panel.dataset.node === nodeId) {
      const one = await api.node(runId, nodeId, Number(panel.dataset.item), 1);
      if (one.items[0]) detail.append(itemDetail(one.items[0]));
    }
  }
  panel.hidden = false;
  panel.dataset.node = nodeId;
  panel.dataset.offset = String(n.offset);
  replace(panel, box);
}

async function runPage(runId) {
  const box = h('section', { class: 'run-page' });
  const head = h('div', { class: 'run-head' });
  const dagBox = h('div', { class: 'dag-box', id: 'dag' });
  const panel = h('aside', { class: 'panel', id: 'panel', hidden: true });
  const tl = h('div', { class: 'timeline-box' });
  const events = h('ol', { class: 'events', id: 'events', reversed: true });
  const seen = new Map(); // journal id → row
  box.append(head, legend(), h('div', { class: 'run-body' }, dagBox, panel),
    h('h3', { text: t('timeline') }), tl, h('h3', { text: t('events') }), events);
  let detail = null;
  let selected = null;

  const eventRow = (ev) => h('li', { 'data-id': ev.id },
    h('span', { class: 'at', text: fmtTime(ev.at_ms) }), ' ',
    h('code', { text: ev.event?.type || '?' }), ' ',
    [ev.event?.node, ev.event?.item !== undefined ? `#${ev.event.item}` : null, ev.event?.attempt ? `attempt ${ev.event.attempt}` : null, ev.event?.client, ev.event?.error]
      .filter((x) => x !== null && x !== undefined && x !== '').join(' · '));
  const addEvent = (ev) => {
    if (seen.has(ev.id)) return;
    seen.set(ev.id, ev);
    events.prepend(eventRow(ev));
    while (events.children.length > 40) events.lastChild.remove();
  };

  const draw = () => {
    const states = Object.fromEntries(detail.nodes.map((n) => [n.id, n]));
    const running = ['running', 'paused'].includes(detail.status);
    replace(head,
      h('h2', {}, `${t('run')} ${detail.run.run_id} `, badge(detail.status)),
      h('p', { class: 'meta' }, `${t('flow')}: ${detail.run.flow} · ${t('started')}: ${new Date(detail.run.started_ms).toLocaleString()} · `,
        h('span', { id: 'journal-len', text: `${detail.journal_len} ${t('journal_len')}` })),
      h('div', { class: 'controls' },
        h('button', { id: 'pause', disabled: detail.status !== 'running', onclick: () => control('pause') }, pauseIcon(), ` ${t('pause')}`),
        h('button', { id: 'resume', disabled: detail.status !== 'paused', onclick: () => control('resume'), text: `▶ ${t('resume')}` }),
        h('button', { id: 'stop', disabled: !running, onclick: () => control('stop'), text: `⊘ ${t('stop')}` })),
      detail.error ? h('p', { class: 'error', text: detail.error }) : null,
      detail.output ? h('details', { class: 'run-output' }, h('summary', { text: t('output_run') }), h('pre', { text: detail.output })) : null);
    replace(dagBox, drawDag(detail.graph, states, (id) => { selected = id; if (panel.dataset.node !== id) panel.dataset.item = ''; nodePanel(runId, id, panel).catch((e) => { panel.hidden = false; replace(panel, errorBox(e)); }); draw(); }, selected));
    replace(tl, timeline(detail));
    box.dataset.status = detail.status;
  };
  const control = async (action) => {
    try { await api.control(runId, action); } catch (e) { head.append(errorBox(e)); }
  };
  const load = async () => {
    detail = await api.run(runId);
    for (const ev of detail.journal) addEvent(ev);
    draw();
    if (panel.dataset.node) await nodePanel(runId, panel.dataset.node, panel, Number(panel.dataset.offset || 0));
  };
  await load();
  live.connect(detail.seq);
  const refresh = throttle(load, 250);
  return {
    el: box,
    onEvent: (kind, d) => {
      if (kind === 'journal' && d.run_id === runId) { addEvent(d); refresh(); }
    },
  };
}

// ---------------------------------------------------------------- Flows

/** Selects line:col in a textarea (a diagnostic's place). */
function jump(editor, line, col) {
  const lines = editor.value.split('\n');
  let at = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i++) at += lines[i].length + 1;
  at += col - 1;
  editor.focus();
  editor.setSelectionRange(at, at + 1);
}

/** Lists diagnostics ({line, col, message}) as buttons that jump to their place. */
function showDiagnostics(diags, list, editor) {
  replace(list, diags.map((d) => h('li', {},
    h('button', { class: 'at', onclick: () => jump(editor, d.line, d.col), text: `${d.line}:${d.col}` }), ' ', d.message)));
}

/** Validates a textarea's YAML as `aicard flow validate FILE` does; shows the diagnostics and
 *  the verdict; returns the answer ({ok, output, diagnostics, graph}). */
async function validateInto(editor, file, diags, verdict) {
  const r = await api.validate(file, editor.value);
  showDiagnostics(r.diagnostics, diags, editor);
  verdict.textContent = r.ok ? `✓ ${t('valid')} — ${r.output.trim()}` : `✗ ${t('invalid')} (${r.diagnostics.length})`;
  verdict.className = `verdict ${r.ok ? 'ok' : 'bad'}`;
  verdict.dataset.output = r.output;
  return r;
}

// ---------------------------------------------------------------- Plan drafts

const PLAN_ICONS = { draft: '✎', approved: '✓', modified: '↺', rejected: '✗' };

function planBadge(state) {
  return h('span', { class: `badge st-${state}`, 'data-state': state }, `${PLAN_ICONS[state] || '?'} ${t(state)}`);
}

async function plansPage() {
  const box = h('section', { class: 'plans-page' }, h('h2', { text: t('plans') }));
  const table = h('div');
  box.append(table);
  const load = async () => {
    const { plans } = await api.plans();
    if (!plans.length) { replace(table, h('p', { class: 'empty', text: t('no_plans') })); return; }
    replace(table, h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, ['plan_one', 'goal', 'state', 'planner', 'created', 'run'].map((k) => h('th', { text: t(k) })))),
      h('tbody', {}, plans.map((p) => h('tr', { 'data-plan': p.id },
        h('td', {}, h('a', { href: `#/plans/${encodeURIComponent(p.id)}`, text: p.id })),
        h('td', { text: p.goal }),
        h('td', {}, planBadge(p.state)),
        h('td', { text: p.planner || t('unknown') }),
        h('td', { text: new Date(p.created_ms).toLocaleString() }),
        h('td', {}, p.run_id ? h('a', { href: `#/runs/${encodeURIComponent(p.run_id)}`, text: p.run_id }) : t('unknown')))))));
  };
  await load();
  // A draft answered elsewhere (a master tab) starts a run: the journal says when.
  const refresh = throttle(load, 500);
  return { el: box, onEvent: (kind, d) => { if (kind === 'journal' && d.event?.type === 'run_started') refresh(); } };
}

async function planPage(id) {
  const box = h('section', { class: 'plan-page', 'data-plan': id });
  const d = await api.plan(id);
  const file = `${id}.yaml`;
  const msg = h('p', { class: 'msg', id: 'plan-msg', role: 'status' });
  const drawing = h('div', { class: 'dag-box', id: 'plan-dag' });
  const inputs = h('form', { class: 'inputs', id: 'plan-inputs', onsubmit: (e) => e.preventDefault() });
  const yamlView = h('pre', { class: 'yaml', id: 'plan-yaml', text: d.yaml });
  const editor = h('textarea', { id: 'plan-editor', spellcheck: 'false', rows: 20, 'aria-label': t('plan_yaml'), hidden: true });
  const diags = h('ul', { class: 'diags', id: 'plan-diags' });
  const verdict = h('p', { class: 'verdict', id: 'plan-verdict' });
  const open = d.state === 'draft';
  const fail = (e) => {
    msg.textContent = e.message;
    msg.className = 'msg error';
    if (e.diagnostics) showDiagnostics(e.diagnostics, diags, editor);
  };
  const draw = (r) => {
    if (!r.ok) return;
    replace(drawing, drawDag(r.graph, null, null));
    const old = Object.fromEntries([...inputs.querySelectorAll('input')].map((i) => [i.name, i.value]));
    replace(inputs, r.graph.inputs.length ? h('h4', { text: t('inputs') }) : null, r.graph.inputs.map((inp) => h('label', {},
      h('span', { text: `${inp.name}${inp.required ? ' *' : ''}` }),
      h('input', { name: inp.name, value: old[inp.name] ?? inp.default ?? '', required: inp.required, placeholder: inp.description || '', disabled: !open }))));
  };
  const answer = async (action, body) => {
    const r = await api.answerPlan(id, action, body);
    if (r.ok === false) { const e = new Error(r.error); e.diagnostics = r.diagnostics; throw e; }
    return r;
  };
  const approve = async () => {
    const values = Object.fromEntries([...inputs.querySelectorAll('input')].map((i) => [i.name, i.value]));
    try {
      await answer('approve', { inputs: values });
      const after = await api.plan(id);
      location.hash = after.run_id ? `#/runs/${encodeURIComponent(after.run_id)}` : `#/plans/${encodeURIComponent(id)}`;
    } catch (e) { fail(e); }
  };
  const reject = async () => {
    try { const r = await answer('reject'); msg.textContent = r.message; await route(); } catch (e) { fail(e); }
  };
  const recheck = throttle(() => validateInto(editor, file, diags, verdict).then(draw).catch(fail), 200);
  editor.addEventListener('input', recheck);
  const saveEdit = async () => {
    try {
      const r = await answer('modify', { yaml: editor.value });
      location.hash = `#/plans/${encodeURIComponent(r.id)}`;
    } catch (e) { fail(e); }
  };
  const editBox = h('div', { class: 'edit', id: 'plan-edit', hidden: true }, editor, verdict, diags,
    h('div', { class: 'actions' },
      h('button', { id: 'plan-save', onclick: saveEdit, text: `✎ ${t('save_draft')}` }),
      h('button', { onclick: () => { editBox.hidden = true; yamlView.hidden = false; editor.value = d.yaml; recheck(); }, text: t('cancel') })));
  const feedback = h('textarea', { id: 'plan-feedback', rows: 2, 'aria-label': t('feedback'), placeholder: t('feedback') });
  const replan = async () => {
    msg.textContent = '…';
    try {
      await answer('modify', { feedback: feedback.value });
      location.hash = '#/plans';
    } catch (e) { fail(e); }
  };
  editor.value = d.yaml;
  box.append(
    h('p', {}, h('a', { href: '#/plans', text: `‹ ${t('all_plans')}` })),
    h('h2', {}, `${t('plan_one')} ${d.id} `, planBadge(d.state)),
    h('p', { class: 'meta' }, `${t('goal')}: ${d.goal} · ${t('planner')}: ${d.planner || t('unknown')} · ${t('nodes')}: ${d.nodes ?? t('unknown')}`,
      d.parent ? [' · ', `${t('parent')}: `, h('a', { href: `#/plans/${encodeURIComponent(d.parent)}`, text: d.parent })] : null,
      d.run_id ? [' · ', `${t('run')}: `, h('a', { href: `#/runs/${encodeURIComponent(d.run_id)}`, text: d.run_id })] : null),
    open ? h('div', { class: 'actions' },
      h('button', { id: 'plan-approve', onclick: approve, text: `▶ ${t('approve')}` }),
      h('button', { id: 'plan-edit-open', onclick: () => { editBox.hidden = false; editor.hidden = false; yamlView.hidden = true; recheck(); }, text: `✎ ${t('edit_yaml')}` }),
      h('button', { id: 'plan-reject', onclick: reject, text: `✗ ${t('reject')}` }),
      h('a', { id: 'plan-designer', href: `#/flows?plan=${encodeURIComponent(id)}`, text: dt('open_designer') }),
      h('span', { class: 'note', text: t('approval_note') })) : null,
    msg,
    h('div', { class: 'plan-body' },
      h('div', { class: 'plan-col' }, h('h4', { text: t('plan_yaml') }), yamlView, editBox,
        open ? [h('h4', { text: t('feedback') }), feedback, h('div', { class: 'actions' }, h('button', { id: 'plan-replan', onclick: replan, text: t('send_feedback') }))] : null),
      h('div', { class: 'plan-col' }, h('h4', { text: t('preview') }), drawing, inputs,
        d.text ? h('details', {}, h('summary', { text: t('plan_text') }), h('pre', { class: 'plan-text', text: d.text })) : null)));
  draw(await validateInto(editor, file, diags, verdict));
  return { el: box };
}

// ---------------------------------------------------------------- Agents
// The agent loop's sessions are not in the journal, so the Agents pages poll (every second,
// only while shown; `dispose` stops it).

const AGENT_POLL_MS = 1000;

function poll(load) {
  let timer = null, gone = false;
  const tick = async () => {
    try { await load(); } catch (e) { console.error(e); }
    if (!gone) timer = setTimeout(tick, AGENT_POLL_MS);
  };
  timer = setTimeout(tick, AGENT_POLL_MS);
  return () => { gone = true; clearTimeout(timer); };
}

function sessionButtons(sess, msg, after) {
  if (sess.state === 'ended') return null;
  const act = (action) => async () => {
    msg.textContent = '…';
    try { const r = await api.agentControl(sess.id, action); msg.textContent = r.message; await after(); } catch (e) { msg.textContent = e.message; }
  };
  return h('span', { class: 'actions' },
    sess.state === 'paused'
      ? h('button', { 'data-action': 'resume', onclick: act('resume'), text: `▶ ${t('resume')}` })
      : h('button', { 'data-action': 'pause', onclick: act('pause') }, pauseIcon(), ` ${t('pause')}`),
    h('button', { 'data-action': 'stop', class: 'danger', onclick: act('stop'), text: `■ ${t('stop')}` }));
}

function roundText(sess) {
  return sess.of ? `${sess.round} ${t('of')} ${sess.of}` : String(sess.round);
}

async function agentsPage() {
  const box = h('section', { class: 'agents-page' }, h('h2', { text: t('agents') }));
  const agentsBox = h('div');
  const sessionsBox = h('div');
  const msg = h('p', { class: 'msg', role: 'status' });
  box.append(agentsBox, h('h3', { text: t('sessions') }), msg, sessionsBox);
  const load = async () => {
    const { agents, sessions } = await api.agents();
    replace(agentsBox, agents.length
      ? h('table', { class: 'grid', id: 'agents' },
        h('thead', {}, h('tr', {}, ['agent', 'target', 'tools', 'creator'].map((k) => h('th', { text: t(k) })))),
        h('tbody', {}, agents.map((a) => h('tr', { 'data-agent': a.name },
          h('td', { text: a.name }), h('td', { text: a.target }),
          h('td', { text: a.tools.join(', ') }), h('td', { text: a.creator })))))
      : h('p', { class: 'empty', text: t('no_agents') }));
    replace(sessionsBox, sessions.length
      ? h('table', { class: 'grid', id: 'agent-sessions' },
        h('thead', {}, h('tr', {}, ['session', 'agent', 'tab', 'state', 'round', 'running_cmd', 'why', 'actions'].map((k) => h('th', { text: t(k) })))),
        h('tbody', {}, sessions.map((x) => h('tr', { 'data-session': x.id, 'data-state': x.state },
          h('td', {}, h('a', { href: `#/agents/${encodeURIComponent(x.id)}`, text: x.id })),
          h('td', { text: x.agent || t('looping_tab') }),
          h('td', { text: x.tab }),
          h('td', {}, badge(x.state)),
          h('td', { text: roundText(x) }),
          h('td', {}, x.running ? h('code', { text: x.running }) : t('unknown')),
          h('td', { class: 'why', text: x.why || t('unknown') }),
          h('td', {}, sessionButtons(x, msg, load))))))
      : h('p', { class: 'empty', text: t('no_sessions') }));
  };
  await load();
  return { el: box, dispose: poll(load) };
}

async function agentSessionPage(id) {
  const box = h('section', { class: 'agent-session' });
  const load = async () => {
    const { session: x, rounds } = await api.agentSession(id);
    const msg = h('p', { class: 'msg', role: 'status' });
    replace(box,
      h('p', {}, h('a', { href: '#/agents', text: `‹ ${t('all_sessions')}` })),
      h('h2', {}, `${t('session')} ${x.id} `, badge(x.state)),
      h('p', { class: 'meta' }, `${t('agent')}: ${x.agent || t('looping_tab')} · ${t('tab')}: ${x.tab} · ${t('round')}: ${roundText(x)}`,
        x.running ? [` · ${t('running_cmd')}: `, h('code', { text: x.running })] : null,
        x.why ? [` · ${t('why')}: `, h('span', { class: 'why', text: x.why })] : null),
      sessionButtons(x, msg, load), msg,
      h('h3', { text: t('rounds') }),
      rounds.length
        ? h('ol', { class: 'rounds' }, rounds.map((r) => h('li', { 'data-round': r.round },
          h('h4', { text: `${t('round')} ${r.round}` }),
          r.commands.map((c) => h('div', { class: `round-cmd ${c.ok ? 'ok' : 'bad'}` },
            h('p', {}, h('span', { class: 'mark', text: c.ok ? '✓' : '✗' }), ' ', h('code', { text: c.command }),
              c.cut ? h('span', { class: 'note', text: ` (${t('output_cut')}: ${c.chars} ${t('chars')})` }) : null),
            h('pre', { class: 'output', text: c.output }))))))
        : h('p', { class: 'empty', text: t('no_rounds') }));
  };
  await load();
  return { el: box, dispose: poll(load) };
}

// ---------------------------------------------------------------- Shell

// Navigations overlap (a hash change while the previous page still loads): only the newest
// may fill the page, or a slow older page would replace it after it was shown.
let routeGen = 0;

async function route() {
  const gen = ++routeGen;
  const hash = location.hash || '#/runs';
  const m = /^#\/runs\/([^?]+)$/.exec(hash);
  const p = /^#\/plans\/(.+)$/.exec(hash);
  const g = /^#\/agents\/(.+)$/.exec(hash);
  const key = m ? 'runs' : p ? 'plans' : g ? 'agents' : (hash.slice(2).split('?')[0] || 'runs');
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.nav === key);
  window.__aicard.ready = false;
  if (page && page.dispose) page.dispose();
  try {
    if (!tabsCache.length) tabsCache = (await api.tabs()).tabs;
    const next = m ? await runPage(decodeURIComponent(m[1]))
      : p ? await planPage(decodeURIComponent(p[1]))
      : g ? await agentSessionPage(decodeURIComponent(g[1]))
      : key === 'agents' ? await agentsPage()
      : key === 'skills' ? await skillsPage()
      : key === 'plans' ? await plansPage()
      : key === 'tabs' ? await tabsPage()
        : key === 'flows' ? await designerPage(Object.fromEntries(new URLSearchParams(hash.split('?')[1] || '')))
          : await runsPage();
    if (gen !== routeGen) { if (next.dispose) next.dispose(); return; } // a newer navigation owns the page
    page = next;
    replace(main, page.el);
  } catch (e) {
    if (gen !== routeGen) return;
    page = null;
    replace(main, e instanceof ApiError && e.status === 401 ? h('p', { class: 'login', text: t('login_needed') }) : errorBox(e));
  }
  live.connect();
  window.__aicard.ready = true;
  document.dispatchEvent(new Event('aicard:ready'));
}

function render() {
  replace(app, header(), main);
  document.title = t('title');
  route();
}

live.subscribe((kind, data) => {
  if (kind === 'status') { streamState = data; showStatus(); }
  if (kind === 'tab') api.tabs().then((r) => { tabsCache = r.tabs; }).catch(() => {});
  if (page && page.onEvent) page.onEvent(kind, data);
});

window.addEventListener('hashchange', route);

(async () => {
  try {
    await api.session();
  } catch (e) {
    replace(app, header(), h('main', {}, e instanceof ApiError && e.status === 401 ? h('p', { class: 'login', text: t('login_needed') }) : errorBox(e)));
    window.__aicard.ready = true;
    return;
  }
  render();
})();
