/**
 * The tab's task queue: one hub task (or delivery) at a time. A task is accepted, waits until the
 * tab is idle, is typed into the input box and sent, and is answered by the next captured turn
 * (which carries its task id); site trouble or the task's timeout fail it. The person's draft is
 * put back after the prompt was sent.
 *
 * An automatic delivery (`deliver {auto_send}`, the agent loop's results, docs/agents.md) waits until
 * the model is idle and the person has not pressed a key in the box for the hub's `hold_ms`
 * (welcome; 3 s by default), with no upper limit: nothing is typed under the person's fingers.
 * While it is held the tab says so (`task_update {deliver_id, state: "held"}`, at once and every
 * 2 s), so the hub neither resends it nor gives up. It keeps the person's draft aside while it
 * types and sends, and puts it back; the turn it starts is the hub's, never reported as the
 * person's input. An agent session that the hub pauses or ends drops its deliveries not yet
 * typed. A delivery's files (`attachments`) are attached as a task's are before its text is typed;
 * one the site refuses fails the delivery (`task_update {deliver_id, state: "failed"}`), never sent
 * without them.
 */
import { attaching, deliveryAttaching, deliveryFailed, deliveryHeld, taskUpdate, userInput } from './protocol.js';
import { attachFiles, fetchAttachments } from './attach.js';
import { troubleKind } from '../adapters/lib/trouble.js';
import { DomReplyWatcher, PAGE_READ_AFTER_MISS_MS } from './dom-fallback.js';
import { findInput, findStopButton, insertBlock, pressSend, readInput, setInput, siteShowsStop, waitFor } from './input.js';

const DEFAULT_TIMEOUT_MS = 120_000;
const FIND_INPUT_MS = 10_000;
const TURN_START_MS = 20_000;
/** No matching request this long after a send: the reply is read from the page (docs/reliability.md). */
const DOM_FALLBACK_AFTER_MS = 1_500;
/** How long after pressing send the turn the hub typed may take to start. */
const HUB_TURN_MS = 20_000;
/**
 * An automatic send waits while the person pressed a key in the box this recently (ms), unless
 * the hub's `welcome` says otherwise (`hold_ms`). There is no upper limit: the tab reports the
 * hold instead (`held`), which restarts the hub's arrival window.
 */
export const DEFAULT_HOLD_MS = 3_000;
/** How often a held delivery is reported again while the hold lasts. */
export const HELD_EVERY_MS = 2_000;

/** The hold window a `welcome` gives: its `hold_ms` (a number ≥ 0), else the default. */
export function holdMsOf(welcome) {
  const ms = welcome?.hold_ms;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : DEFAULT_HOLD_MS;
}

/** Text compared without its whitespace (editors rewrite line breaks and trailing spaces). */
const squash = (s) => String(s ?? '').replace(/\s+/g, '');

export class TaskRunner {
  constructor({ doc, adapter, hub, capture, timers, log, onChange, seen }) {
    Object.assign(this, { doc, adapter, hub, capture, timers, log, onChange, seen });
    this.queue = [];
    this.current = null;
    this.awaitingTurn = null;
    this.waiters = new Set();
    /** `captcha` or `login` while the tab waits for the person, else null. */
    this.parked = null;
    /** When the person last pressed a key (or typed) in the input box (ms; never: -Infinity). */
    this.lastPersonEdit = -Infinity;
    /** Nothing is typed automatically while the person's last key press is this recent (ms). */
    this.holdMs = DEFAULT_HOLD_MS;
    /** > 0 while we write into the box ourselves (its input events are not the person's). */
    this.typing = 0;
    /** The turn an automatic send is about to start: `{text, until}`. */
    this.hubTurn = null;
    capture.on((kind, turn, detail) => this.onCapture(kind, turn, detail));
  }

