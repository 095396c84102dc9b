/**
 * The floating panel: hub connection, this tab's role and label, the current task, and in the
 * master tab the running flows with pause/stop buttons, and a looping tab's agent session (round
 * k/N, the command running, why it paused or ended, what a Stop left unrun or cancelled,
 * Stop / Pause / Resume), the files of the current task as they are attached (name, size, attaching /
 * attached / refused and why) and the images that came back in the last reply (docs/files.md "Back /
 * 回传"). Lives in a closed shadow root so page CSS
 * cannot break it and page scripts cannot read it; draggable, collapsible, and it moves itself
 * out of the way of the input box.
 *
 * Built with DOM calls only (no HTML strings: Trusted Types pages such as Gemini refuse them),
 * styled by a constructed stylesheet (not subject to the page's `style-src`), or a `<style>`
 * element where a world cannot adopt one. Its host element carries `data-state`,
 * `data-transport`, `data-capture` and `data-hooks`, the truth in a form every world can read;
 * with the `debug` value on, also `data-describe`: what `describe()` says (text, buttons and
 * where they are), as JSON, for worlds where the page cannot call the debug helpers.
 */
import { userInput } from './protocol.js';
import { markdownImages } from '../adapters/lib/images.js';

const CSS = `
:host { all: initial; }
.box { width: 260px; font: 12px/1.45 system-ui, sans-serif;
  color: #1d2330; background: rgba(255,255,255,.97); border: 1px solid #c9d0dc; border-radius: 8px;
  box-shadow: 0 4px 16px rgba(0,0,0,.18); overflow: hidden; }
.head { display: flex; align-items: center; gap: 6px; padding: 5px 8px; background: #24324a; color: #fff;
  cursor: move; user-select: none; }
.head b { flex: 1; font-size: 12px; }
.dot { width: 8px; height: 8px; border-radius: 50%; background: #999; }
.dot.open { background: #2ecc71; } .dot.connecting, .dot.waiting { background: #f1c40f; } .dot.stopped { background: #e74c3c; }
button { font: inherit; cursor: pointer; border: 1px solid #b8c1d1; background: #f4f6fa; border-radius: 4px; padding: 1px 6px; }
.head button { background: transparent; color: #fff; border-color: rgba(255,255,255,.4); }
.body { padding: 6px 8px; }
.collapsed .body { display: none; }
.row { display: flex; gap: 6px; } .row span:first-child { color: #5b6475; min-width: 92px; }
.flows { margin-top: 6px; border-top: 1px solid #e1e5ec; padding-top: 4px; }
.flow { margin: 4px 0; } .bar { height: 5px; background: #e1e5ec; border-radius: 3px; margin: 2px 0; }
.bar i { display: block; height: 100%; background: #3b7ddd; border-radius: 3px; }
.muted { color: #7a8394; }
.note { margin-top: 4px; padding: 3px 5px; background: #fff6d6; border-radius: 4px; color: #6b5200; }
.agent { margin-top: 6px; border-top: 1px solid #e1e5ec; padding-top: 4px; }
.agent .cmd { font-family: ui-monospace, monospace; font-size: 11px; word-break: break-all; }
.files, .images { margin-top: 6px; border-top: 1px solid #e1e5ec; padding-top: 4px; }
.files ul, .images ul { list-style: none; margin: 2px 0; padding: 0; }
.files li, .images li { margin: 1px 0; word-break: break-all; }
.files li.refused { color: #b3261e; } .files li.attached { color: #1e7b3a; }
.files progress { width: 100%; height: 6px; }
.images a { color: #2452a8; }
`;

const HOOK_NAMES = { page: '页面 page', inject: '注入 injected', xray: '沙箱 sandbox' };

function captureText({ mode, late, path }) {
  const via = path === 'dom' ? '页面文字 DOM (网络钩子没捕获到)' : path === 'network' ? '网络 network' : '等待回复 waiting';
  return `${via} · ${HOOK_NAMES[mode] || mode}${late ? ' · 钩子较晚 late hooks' : ''}`;
}

