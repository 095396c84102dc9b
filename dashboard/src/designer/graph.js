// The designer's graph: laid out by dagre (@dagrejs/dagre), drawn as SVG. Each node is a
// focusable `role="group"` named by its id; it can be dragged (moved), or dragged from its
// port (the dot under it) onto another node to connect them. Positions a person moved are
// kept for the page's life only (they are not part of the flow).
import { layout, graphlib } from '@dagrejs/dagre';
import { s } from '../dom.js';
import { dt } from './strings.js';

export const W = 190, H = 56;
const PAD = 20;

let cache = { key: null, at: null };

/** dagre's positions (centres) for this shape of graph; the same ids and edges reuse the last
 *  layout, so an edit of a prompt or a target does not lay the graph out again. */
function dagrePlaces(nodes) {
  const key = JSON.stringify(nodes.map((n) => [n.id, n.deps]));
  if (cache.key === key) return cache.at;
  const g = new graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 28, ranksep: 46, marginx: PAD, marginy: PAD });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(nodes.map((n) => n.id));
  for (const n of nodes) g.setNode(n.id, { width: W, height: H });
  for (const n of nodes) for (const d of n.deps) if (ids.has(d) && d !== n.id) g.setEdge(d, n.id);
  layout(g);
  const at = new Map(nodes.map((n) => [n.id, { x: g.node(n.id).x - W / 2, y: g.node(n.id).y - H / 2 }]));
  cache = { key, at };
  return at;
}

/** Top-left of each node: dagre's layout, with the moved nodes where they were put. */
export function place(nodes, moved) {
  const at = dagrePlaces(nodes);
  const pos = new Map();
  let width = 0, height = 0;
  for (const n of nodes) {
    const p = moved.get(n.id) || at.get(n.id);
    pos.set(n.id, p);
    width = Math.max(width, p.x + W + PAD);
    height = Math.max(height, p.y + H + PAD);
  }
  return { pos, width: Math.max(width, 320), height: Math.max(height, 120) };
}

function clip(text, max) { return text.length > max ? `${text.slice(0, max - 1)}…` : text; }

function subtitle(n) {
  const f = n.fields;
  if (n.kind === 'command') return `⌘ ${f.command}`;
  if (n.kind === 'mcp') return `mcp ${f.mcp?.server ?? ''}/${f.mcp?.tool ?? ''}`;
  if (n.kind === 'memory') return `memory: ${f.memory?.search ?? ''}`;
  if (n.kind === 'agent') return `agent ${f.agent}`;
  const to = n.to.length ? n.to.join(', ') : 'role:worker';
  const many = f.workers ? ` ×${f.workers}` : f.for_each ? ' × items' : '';
  return `→ ${to}${many}`;
}

/**
 * Draws the flow. `on`: {select(id), connect(from, to), move(id, x, y), key(e, id)};
 * `problems`: id → [messages]; `selected`, `connectFrom`: ids.
 */
export function drawGraph(flow, { moved, problems, selected, connectFrom, on }) {
  const L = place(flow.nodes, moved);
  const svg = s('svg', { class: 'dag designer-graph', width: L.width, height: L.height, viewBox: `0 0 ${L.width} ${L.height}` });
  svg.append(s('defs', {}, s('marker', { id: 'd-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    s('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }))));
  const edges = s('g', { class: 'edges', 'aria-hidden': 'true' });
  const edgeOf = new Map(); // id → [[path, from, to]]
  const path = (a, b) => {
    const x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y, my = (y1 + y2) / 2;
    return `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2 - 2}`;
  };
  for (const n of flow.nodes) {
    for (const d of n.deps) {
      if (!L.pos.has(d)) continue;
      const p = s('path', { d: path(L.pos.get(d), L.pos.get(n.id)), class: 'edge', 'marker-end': 'url(#d-arrow)', 'data-edge': `${d}->${n.id}` });
      edges.append(p);
      for (const id of [d, n.id]) { if (!edgeOf.has(id)) edgeOf.set(id, []); edgeOf.get(id).push([p, d, n.id]); }
    }
  }
  svg.append(edges);
  const ghost = s('path', { class: 'edge ghost', d: '', 'aria-hidden': 'true' });
  svg.append(ghost);
  const toSvg = (e) => {
    const r = svg.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  };
  for (const n of flow.nodes) {
    const p = L.pos.get(n.id);
    const bad = problems.get(n.id) || [];
    const g = s('g', {
      class: ['node', 'st-preview', `kind-${n.kind}`, selected === n.id ? 'selected' : '', connectFrom === n.id ? 'connecting' : '', bad.length ? 'bad' : ''],
      transform: `translate(${p.x},${p.y})`, tabindex: 0, role: 'group', 'aria-label': n.id,
      'aria-description': bad.length ? `${dt('problems')}: ${bad.join(' · ')}` : null,
      'aria-current': selected === n.id ? 'true' : null,
      'data-node': n.id, 'data-problems': bad.length || null,
    },
    s('rect', { width: W, height: H, rx: 8, class: 'box' }),
    s('text', { x: 10, y: 22, class: 'title', text: clip(n.name ? `${n.id} · ${n.name}` : n.id, 24) }),
    s('text', { x: 10, y: 43, class: 'sub', text: clip(subtitle(n), 29) }),
    bad.length ? s('text', { x: W - 10, y: 22, class: 'problem', 'text-anchor': 'end', text: `⚠ ${bad.length}` }) : null,
    s('title', { text: bad.length ? `${n.id}\n${bad.join('\n')}` : n.id }));
    const port = s('circle', { cx: W / 2, cy: H, r: 6, class: 'port', 'aria-hidden': 'true' });
    g.append(port);
    // Drag the node to move it; drag its port onto another node to connect.
    g.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      const start = toSvg(e);
      const fromPort = e.target === port;
      let dragged = false;
      g.setPointerCapture(e.pointerId);
      const moveTo = (ev) => {
        const q = toSvg(ev);
        if (!dragged && Math.hypot(q.x - start.x, q.y - start.y) < 4) return;
        dragged = true;
        if (fromPort) {
          ghost.setAttribute('d', `M ${p.x + W / 2} ${p.y + H} L ${q.x} ${q.y}`);
        } else {
          const x = Math.max(0, p.x + q.x - start.x), y = Math.max(0, p.y + q.y - start.y);
          g.setAttribute('transform', `translate(${x},${y})`);
          moved.set(n.id, { x, y });
          for (const [el, a, b] of edgeOf.get(n.id) || []) {
            const pa = a === n.id ? { x, y } : (moved.get(a) || L.pos.get(a));
            const pb = b === n.id ? { x, y } : (moved.get(b) || L.pos.get(b));
            el.setAttribute('d', path(pa, pb));
          }
        }
      };
      const up = (ev) => {
        g.removeEventListener('pointermove', moveTo);
        g.removeEventListener('pointerup', up);
        ghost.setAttribute('d', '');
        if (!dragged) { on.select(n.id); return; }
        if (fromPort) {
          const over = document.elementsFromPoint(ev.clientX, ev.clientY).map((el) => el.closest && el.closest('[data-node]')).find((el) => el && el !== g);
          if (over) on.connect(n.id, over.dataset.node);
        } else on.move(n.id);
      };
      g.addEventListener('pointermove', moveTo);
      g.addEventListener('pointerup', up);
    });
    g.addEventListener('keydown', (e) => on.key(e, n.id, p));
    svg.append(g);
  }
  return svg;
}