  /** Handles `task` and `deliver` frames from the hub. */
  handle(frame) {
    if (frame.type === 'task') {
      if (!frame.task_id || typeof frame.prompt !== 'string') {
        this.log('warn', 'task without task_id or prompt ignored');
        return;
      }
      if (this.current?.task_id === frame.task_id || this.queue.some((t) => t.task_id === frame.task_id)) return;
      this.queue.push({ kind: 'task', ...frame });
    } else if (frame.type === 'deliver') {
      // A hub that crashed after sending may send a delivery again: type it once.
      const id = frame.deliver_id;
      if (id && (this.seen?.has(id) || this.current?.deliver_id === id || this.queue.some((j) => j.deliver_id === id))) {
        this.log('info', `delivery ${id} already typed`);
        return;
      }
      // The hub's one resend of a round (docs/agents.md) while that round still waits here (a draft,
      // a model still writing) is the same message: it is typed once.
      const sameRound = (j) => j?.kind === 'deliver' && frame.agent && j.agent
        && String(j.agent.session) === String(frame.agent.session) && j.agent.round === frame.agent.round;
      if (sameRound(this.current) || this.queue.some(sameRound)) {
        this.log('info', `delivery ${id || ''}: round ${frame.agent.round} already waits to be typed`);
        if (id) this.seen?.add(id);
        return;
      }
      this.queue.push({ kind: 'deliver', ...frame });
    } else {
      return;
    }
    this.pump();
  }

  /**
   * `cancel` from the hub: whoever asked gave up. A queued task is dropped; the task in flight
   * stops waiting, and the site's reply is stopped if it still streams (its stop button).
   */
  cancel(taskId) {
    const queued = this.queue.findIndex((j) => j.task_id === taskId);
    if (queued !== -1) { this.queue.splice(queued, 1); this.onChange?.(); return; }
    if (this.current?.task_id !== taskId) return;
    for (const wait of this.waiters) if (wait.id === taskId) wait.finish({ ok: false, error: 'cancelled', cancelled: true });
    findStopButton(this.doc)?.click();
  }

  /** The task id the next captured turn answers (handed out once). */
  claimTask() {
    const id = this.awaitingTurn || undefined;
    this.awaitingTurn = null;
    return id;
  }

  get idle() {
    return !this.capture.busy && !siteShowsStop(this.doc);
  }

  /** The hub's `welcome` (on every connect): its hold window. */
  welcome(frame) {
    this.holdMs = holdMsOf(frame);
  }

  /** `flow_control` from the hub: `pause` holds queued jobs until `resume`. */
  control(frame) {
    if (frame.action === 'pause') this.paused = true;
    if (frame.action === 'resume') { this.paused = false; this.pump(); }
  }

  async pump() {
    if (this.current || this.paused) return;
    const job = this.queue.shift();
    if (!job) return;
    this.current = job;
    this.onChange?.();
    try {
      if (job.kind === 'task') await this.runTask(job);
      else await this.runDelivery(job);
    } catch (err) {
      this.log('error', `job failed: ${err.message}`);
      if (job.kind === 'task') this.hub.send(taskUpdate(job.task_id, 'failed', err.message, err.trouble));
    } finally {
      this.current = null;
      this.awaitingTurn = null;
      this.onChange?.();
      this.pump();
    }
  }

  async waitIdle(timeoutMs) {
    const idle = await waitFor(() => this.idle, { timeoutMs, everyMs: 100, timers: this.timers });
    if (!idle) throw new Error('tab stayed busy (still streaming) / 标签页一直在输出');
  }

  async locateInput() {
    const input = await waitFor(() => findInput(this.doc, this.adapter), { timeoutMs: FIND_INPUT_MS, timers: this.timers });
    if (!input) throw new Error('input box not found / 找不到输入框');
    return input;
  }

  /** Types `text`, sends it, and puts the person's draft back once the site took the text. */
  async typeAndSend(text, { taskId } = {}) {
    const input = await this.locateInput();
    const draft = readInput(input);
    this.sending = true;
    this.typing += 1;
    try {
      setInput(input, text);
      if (readInput(input) !== text) throw new Error('the site rejected the typed text / 输入框未接受文本');
      this.awaitingTurn = taskId || null;
      await pressSend(this.doc, this.adapter, input, this.timers);
    } finally {
      this.sending = false;
      this.typing -= 1;
    }
    if (draft) {
      await waitFor(() => readInput(input) !== text, { timeoutMs: 3000, timers: this.timers });
      const box = input.isConnected ? input : await this.locateInput();
      this.typing += 1;
      try { setInput(box, draft); } finally { this.typing -= 1; }
    }
  }

  /**
   * The person pressed a key in the box or changed it (a trusted event, main.js): automatic
   * sends wait. Our own writing into the box (`typing`) is not the person's.
   */
  notePersonEdit() {
    if (this.typing > 0) return;
    this.lastPersonEdit = Date.now();
  }