const ROLE_NAMES = { master: '总指挥 Master', foreman: '包工头 Foreman', worker: '工人 Worker' };
const STATE_NAMES = {
  open: '已连接 connected', connecting: '连接中 connecting', waiting: '重连等待 retrying',
  stopped: '已停止 stopped', idle: '未连接 idle', unpaired: '未配对 not paired',
};
const DONE_STATES = new Set(['completed', 'failed', 'skipped', 'cancelled']);
/** How a task's file stands (the panel's file list). */
const FILE_STATES = {
  waiting: '等待 waiting', attaching: '附加中 attaching', attached: '已附加 attached',
  refused: '被拒绝 refused', dropped: '未附加 not attached',
};
const AGENT_STATES = {
  running: '运行命令 running', sent: '已发回结果 results sent', paused: '已暂停 paused', ended: '已结束 ended',
};
/** The panel's agent buttons: the exact texts the hub runs with the person's authority. */
export const AGENT_CONTROLS = Object.freeze({
  'agent-stop': '?<agent stop>!', 'agent-pause': '?<agent pause>!', 'agent-resume': '?<agent resume>!',
});
/** Sessions kept on the panel once ended (the newest). */
const ENDED_KEPT = 2;

export class Panel {
  constructor({ doc, hub, findInput, version, debug = false }) {
    Object.assign(this, { doc, hub, findInput, version, debug });
    this.state = { hub: { state: 'idle' }, role: null, label: null, task: null, result: null, capture: null, parked: null };
    this.runs = new Map();
    this.agents = new Map(); // session id → {name, state, round, of, command, why}
    this.output = new Map(); // cmd_id → live output of a running command
    this.files = null; // the current task's (or delivery's) files: {key, id, done, of, list: [{name, size, state, reason}]}
    this.images = []; // the images of the last reply: [{alt, url}]
    this.watch(hub);
  }

  /**
   * Follows the task's files and the reply's images from the frames themselves: a `task` (or an agent
   * loop's `deliver`) with `attachments` from the hub, and what the tab sends — `task_update` (`attaching`
   * done/of, `sent`, `failed` with `attachment_refused`) and `turn_end` (its Markdown images). The panel
   * only reads them.
   */
  watch(hub) {
    if (!hub || typeof hub.send !== 'function') return;
    hub.on?.('frame', (frame) => this.hubFrame(frame));
    const send = hub.send.bind(hub);
    hub.send = (frame) => {
      try { this.sentFrame(frame); } catch { /* the panel never stands in a frame's way */ }
      return send(frame);
    };
  }

  hubFrame(frame) {
    if (frame?.type !== 'task' && frame?.type !== 'deliver') return;
    if (!Array.isArray(frame.attachments) || frame.attachments.length === 0) {
      if (this.files) { this.files = null; this.render(); } // a task without files: the last list goes
      return;
    }
    // A task's updates name its task_id; an agent loop's delivery's name its deliver_id.
    const key = frame.type === 'task' ? 'task_id' : 'deliver_id';
    this.files = {
      key, id: frame[key], done: 0, of: frame.attachments.length,
      list: frame.attachments.map((a) => ({ name: String(a?.name ?? '?'), size: Number(a?.size) || 0, state: 'waiting' })),
    };
    this.render();
  }

  sentFrame(frame) {
    if (frame?.type === 'turn_end') {
      this.images = markdownImages(frame.text);
      this.render();
      return;
    }
    const files = this.files;
    if (frame?.type !== 'task_update' || !files || frame[files.key] !== files.id) return;
    if (frame.state === 'attaching') {
      files.done = Number(frame.done) || 0;
      files.list.forEach((f, i) => {
        if (f.state === 'refused') return;
        f.state = i < files.done ? 'attached' : i === files.done ? 'attaching' : 'waiting';
      });
    } else if (['sent', 'streaming', 'done'].includes(frame.state)) {
      files.done = files.of;
      for (const f of files.list) if (f.state !== 'refused') f.state = 'attached';
    } else if (frame.state === 'failed') {
      const reason = String(frame.error || frame.trouble || '');
      if (frame.trouble === 'attachment_refused') {
        const named = files.list.find((f) => f.state !== 'attached' && reason.includes(f.name))
          || files.list.find((f) => f.state === 'attaching') || files.list.find((f) => f.state === 'waiting');
        if (named) Object.assign(named, { state: 'refused', reason });
      }
      for (const f of files.list) if (f.state === 'waiting' || f.state === 'attaching') f.state = 'dropped';
    } else {
      return;
    }
    this.render();
  }

