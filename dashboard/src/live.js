// The hub's event stream: one EventSource, resumed after a reload from the last journal id
// this tab saw (sessionStorage), so nothing is lost; the browser's own reconnects send
// Last-Event-ID. No polling.
const KEY = 'aicard.lastEventId';
const listeners = new Set();
let source = null;

export const debug = { received: [], opened: [] };

export function lastEventId() {
  try { return sessionStorage.getItem(KEY); } catch { return null; }
}

function remember(id) {
  try { sessionStorage.setItem(KEY, id); } catch { /* storage unavailable */ }
}

export function subscribe(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function emit(kind, data) {
  for (const fn of [...listeners]) {
    try { fn(kind, data); } catch (e) { console.error(e); }
  }
}

/** Opens the stream; `fallbackId` (a snapshot's journal id) when this tab has none stored. */
export function connect(fallbackId) {
  if (source) return;
  const stored = lastEventId();
  const from = stored !== null ? stored : (fallbackId !== undefined ? String(fallbackId) : null);
  const url = from !== null ? `/api/events?last_event_id=${encodeURIComponent(from)}` : '/api/events';
  debug.opened.push(from);
  source = new EventSource(url);
  source.addEventListener('journal', (e) => {
    remember(e.lastEventId);
    const data = JSON.parse(e.data);
    debug.received.push(data.id);
    emit('journal', data);
  });
  source.addEventListener('mark', (e) => remember(e.lastEventId));
  source.addEventListener('hello', (e) => {
    const d = JSON.parse(e.data);
    if (lastEventId() === null) remember(String(d.last_event_id));
    emit('hello', d);
  });
  source.addEventListener('tab', (e) => emit('tab', JSON.parse(e.data)));
  source.addEventListener('run', (e) => emit('run', JSON.parse(e.data)));
  source.addEventListener('error', () => emit('status', source.readyState));
  source.addEventListener('open', () => emit('status', source.readyState));
}