  /** True while the person's last key press in the box is within the hold window. */
  get personTyping() {
    return Date.now() < this.lastPersonEdit + this.holdMs;
  }

  /** The next turn to start is the hub's: the text about to be sent, for a short while. */
  expectHubTurn(text) {
    this.hubTurn = { text: squash(text), until: Date.now() + HUB_TURN_MS };
  }

  /** True (once) when `turn` is the turn an automatic send started. */
  takeHubTurn(turn) {
    const want = this.hubTurn;
    if (!want) return false;
    if (Date.now() > want.until) { this.hubTurn = null; return false; }
    if (turn.prompt !== null && turn.prompt !== undefined) {
      const got = squash(turn.prompt);
      // A site may trim or reflow a long message: the same start is enough.
      const same = got === want.text || (got.length >= 32 && want.text.startsWith(got.slice(0, 64)))
        || (want.text.length >= 32 && got.startsWith(want.text.slice(0, 64)));
      if (!same) return false;
    }
    this.hubTurn = null;
    return true;
  }

  async runTask(task) {
    const { task_id: id } = task;
    const timeoutMs = Number(task.timeout_ms) > 0 ? Number(task.timeout_ms) : DEFAULT_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    this.hub.send(taskUpdate(id, 'accepted'));
    await this.waitIdle(timeoutMs);
    const wait = new TaskWait(this, id, timeoutMs);
    try {
      await this.attachTaskFiles(task);
      await this.typeAndSend(task.prompt, { taskId: id });
      this.hub.send(taskUpdate(id, 'sent'));
      const result = await wait.arm(deadline);
      if (result.ok) this.hub.send(taskUpdate(id, 'done'));
      else if (!result.cancelled) this.hub.send(taskUpdate(id, 'failed', result.error, result.trouble));
    } finally {
      wait.finish({ ok: false, error: 'abandoned' });
    }
  }

  /**
   * The task's files (`attachments`), fetched from the hub and put into the composer as a person
   * would (attach.js), each upload finished before anything is typed; `attaching` done/of reported
   * as they go. A file the site refuses throws with `trouble: attachment_refused`: nothing is sent.
   */
  async attachTaskFiles(task) {
    await this.attachFilesOf(task, (done, of) => attaching(task.task_id, done, of));
  }

  /**
   * A job's `attachments` (a task's, or an agent loop's delivery's) fetched and attached; `report(done,
   * of)` builds the progress frame sent at 0 and after each file.
   */
  async attachFilesOf(job, report) {
    const list = Array.isArray(job.attachments) ? job.attachments : [];
    if (list.length === 0) return;
    this.hub.send(report(0, list.length));
    const files = await fetchAttachments(list, (fileId) => this.hub.fetchFile(fileId));
    await attachFiles({
      doc: this.doc, adapter: this.adapter, files, timers: this.timers,
      onDone: (n) => this.hub.send(report(n, list.length)),
    });
  }

  onCapture(kind, turn, detail) {
    // A turn the hub typed (a task, an automatic send) or one that came again after a reload
    // (reported in its first life) is not the person's input.
    if (kind === 'turn_start' && !turn.taskId && !turn.hubTyped && !turn.resumed && !this.sending) {
      if (this.takeHubTurn(turn)) turn.hubTyped = true;
      else this.reportUserInput(turn);
    }
    if (!turn.taskId) return;
    for (const wait of this.waiters) {
      if (wait.id !== turn.taskId) continue;
      if (kind === 'turn_start') wait.started = true;
      if (kind === 'streaming') this.hub.send(taskUpdate(turn.taskId, 'streaming'));
      if (kind === 'turn_end') wait.finish({ ok: true });
      if (kind === 'trouble') {
        const trouble = troubleKind(detail.reason);
        // A captcha or a login page needs the person: the hub parks the tab, the panel says so.
        if (trouble === 'captcha' || trouble === 'login') this.park(trouble);
        wait.finish({ ok: false, error: detail.code ? `${detail.reason} [${detail.code}]` : detail.reason, trouble });
      }
    }
  }

  /** The site wants the person (captcha / login): reported in heartbeats until they act. */
  park(trouble) {
    this.parked = trouble;
    this.onChange?.();
  }