  el(tag, className, text) {
    const e = this.doc.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /** The panel's CSS, adopted where the world allows it, else as `<style>` text. */
  style(root) {
    try {
      const Sheet = this.doc.defaultView.CSSStyleSheet;
      const sheet = new Sheet();
      sheet.replaceSync(CSS);
      root.adoptedStyleSheets = [sheet];
      if (root.adoptedStyleSheets.length === 1) return;
    } catch { /* a sandbox that cannot hand the page our array, or no constructable sheets */ }
    root.append(this.el('style', null, CSS));
  }

  mount() {
    const host = this.doc.createElement('aicard-panel');
    host.setAttribute('data-aicard-panel', '');
    this.root = host.attachShadow({ mode: 'closed' });
    this.style(this.root);
    this.box = this.el('div', 'box');
    this.box.setAttribute('part', 'box');
    const head = this.el('div', 'head');
    const fold = this.el('button', 'fold', '–');
    fold.title = '收起/展开 collapse';
    this.dot = this.el('span', 'dot');
    head.append(this.dot, this.el('b', null, 'AIcard'), fold);
    this.body = this.el('div', 'body');
    this.box.append(head, this.body);
    this.root.append(this.box);
    // The host is the positioned element (inline !important: page CSS cannot move or hide it).
    for (const [k, v] of Object.entries({ position: 'fixed', 'z-index': '2147483646', display: 'block', width: '260px', margin: '0', padding: '0' })) {
      host.style.setProperty(k, v, 'important');
    }
    this.host = host;
    this.doc.documentElement.appendChild(host);
    fold.addEventListener('click', () => this.box.classList.toggle('collapsed'));
    this.body.addEventListener('click', (ev) => this.onClick(ev));
    this.enableDrag(head);
    this.place(this.doc.defaultView.innerWidth - 272, 12);
    this.doc.defaultView.addEventListener('resize', () => this.place(this.pos.x, this.pos.y));
    // Frameworks that hydrate the whole document may drop unknown nodes: put the panel back.
    this.doc.defaultView.setInterval(() => {
      if (!host.isConnected) this.doc.documentElement.appendChild(host);
    }, 2000);
    this.render();
  }

  /** Moves the panel to (x, y), kept on screen and off the input box. */
  place(x, y) {
    const win = this.doc.defaultView;
    const w = this.box.offsetWidth || 260;
    const h = this.box.offsetHeight || 120;
    x = Math.max(0, Math.min(x, win.innerWidth - w));
    y = Math.max(0, Math.min(y, win.innerHeight - h));
    const input = this.findInput();
    if (input) {
      const r = input.getBoundingClientRect();
      const overlaps = x < r.right && x + w > r.left && y < r.bottom && y + h > r.top;
      if (overlaps) y = r.top - h - 8 >= 0 ? r.top - h - 8 : Math.min(win.innerHeight - h, r.bottom + 8);
    }
    this.moveTo(x, y);
  }

  moveTo(x, y) {
    this.pos = { x, y };
    this.host.style.setProperty('left', `${x}px`, 'important');
    this.host.style.setProperty('top', `${y}px`, 'important');
    this.publish();
  }

  /** Debug only: `describe()` on the host as `data-describe`, readable from any world. */
  publish() {
    if (!this.debug || !this.box) return;
    try { this.host.setAttribute('data-describe', JSON.stringify(this.describe())); } catch { /* not laid out yet */ }
  }

  enableDrag(handle) {
    handle.addEventListener('pointerdown', (down) => {
      if (down.target.closest('button')) return;
      const start = { ...this.pos, px: down.clientX, py: down.clientY };
      const move = (ev) => {
        this.moveTo(start.x + ev.clientX - start.px, start.y + ev.clientY - start.py);
      };
      const up = () => {
        handle.removeEventListener('pointermove', move);
        handle.removeEventListener('pointerup', up);
        this.place(this.pos.x, this.pos.y);
      };
      handle.setPointerCapture?.(down.pointerId);
      handle.addEventListener('pointermove', move);
      handle.addEventListener('pointerup', up);
    });
  }

  onClick(ev) {
    const button = ev.target.closest('button[data-act]');
    if (!button) return;
    const { act, flow } = button.dataset;
    if (act === 'debug' && this.debugRun) {
      Promise.resolve().then(() => this.debugRun(button.dataset.helper)).catch(() => { /* shown by the runner */ });
      return;
    }
    if (AGENT_CONTROLS[act]) {
      this.hub.send(userInput(AGENT_CONTROLS[act]));
      return;
    }
    if (['pause', 'resume', 'stop'].includes(act) && flow) {
      this.hub.send(userInput(`?<manager ${act} ${flow}>!`));
    }
  }

  /** What the panel shows, with its buttons' positions (debug helper and tests). */
  describe() {
    const rect = (el) => { const r = el.getBoundingClientRect(); return { x: r.x, y: r.y, width: r.width, height: r.height }; };
    return {
      rect: rect(this.host),
      collapsed: this.box.classList.contains('collapsed'),
      text: this.box.innerText,
      buttons: [...this.root.querySelectorAll('button')].map((b) => ({ act: b.dataset.act || 'fold', flow: b.dataset.flow, rect: rect(b) })),
    };
  }

  update(patch) {
    Object.assign(this.state, patch);
    this.render();
  }

  /** `cmd_output`: live output of a running command, shown until its `cmd_result`. */
  commandOutput(frame) {
    const id = frame.cmd_id || '';
    const text = `${this.output.get(id)?.text || ''}${frame.chunk || ''}`;
    this.output.set(id, { command: frame.command || '', text: text.slice(-400) });
    this.render();
  }

  commandDone(id) {
    if (this.output.delete(id || '')) this.render();
  }

  /** Folds a `flow_event` into the run table (an agent session's into the agent table). */
  flowEvent(ev) {
    if (ev.detail?.kind === 'agent') {
      this.agentEvent(ev);
      return;
    }
    const run = this.runs.get(ev.run_id) || { flow: ev.flow, state: 'running', nodes: new Map() };
    run.flow = ev.flow || run.flow;
    if (ev.node_id) run.nodes.set(ev.node_id, ev.state);
    else run.state = ev.state;
    run.detail = ev.detail;
    this.runs.set(ev.run_id, run);
    this.render();
  }

  /**
   * An agent session's `flow_event` (docs/agents.md): round, the command running, why it stopped, and
   * what a person's Stop left undone: the `ended` event's `not_run` / `cancelled` / `jobs`, and
   * each later `note` naming a command of the stopped turn that was not run (a note without a
   * `run_id` belongs to the tab's newest session).
   */
  agentEvent(ev) {
    const d = ev.detail || {};
    const id = String(ev.run_id || [...this.agents.keys()].pop() || '');
    const prev = this.agents.get(id) || {};
    const name = typeof ev.flow === 'string' && ev.flow.startsWith('agent:') ? ev.flow.slice(6) : prev.name;
    this.agents.delete(id); // re-inserted: the newest session last
    // `note` (e.g. "the model wrote a result itself") says something; the state stays.
    const note = ev.state === 'note';
    const more = { notRun: texts(d.not_run), cancelled: texts(d.cancelled), jobs: texts(d.jobs) };
    const listed = more.notRun.length + more.cancelled.length + more.jobs.length > 0;
    let lists = {};
    if (ev.state === 'ended') lists = { ...more, notRun: [...(prev.notRun || []), ...more.notRun] };
    else if (note) lists = { notRun: [...(prev.notRun || []), ...more.notRun], cancelled: [...(prev.cancelled || []), ...more.cancelled], jobs: [...(prev.jobs || []), ...more.jobs] };
    this.agents.set(id, {
      ...lists,
      name,
      state: (note ? prev.state : ev.state) || prev.state || (ev.run_id ? 'running' : 'ended'),
      round: d.round ?? prev.round,
      of: d.of ?? prev.of,
      command: ev.state === 'running' ? d.command : note ? prev.command : undefined,
      // A note that only lists what did not run keeps the reason the session ended.
      why: (note && listed && prev.why) || whyText(d.why) || (ev.state === 'running' || ev.state === 'sent' ? undefined : prev.why),
    });
    const ended = [...this.agents].filter(([, a]) => a.state === 'ended');
    for (const [old] of ended.slice(0, Math.max(0, ended.length - ENDED_KEPT))) this.agents.delete(old);
    this.render();
  }

  renderAgents() {
    const wrap = this.el('div', 'agent');
    for (const [session, a] of this.agents) {
      const el = this.el('div');
      el.dataset.session = session;
      const round = a.round !== undefined ? ` · round ${a.round}/${a.of ?? '?'}` : '';
      el.append(this.el('div', null, `代理 agent${a.name ? ` ${a.name}` : ''}${round} · ${AGENT_STATES[a.state] || a.state}`));
      if (a.command) el.append(this.el('div', 'cmd', `⋯ ${a.command}`.slice(0, 160)));
      if (a.why) el.append(this.note(a.why));
      if (a.notRun?.length) el.append(this.list('not-run', '未运行 / not run', a.notRun));
      if (a.cancelled?.length) el.append(this.list('cancelled', '已取消 / cancelled', a.cancelled));
      if (a.jobs?.length) el.append(this.list('jobs muted', '作业 / jobs', a.jobs));
      if (a.state !== 'ended') {
        const paused = a.state === 'paused';
        el.append(this.button(paused ? 'agent-resume' : 'agent-pause', paused ? '继续 Resume' : '暂停 Pause'),
          ' ', this.button('agent-stop', '停止 Stop'));
      }
      wrap.append(el);
    }
    return wrap;
  }

  /** `LABEL: a · b · c` as text (commands are never HTML), cut to a few lines. */
  list(className, label, items) {
    const shown = items.map((c) => (c.length > 120 ? `${c.slice(0, 119)}…` : c));
    return this.el('div', `cmd ${className}`, `${label}: ${shown.join(' · ')}`.slice(0, 480));
  }

  row(label, value) {
    const v = this.doc.createElement('span');
    v.textContent = value ?? '—';
    const l = this.doc.createElement('span');
    l.textContent = label;
    const row = this.doc.createElement('div');
    row.className = 'row';
    row.append(l, v);
    return row;
  }

  render() {
    if (!this.body) return;
    const { hub, role, label, task, result, capture, parked } = this.state;
    this.dot.className = `dot ${hub.state}`;
    const agent = [...this.agents.values()].pop();
    this.mark({
      files: this.files ? this.files.list.map((f) => `${f.name}:${f.state}`).join('|') : undefined,
      images: this.images.length ? String(this.images.length) : undefined,
      state: hub.state, transport: hub.transport, capture: capture?.path, hooks: capture?.mode, role,
      agent: agent?.state, 'agent-round': agent?.round !== undefined ? `${agent.round}/${agent.of ?? '?'}` : undefined,
    });
    const hubText = `${STATE_NAMES[hub.state] || hub.state}${hub.transport ? ` (${hub.transport})` : ''}`;
    const rows = [
      this.row('连接 Hub', hubText + (hub.state === 'waiting' && hub.error ? ` — ${hub.error}` : '')),
      this.row('角色 Role', ROLE_NAMES[role] || role),
      this.row('标签 Label', label),
      this.row('任务 Task', task),
    ];
    if (capture) rows.push(this.row('捕获 Capture', captureText(capture)));
    if (hub.notice) rows.push(this.note(hub.notice));
    if (parked) rows.push(this.note(parkedText(parked)));
    for (const [, out] of this.output) rows.push(this.row(`⋯ ${out.command}`.slice(0, 30), out.text.slice(-120)));
    if (result) rows.push(this.row('结果 Result', result));
    if (this.debugNames) rows.push(this.renderDebug());
    this.body.replaceChildren(...rows);
    // The hub sends flow_event only to the master of a run, whatever role the tab had before.
    if (this.runs.size) this.body.append(this.renderFlows());
    if (this.agents.size) this.body.append(this.renderAgents());
    if (this.files) this.body.append(this.renderFiles());
    if (this.images.length) this.body.append(this.renderImages());
    this.publish();
  }

  /** The current task's files: a progress bar (done of all) and one line per file, each with its name. */
  renderFiles() {
    const { done, of, list } = this.files;
    const wrap = this.el('div', 'files');
    wrap.append(this.row('附件 Files', `${Math.min(done, of)}/${of}`));
    const bar = this.el('progress');
    bar.max = of;
    bar.value = Math.min(done, of);
    bar.setAttribute('aria-label', `附件进度 attachment progress ${Math.min(done, of)}/${of}`);
    const ul = this.el('ul');
    ul.setAttribute('aria-label', '本任务的附件 / files of this task');
    for (const f of list) {
      const text = `${f.name} · ${fileSize(f.size)} · ${FILE_STATES[f.state] || f.state}${f.reason ? ` — ${f.reason}` : ''}`;
      const li = this.el('li', f.state, text.length > 240 ? `${text.slice(0, 239)}…` : text);
      li.setAttribute('aria-label', text);
      li.dataset.state = f.state;
      ul.append(li);
    }
    wrap.append(bar, ul);
    return wrap;
  }

  /** The images of the last reply, each a link to its address (a `data:` image is named, not linked). */
  renderImages() {
    const wrap = this.el('div', 'images');
    wrap.append(this.row('图片 Images', `${this.images.length}`));
    const ul = this.el('ul');
    ul.setAttribute('aria-label', '上一条回复中的图片 / images in the last reply');
    for (const img of this.images) {
      const name = img.alt || imageName(img.url);
      const li = this.el('li');
      if (/^https?:/i.test(img.url)) {
        const a = this.el('a', null, `🖼 ${name}`);
        a.href = img.url;
        a.target = '_blank';
        a.rel = 'noopener noreferrer';
        a.setAttribute('aria-label', `图片 image: ${name}`);
        li.append(a);
      } else {
        li.textContent = `🖼 ${name} (内嵌 inline)`;
        li.setAttribute('aria-label', `内嵌图片 inline image: ${name}`);
      }
      ul.append(li);
    }
    wrap.append(ul);
    return wrap;
  }

  renderFlows() {
    const wrap = this.doc.createElement('div');
    wrap.className = 'flows';
    wrap.append(this.row('流程 Flows', `${this.runs.size}`));
    for (const [runId, run] of this.runs) {
      const total = run.nodes.size;
      const done = [...run.nodes.values()].filter((s) => DONE_STATES.has(s)).length;
      const el = this.doc.createElement('div');
      el.className = 'flow';
      el.dataset.run = runId;
      const title = this.doc.createElement('div');
      title.textContent = `${run.flow} · ${run.state} · ${done}/${total}`;
      const bar = this.doc.createElement('div');
      bar.className = 'bar';
      const fill = this.doc.createElement('i');
      fill.style.width = `${total ? Math.round((100 * done) / total) : 0}%`;
      bar.append(fill);
      el.append(title, bar);
      if (!DONE_STATES.has(run.state)) {
        const paused = run.state === 'paused';
        el.append(this.button(paused ? 'resume' : 'pause', paused ? '继续 Resume' : '暂停 Pause', run.flow),
          ' ', this.button('stop', '停止 Stop', run.flow));
      }
      wrap.append(el);
    }
    return wrap;
  }

  /** Debug mode: the helpers as buttons, and the last one's result. */
  setDebug(names, run) {
    this.debugNames = names;
    this.debugRun = run;
    this.render();
  }

  renderDebug() {
    const wrap = this.doc.createElement('div');
    wrap.className = 'debug';
    wrap.append(this.row('调试 Debug', this.state.debugOut || ''));
    for (const name of this.debugNames) {
      const b = this.button('debug', name.replace(/^mcp/, ''));
      b.dataset.helper = name;
      wrap.append(b, ' ');
    }
    return wrap;
  }

  note(text) {
    return this.el('div', 'note', text);
  }

  /** The panel's state as attributes of its host, which every world (and a test) can read. */
  mark(attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null) this.host.removeAttribute(`data-${k}`);
      else this.host.setAttribute(`data-${k}`, String(v));
    }
  }

  button(act, text, flow) {
    const b = this.doc.createElement('button');
    b.dataset.act = act;
    if (flow !== undefined) b.dataset.flow = flow;
    b.textContent = text;
    return b;
  }
}

