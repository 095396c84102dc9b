// Every state drawn distinctly: an icon, its name, and a colour from the Okabe–Ito palette
// (safe for the common colour-vision deficiencies), plus a border style. Icons are glyphs
// the fonts the page names all have (DejaVu, Segoe UI Symbol, Apple Symbols, Noto, the CJK
// fonts); pause has no such glyph (⏸ is missing from most), so it is drawn: two bars.
import { h, s } from './dom.js';
import { t } from './i18n.js';

export const STATES = {
  pending: { icon: '○' },
  running: { icon: '▶' },
  retrying: { icon: '↻' },
  paused: { icon: '' }, // drawn: pauseIcon()
  completed: { icon: '✓' },
  failed: { icon: '✗' },
  skipped: { icon: '↷' },
  cancelled: { icon: '⊘' },
  ended: { icon: '■' },
};

export function icon(state) {
  return (STATES[state] || STATES.pending).icon;
}

/** The pause sign as two bars (HTML): no font needed. */
export function pauseIcon() {
  return h('span', { class: 'i-pause', 'aria-hidden': 'true' });
}

/** A state's icon as a node or text: the drawn pause sign, else the glyph. */
export function iconOf(state) {
  return state === 'paused' ? pauseIcon() : icon(state);
}

/** A badge: icon + translated name, coloured by class. */
export function badge(state) {
  return h('span', { class: `badge st-${state}`, 'data-state': state }, iconOf(state), ` ${t(state)}`);
}

/** A tab's status: what it is doing, or why the decision engine holds it back. */
export const TAB_STATES = {
  idle: { icon: '○' },
  busy: { icon: '▶' },
  cooling: { icon: '❄' },
  parked: { icon: '⚑' },
  offline: { icon: '✗' },
};

/** A tab badge: icon + translated name (+ detail, e.g. seconds left), coloured by class. */
export function tabBadge(status, detail) {
  const st = TAB_STATES[status] ? status : 'offline';
  return h('span', { class: `badge tab-${st}`, 'data-status': st }, `${TAB_STATES[st].icon} ${t(st)}${detail ? ` · ${detail}` : ''}`);
}

export function tabLegend() {
  return h('div', { class: 'legend', 'aria-label': t('tab_legend') },
    h('span', { class: 'legend-title', text: `${t('tab_legend')}:` }),
    Object.keys(TAB_STATES).map((k) => tabBadge(k)));
}

export function legend() {
  return h('div', { class: 'legend', 'aria-label': t('legend') },
    h('span', { class: 'legend-title', text: `${t('legend')}:` }),
    Object.keys(STATES).map((k) => badge(k)));
}

/** "14/20 ✓ 2 ✗ 4 running" for a node with many items. */
export function fanoutText(node) {
  const c = node.counts || {};
  const done = c.completed || 0;
  const parts = [`${done}/${node.total} ✓`];
  if (c.failed) parts.push(`${c.failed} ✗`);
  const running = (c.running || 0) + (c.retrying || 0);
  if (running) parts.push(`${running} ${t('running')}`);
  if (c.pending) parts.push(`${c.pending} ${t('pending')}`);
  if (c.cancelled) parts.push(`${c.cancelled} ${icon('cancelled')}`);
  return parts.join(' ');
}

export { s };