  /** The person acted in the tab: it may take tasks again. */
  unpark() {
    if (!this.parked) return;
    this.parked = null;
    this.onChange?.();
  }

  /** A turn nobody asked the tab for: the person sent something by hand. */
  reportUserInput(turn) {
    this.unpark();
    const text = turn.prompt ?? this.personSubmitted?.text;
    this.clearPersonSubmitted();
    if (text) this.hub.send(userInput(text));
  }

  /**
   * The person pressed send (seen in the DOM, before the site clears the box). Reported with the
   * turn it starts, or on its own after a moment when the site starts none.
   */
  notePersonSubmit(text) {
    if (this.sending || !text || !text.trim()) return;
    this.clearPersonSubmitted();
    const timer = this.timers.setTimeout(() => {
      if (this.personSubmitted?.timer !== timer) return;
      this.personSubmitted = null;
      this.hub.send(userInput(text));
    }, 3000);
    this.personSubmitted = { text, timer };
  }

  clearPersonSubmitted() {
    if (this.personSubmitted) this.timers.clearTimeout(this.personSubmitted.timer);
    this.personSubmitted = null;
  }

  async runDelivery(job) {
    const text = String(job.text ?? '');
    if (job.auto_send) {
      if (!(await this.waitToType(job))) {
        this.log('info', `delivery ${job.deliver_id || ''} dropped: its agent session stopped`);
        if (job.deliver_id) this.seen?.add(job.deliver_id);
        return;
      }
      job.typing = true;
      if (!(await this.attachDeliveryFiles(job))) return;
      this.expectHubTurn(text);
      try {
        await this.typeAndSend(text);
      } catch (err) {
        this.hubTurn = null;
        throw err;
      }
    } else {
      if (!(await this.attachDeliveryFiles(job))) return;
      insertBlock(await this.locateInput(), text);
    }
    if (job.deliver_id) this.seen?.add(job.deliver_id);
  }

  /**
   * An agent loop's delivery with files (`attachments`): attached as a task's are, every upload
   * finished before its text is typed (`attaching` done/of with its `deliver_id`). A file that cannot
   * be fetched or that the site refuses: the hub is told (`failed`, `attachment_refused` when the site
   * refused it) and the text is not sent without its files. False then.
   */
  async attachDeliveryFiles(job) {
    try {
      await this.attachFilesOf(job, (done, of) => deliveryAttaching(job.deliver_id, done, of));
      return true;
    } catch (err) {
      this.log('warn', `delivery ${job.deliver_id || ''} not sent: ${err.message}`);
      if (job.deliver_id) {
        this.seen?.add(job.deliver_id);
        this.hub.send(deliveryFailed(job.deliver_id, err.message, err.trouble));
      }
      return false;
    }
  }

  /**
   * Waits until an automatic send may type: the model idle (never while it streams) and the
   * person not typing (no key pressed in the box within `holdMs`; no upper limit, the hold is
   * reported instead). False when the job was dropped meanwhile.
   */
  async waitToType(job) {
    const { timers } = this;
    for (;;) {
      const idle = await waitFor(() => job.dropped || this.idle, { timeoutMs: DEFAULT_TIMEOUT_MS, everyMs: 100, timers });
      if (job.dropped) return false;
      if (!idle) throw new Error('tab stayed busy (still streaming) / 标签页一直在输出');
      if (this.personTyping && !(await this.hold(job))) return false;
      if (this.idle && !this.personTyping) return true; // else: wait for the person's turn, or hold again
    }
  }

  /**
   * Holds `job` while the person types: reports `held` now and every HELD_EVERY_MS while it
   * lasts (the hub restarts its arrival window on each), and shows it in the panel. Resolves
   * when the person stopped (true) or the job was dropped (false).
   */
  async hold(job) {
    const report = () => { if (job.deliver_id) this.hub.send(deliveryHeld(job.deliver_id)); };
    let reported = Date.now();
    report();
    job.held = true;
    this.onChange?.();
    try {
      await waitFor(() => {
        if (job.dropped || !this.personTyping) return true;
        if (Date.now() - reported >= HELD_EVERY_MS) {
          reported = Date.now();
          report();
        }
        return false;
      }, { timeoutMs: Infinity, everyMs: 100, timers: this.timers });
    } finally {
      job.held = false;
      this.onChange?.();
    }
    return !job.dropped;
  }

