// The hub's /api/: same-origin fetches with the session cookie; state-changing requests carry
// the session's CSRF token too.
let csrf = null;

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function call(method, path, body, { text = false, type = 'application/json', status = false } = {}) {
  const headers = {};
  if (method !== 'GET' && csrf) headers['X-CSRF-Token'] = csrf;
  if (body !== undefined) headers['Content-Type'] = type;
  const r = await fetch(path, {
    method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)),
  });
  const raw = await r.text();
  if (status) return { status: r.status, body: raw ? JSON.parse(raw) : {} };
  if (!r.ok && r.status !== 422) {
    let msg = raw;
    try { msg = JSON.parse(raw).error || raw; } catch { /* text */ }
    throw new ApiError(r.status, msg);
  }
  if (text) return raw;
  return JSON.parse(raw);
}

export const api = {
  async session() { const s = await call('GET', '/api/session'); csrf = s.csrf; return s; },
  tabs: () => call('GET', '/api/tabs'),
  setRole: (id, role, group) => call('POST', `/api/tabs/${encodeURIComponent(id)}/role`, { role, group }),
  runs: (kind) => call('GET', `/api/runs${kind ? `?kind=${encodeURIComponent(kind)}` : ''}`),
  run: (id) => call('GET', `/api/runs/${encodeURIComponent(id)}`),
  node: (id, node, offset = 0, limit = 100) => call('GET', `/api/runs/${encodeURIComponent(id)}/nodes/${encodeURIComponent(node)}?offset=${offset}&limit=${limit}`),
  control: (id, action) => call('POST', `/api/runs/${encodeURIComponent(id)}/${action}`, {}),
  start: (flow, inputs, source) => call('POST', '/api/runs', { flow, inputs, source }),
  flows: () => call('GET', '/api/flows'),
  flow: (name) => call('GET', `/api/flows/${encodeURIComponent(name)}`),
  plans: () => call('GET', '/api/plans'),
  plan: (id) => call('GET', `/api/plans/${encodeURIComponent(id)}`),
  answerPlan: (id, action, body) => call('POST', `/api/plans/${encodeURIComponent(id)}/${action}`, body || {}),
  agents: () => call('GET', '/api/agents'),
  agentSession: (id) => call('GET', `/api/agents/sessions/${encodeURIComponent(id)}`),
  agentControl: (id, action) => call('POST', `/api/agents/sessions/${encodeURIComponent(id)}/${action}`, {}),
  // The flow designer: a file of flows/ with its hash; saved only over the version opened.
  flowFile: (name) => call('GET', `/api/flows/${encodeURIComponent(name)}?file=1`),
  saveFlow: (name, source, base) => call('PUT', `/api/flows/${encodeURIComponent(name)}`, { source, base }, { status: true }),
  validate: (file, yaml) => call('POST', `/api/flows/validate?format=json&file=${encodeURIComponent(file)}`, yaml, { type: 'text/plain' }),
};