/** `512 B`, `12.3 KB`, `4.0 MB`. */
export function fileSize(bytes) {
  const n = Number(bytes) || 0;
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}

/** A name for an image without alt text: the last part of its address's path. */
function imageName(url) {
  if (/^data:/i.test(url)) return 'data:';
  try {
    const last = new URL(url).pathname.split('/').filter(Boolean).pop();
    return decodeURIComponent(last || url).slice(0, 60);
  } catch {
    return String(url).slice(0, 60);
  }
}

/** A list the hub sent (absent, not a list, or holding non-texts: what it holds as texts). */
function texts(list) {
  return Array.isArray(list) ? list.filter((x) => x !== null && x !== undefined && x !== '').map(String) : [];
}

/** The hub's reason, shown as given: a text, or an object carrying one. */
function whyText(why) {
  if (!why) return undefined;
  if (typeof why === 'string') return why;
  return why.text || why.message || why.code || JSON.stringify(why);
}

/** What a parked tab tells the person (the hub sends it no task until they act). */
export function parkedText(trouble) {
  const what = trouble === 'login'
    ? '站点要求登录 / the site wants you to log in'
    : '站点要求人机验证 / the site asks for a captcha or human check';
  return `⏸ 已暂停接收任务：${what}。完成后在此标签页发一句话即可恢复 / parked, no tasks until you act: ${what}. When done, send any message in this tab to resume.`;
}