  /**
   * `flow_event` of an agent session (docs/agents.md): when the hub pauses or ends it, its deliveries
   * not yet typed are dropped (Stop acts within 1 s, and a paused session sends nothing).
   */
  agentEvent(ev) {
    if (!['paused', 'ended'].includes(ev.state) || !ev.run_id) return;
    const ofSession = (job) => job.kind === 'deliver' && job.agent && String(job.agent.session) === String(ev.run_id);
    const kept = this.queue.filter((job) => !ofSession(job));
    for (const job of this.queue) if (ofSession(job) && job.deliver_id) this.seen?.add(job.deliver_id);
    const changed = kept.length !== this.queue.length;
    this.queue = kept;
    if (this.current && ofSession(this.current) && !this.current.typing) this.current.dropped = true;
    if (changed) this.onChange?.();
  }
}

/**
 * What the runner waits for once a task was sent: the end of the turn that answers it, site
 * trouble, the page's reply when no matching request started within `DOM_FALLBACK_AFTER_MS` or
 * the stream was a parser miss, or the task's timeout. A parser miss whose page shows no reply
 * either fails the task with `trouble: parser_miss` and a reason naming the adapter.
 */
class TaskWait {
  constructor(runner, id, timeoutMs) {
    this.runner = runner;
    this.id = id;
    this.timeoutMs = timeoutMs;
    this.started = false;
    this.done = false;
    this.missed = null;
    this.timers = [];
    // Baseline of reply elements, taken before sending.
    this.dom = new DomReplyWatcher({ doc: runner.doc, adapter: runner.adapter, timers: runner.timers });
    this.promise = new Promise((resolve) => { this.resolve = resolve; });
    runner.waiters.add(this);
    this.off = runner.capture.on((kind, turn, detail) => {
      if (turn?.taskId !== this.id) return;
      if (kind === 'turn_start') { this.started = true; if (!this.missed) this.dom.stop(); }
      if (kind === 'parser_miss') this.parserMiss(detail.reason);
    });
  }

  /** Starts the clocks (after sending); resolves with `{ok, error?, trouble?}`. */
  arm(deadline) {
    const { timers } = this.runner;
    const left = () => Math.max(0, deadline - Date.now());
    this.runner.capture.noteSend();
    this.timers.push(timers.setTimeout(() => this.finish({
      ok: false, error: `no complete reply before the task timeout / 任务超时 (${this.timeoutMs} ms)`,
    }), left()));
    this.timers.push(timers.setTimeout(() => this.domFallback(), Math.min(DOM_FALLBACK_AFTER_MS, left())));
    this.timers.push(timers.setTimeout(() => {
      if (!this.started && !this.dom.sawSomething) this.finish({ ok: false, error: 'no reply started after sending / 发送后没有回复' });
    }, Math.min(TURN_START_MS, left())));
    return this.promise;
  }

  /** Network capture saw no matching request: read the reply from the page instead. */
  domFallback() {
    if (this.started || this.done) return;
    this.runner.log('warn', 'no stream captured, reading the reply from the page / 未捕获到网络流，改读页面');
    this.readPage();
  }

  /** The stream that answers this task carried no answer the adapter could read. */
  parserMiss(reason) {
    if (this.done || this.missed) return;
    this.missed = reason;
    this.runner.log('warn', `${reason}: reading the reply from the page / 网络解析失败，改读页面`);
    this.timers.push(this.runner.timers.setTimeout(() => {
      if (!this.done) this.finish({ ok: false, error: `${reason} (the page showed no reply either / 页面上也没有回复)`, trouble: 'parser_miss' });
    }, PAGE_READ_AFTER_MISS_MS));
    this.readPage();
  }

  readPage() {
    this.dom.start((text) => {
      if (this.done || (this.started && !this.missed)) return;
      this.runner.claimTask(); // a late stream must not answer this task a second time
      this.runner.capture.domTurn(text, this.id);
      this.finish({ ok: true });
    });
  }

  finish(result) {
    if (this.done) return;
    this.done = true;
    this.dom.stop();
    this.off?.();
    for (const t of this.timers) this.runner.timers.clearTimeout(t);
    this.runner.waiters.delete(this);
    this.resolve(result);
  }
}
