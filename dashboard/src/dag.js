// A small layered layout of the flow's DAG (no library): layer = longest path from a root,
// order within a layer by the mean position of the parents, straight-ish cubic edges.
import { s } from './dom.js';
import { icon, fanoutText } from './states.js';
import { t } from './i18n.js';

const W = 200, H = 58, GAP_X = 40, GAP_Y = 56, PAD = 16;

export function layout(nodes) {
  const byId = new Map(nodes.map((n, i) => [n.id, i]));
  const level = new Array(nodes.length).fill(-1);
  const visiting = new Set();
  const depth = (i) => {
    if (level[i] >= 0) return level[i];
    if (visiting.has(i)) return 0; // a cycle (only in invalid flows): stop
    visiting.add(i);
    let d = 0;
    for (const dep of nodes[i].depends_on || []) {
      const j = byId.get(dep);
      if (j !== undefined) d = Math.max(d, depth(j) + 1);
    }
    visiting.delete(i);
    level[i] = d;
    return d;
  };
  nodes.forEach((_, i) => depth(i));
  const layers = [];
  nodes.forEach((n, i) => { (layers[level[i]] ||= []).push(i); });
  const pos = new Array(nodes.length);
  layers.forEach((layer, li) => {
    if (li > 0) {
      const key = (i) => {
        const ps = (nodes[i].depends_on || []).map((d) => byId.get(d)).filter((j) => j !== undefined && pos[j]);
        return ps.length ? ps.reduce((a, j) => a + pos[j].order, 0) / ps.length : 0;
      };
      layer.sort((a, b) => key(a) - key(b));
    }
    layer.forEach((i, k) => { pos[i] = { layer: li, order: k }; });
  });
  const widest = Math.max(1, ...layers.map((l) => l.length));
  const boxes = nodes.map((n, i) => {
    const layer = layers[pos[i].layer];
    const offset = ((widest - layer.length) * (W + GAP_X)) / 2;
    return { x: PAD + offset + pos[i].order * (W + GAP_X), y: PAD + pos[i].layer * (H + GAP_Y) };
  });
  const edges = [];
  nodes.forEach((n, i) => {
    for (const dep of n.depends_on || []) {
      const j = byId.get(dep);
      if (j !== undefined) edges.push([j, i]);
    }
  });
  return {
    boxes, edges,
    width: PAD * 2 + widest * W + (widest - 1) * GAP_X,
    height: PAD * 2 + layers.length * H + Math.max(0, layers.length - 1) * GAP_Y,
  };
}

function clipText(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * Draws the graph. `graph.nodes`: [{id, name, depends_on, kind, fanout}]; `states`: id →
 * {state, total, counts} (a run) or nothing (a preview); `onSelect(id)` on click.
 */
export function drawDag(graph, states, onSelect, selected) {
  const nodes = graph.nodes || [];
  const L = layout(nodes);
  const svg = s('svg', {
    class: 'dag', width: L.width, height: L.height, viewBox: `0 0 ${L.width} ${L.height}`,
    role: 'img', 'aria-label': graph.name || 'flow',
  });
  svg.append(s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    s('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }))));
  const g = s('g', { class: 'edges' });
  for (const [a, b] of L.edges) {
    const p = L.boxes[a], q = L.boxes[b];
    const x1 = p.x + W / 2, y1 = p.y + H, x2 = q.x + W / 2, y2 = q.y;
    const my = (y1 + y2) / 2;
    g.append(s('path', { d: `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2 - 2}`, class: 'edge', 'marker-end': 'url(#arrow)' }));
  }
  svg.append(g);
  nodes.forEach((n, i) => {
    const b = L.boxes[i];
    const st = states ? states[n.id] : null;
    const state = st ? st.state : 'pending';
    const many = st && st.total > 1;
    const drawnPause = st && !many && state === 'paused';
    const line2 = st
      ? (many ? fanoutText(st) : drawnPause ? t(state) : `${icon(state)} ${t(state)}`)
      : (n.kind === 'command' ? '⌘ command' : (n.to && n.to.length ? `→ ${n.to.join(', ')}` : '→ role:worker'));
    const node = s('g', {
      class: ['node', st ? `st-${state}` : 'st-preview', many ? 'fanout' : '', selected === n.id ? 'selected' : ''],
      transform: `translate(${b.x},${b.y})`, tabindex: 0, role: 'button',
      'data-node': n.id, 'data-state': state,
      onclick: () => onSelect && onSelect(n.id),
      onkeydown: (e) => { if (e.key === 'Enter' && onSelect) onSelect(n.id); },
    },
    many ? s('rect', { x: 5, y: 5, width: W, height: H, rx: 8, class: 'stack' }) : null,
    s('rect', { width: W, height: H, rx: 8, class: 'box' }),
    s('text', { x: 10, y: 22, class: 'title', text: clipText(n.name ? `${n.id} · ${n.name}` : n.id, 26) }),
    drawnPause ? s('g', { class: 'i-pause' }, s('rect', { x: 10, y: 34, width: 3, height: 11 }), s('rect', { x: 16, y: 34, width: 3, height: 11 })) : null,
    s('text', { x: drawnPause ? 24 : 10, y: 44, class: 'sub', text: clipText(line2, 30) }),
    s('title', { text: `${n.id}${st ? `: ${state}` : ''}${many ? ` — ${fanoutText(st)} (${t('expand')})` : ''}` }));
    svg.append(node);
  });
  return svg;
}
