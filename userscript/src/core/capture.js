/**
 * Turns intercepted response bytes into protocol frames: one intercepted chat-stream response is
 * one turn; the adapter's parser yields answer deltas (sent as `chunk`), reasoning (kept out of
 * the answer), `done` and `error`; the turn closes with `turn_end` carrying the exact full text.
 * Site trouble (HTTP 429, captcha or login page, rate-limit codes) becomes a `trouble` event.
 * A turn that ends with no answer text and no trouble (a renamed text field, a plain JSON body
 * instead of the stream) is a *parser miss*: never an empty `turn_end`; the `parser_miss` event
 * lets the tab read the reply from the page instead (docs/reliability.md).
 *
 * A reply that comes again after a reload of the page keeps its `turn_id` (turn-memory.js): such a
 * turn is announced (`flow_start`, `turn_start`) only once its first text says which turn it is.
 *
 * Images of the answer come back in its text as `![alt](url)`, once each, after the words (docs/files.md
 * "Back / 回传"): those the stream carried (`image` events), else — when the stream carried none, or
 * announced one without an address (`pending`) — those the reply shows on the page at the end of the turn
 * (dom-fallback.js `replyImages`). They go as a last `chunk` too, so the chunks still add up to the text.
 */
import { chunk, flowReport, turnEnd } from './protocol.js';
import { pageImageUrls, replyImages } from './dom-fallback.js';
import { imagesSuffix, uniqueImages } from '../adapters/lib/images.js';

const SAMPLE_BYTES = 4096;
const RECORD_LIMIT_BYTES = 8 * 1024 * 1024;
/** At the end of a reply the page's images are read once the body closed (at most this long after the end). */
export const BODY_END_WAIT_MS = 800;
/** …and after this moment for the page to render the end of the reply. */
export const IMAGE_SETTLE_MS = 60;
/** How long an image the stream announced without an address may take to show on the page. */
export const PENDING_IMAGE_WAIT_MS = 30_000;
const IMAGE_POLL_MS = 200;

/** Generic reading of an HTTP status and body sample, used when the adapter has no opinion. */
export function genericTrouble(status, sample = '', contentType = '') {
  if (status === 429) return 'rate limited (HTTP 429) / 请求过于频繁';
  if (status === 401) return 'login required (HTTP 401) / 需要登录';
  if (/captcha|challenge|cf-please-wait|verify you are human|人机验证|验证码|滑块/i.test(sample)) {
    return `captcha or challenge page (HTTP ${status}) / 需要人机验证`;
  }
  if (status === 403) return 'forbidden: login expired or blocked (HTTP 403) / 登录失效或被拒绝';
  if (status >= 400) return `site error (HTTP ${status}) / 站点返回错误`;
  if (status >= 200 && status < 300 && /text\/html/i.test(contentType) && /<form|login|sign in|登录/i.test(sample)) {
    return 'login page instead of a reply / 返回了登录页';
  }
  return null;
}

/** The reason a parser miss is reported with: it names the adapter, not the site. */
export function parserMissReason(adapterName) {
  return `parser_miss: ${adapterName} adapter found no answer / ${adapterName} 适配器没有解析到回复`;
}

/** How long after a send the requests no adapter matched are noted (debug log, `unmatched`). */
const UNMATCHED_WINDOW_MS = 15_000;
const UNMATCHED_KEEP = 20;

let turnCounter = 0;
function newTurnId() {
  turnCounter += 1;
  const rand = Math.random().toString(36).slice(2, 8);
  return `t-${Date.now().toString(36)}-${turnCounter}-${rand}`;
}

/** One reply being captured. */
class Turn {
  constructor(capture, meta) {
    this.capture = capture;
    this.meta = meta;
    this.id = newTurnId();
    this.text = '';
    this.pending = ''; // answer text parsed but not yet sent as a chunk
    this.pendingReasoning = ''; // thinking parsed but not yet sent
    this.seq = 0;
    this.reasoningChars = 0;
    this.parser = null;
    this.closed = false;
    this.decoder = new TextDecoder();
    this.sample = '';
    this.held = [];
    this.troubleChecked = false;
    this.taskId = capture.claimTask();
    this.images = []; // {url, alt} the stream carried
    this.pendingImages = 0; // images the stream announced without an address (read from the page)
    this.bodyEnded = false;
  }

  /** Error statuses and HTML bodies are held back until a sample is judged for trouble. */
  get suspicious() {
    return this.meta.status >= 400 || /text\/html/i.test(this.meta.contentType || '');
  }

  push(bytes) {
    if (this.raw && this.rawBytes + bytes.length <= RECORD_LIMIT_BYTES) {
      this.raw.push(bytes.slice());
      this.rawBytes += bytes.length;
    }
    if (this.closed) return;
    if (this.suspicious && !this.troubleChecked) {
      this.held.push(bytes);
      this.sample += this.decoder.decode(bytes, { stream: true });
      if (this.sample.length >= SAMPLE_BYTES) this.releaseHeld();
      return;
    }
    if (this.sample.length < SAMPLE_BYTES) this.sample += this.decoder.decode(bytes, { stream: true });
    this.feed(() => this.parser.push(bytes));
  }

  /** Judges the held sample; feeds the held bytes to the parser when it is not trouble. */
  releaseHeld() {
    this.checkTrouble();
    if (this.closed) return false;
    const held = this.held;
    this.held = [];
    for (const bytes of held) this.feed(() => this.parser.push(bytes));
    return !this.closed;
  }

  checkTrouble() {
    this.troubleChecked = true;
    const { adapter } = this.capture;
    let reason = null;
    try {
      reason = adapter.trouble ? adapter.trouble(this.meta.status, this.sample) : null;
    } catch (err) {
      this.capture.log('warn', `adapter.trouble failed: ${err.message}`);
    }
    reason = reason || genericTrouble(this.meta.status, this.sample, this.meta.contentType);
    if (reason) this.fail(reason);
  }

  feed(call) {
    let events;
    try {
      events = call() || [];
    } catch (err) {
      this.capture.log('error', `${this.capture.adapter.name} parser failed: ${err.message}`);
      this.fail(`parser error: ${err.message}`);
      return;
    }
    for (const ev of events) {
      if (this.closed) return;
      this.event(ev);
    }
    this.flush();
  }

  /**
   * A turn that may be the reply cut by a reload: once its text says so, it takes that reply's id
   * (and task, and who typed its prompt); false while it cannot tell yet.
   */
  settle(final) {
    const { memory } = this.capture;
    const verdict = memory.judge(this.resume, this.prompt, this.text, final);
    if (verdict === 'wait') return false;
    if (verdict === 'same') {
      this.id = this.resume.id;
      this.taskId = this.taskId || this.resume.task_id || undefined;
      this.hubTyped = this.hubTyped || this.resume.hub_typed;
      this.resumed = true;
      // Sent again from its start: what the hub already has is not sent twice.
      if (this.text.startsWith(String(this.resume.prefix || '').slice(0, this.text.length))) {
        this.seq = Number(this.resume.seq) || 0;
        this.skip = Number(this.resume.sent) || 0;
        this.sentChars = this.skip;
      }
    }
    this.resume = null;
    this.capture.announce(this);
    return true;
  }

  /** One `chunk` per network read at most: the deltas parsed from it, joined. */
  flush() {
    if (!this.pending && !this.pendingReasoning) return;
    if (this.resume && !this.settle(false)) return;
    if (this.skip) {
      const drop = Math.min(this.skip, this.pending.length);
      this.pending = this.pending.slice(drop);
      this.skip -= drop;
      if (!this.pending && !this.pendingReasoning) return;
    }
    const text = this.pending;
    const reasoning = this.pendingReasoning;
    this.pending = '';
    this.pendingReasoning = '';
    this.capture.hub.send(chunk(this.id, this.seq, text, reasoning || undefined));
    this.seq += 1;
    this.sentChars = (this.sentChars || 0) + text.length;
    this.capture.memory?.note(this); // the id, seq and count a reload may need
    if (this.seq === 1) this.capture.emit('streaming', this);
  }

  event(ev) {
    switch (ev.type) {
      case 'delta':
        if (!ev.text) return;
        this.text += ev.text;
        this.pending += ev.text;
        return;
      case 'reasoning':
        this.reasoningChars += (ev.text || '').length;
        this.pendingReasoning += ev.text || '';
        this.capture.emit('reasoning', this);
        return;
      case 'image':
        if (ev.pending) this.pendingImages += 1;
        else if (ev.url) this.images.push({ url: ev.url, alt: ev.alt || '' });
        return;
      case 'done':
        this.finish();
        return;
      case 'error':
        // A body that ended before the end marker with no answer at all was not understood.
        if (ev.code === 'incomplete' && this.text === '') this.miss();
        else this.fail(ev.reason || `site error${ev.code ? ` ${ev.code}` : ''}`, ev.code);
        return;
      default:
        this.capture.log('warn', `unknown parser event ${ev.type}`);
    }
  }

  end() {
    this.bodyEnded = true;
    if (this.closed) return;
    if (this.suspicious && !this.troubleChecked && !this.releaseHeld()) return;
    this.feed(() => this.parser.end());
    // A 200 that carried no answer may still be trouble in disguise (JSON error, captcha JSON).
    if (!this.closed && this.text === '' && !this.troubleChecked) this.checkTrouble();
    if (!this.closed) this.finish();
  }

  /** The stream carried no answer the adapter could read: the page is read instead. */
  miss() {
    if (this.closed) return;
    if (this.resume) this.settle(true);
    this.flush();
    this.closed = true;
    const reason = parserMissReason(this.capture.adapter.name);
    this.capture.log('warn', `${reason} (${this.meta.contentType || 'no content type'})`);
    this.capture.hub.send(flowReport(this.id, 'flow_end', { status: 'failed', fragmentCount: this.seq }));
    this.capture.emit('parser_miss', this, { reason });
    this.capture.closeTurn(this);
  }

  fail(reason, code) {
    if (this.closed) return;
    if (this.resume) this.settle(true);
    this.flush();
    this.closed = true;
    this.capture.hub.send(flowReport(this.id, 'flow_end', { status: 'failed', fragmentCount: this.seq }));
    this.capture.emit('trouble', this, { reason, code });
    this.capture.closeTurn(this);
  }

  finish() {
    if (this.closed) return;
    if (this.resume) this.settle(true);
    // An empty answer is never a success (an image-only answer is not empty).
    if (this.text === '' && this.images.length === 0 && this.pendingImages === 0) { this.miss(); return; }
    this.flush();
    const fromPage = this.capture.doc && (this.images.length === 0 || this.pendingImages > 0);
    if (!fromPage) { this.complete(this.images); return; }
    this.closed = true; // nothing more is parsed; the turn ends once the page's images are read
    this.capture.pageImages(this).then((found) => this.complete(found), (err) => {
      this.capture.log('warn', `reading the reply's images failed: ${err.message}`);
      this.complete([]);
    });
  }

  /** The answer with its images appended (each once), then `flow_end` and `turn_end`. */
  complete(images) {
    this.closed = true;
    const suffix = imagesSuffix(this.text, uniqueImages([...this.images, ...images], this.capture.doc?.baseURI));
    if (suffix) {
      this.text += suffix;
      this.pending += suffix;
      this.flush();
    }
    if (this.text === '') { this.closed = false; this.miss(); return; } // the page showed no image either
    this.capture.memory?.note(this, { ended: true });
    this.capture.hub.send(flowReport(this.id, 'flow_end', { status: 'finished', fragmentCount: this.seq }));
    this.capture.hub.send(turnEnd(this.id, this.text, this.taskId, { source: 'network' }));
    this.capture.emit('turn_end', this);
    this.capture.closeTurn(this);
  }
}

/**
 * Owns the turns of one tab. `claimTask()` is asked by each new turn for the task id it answers
 * (the task runner hands out the id of a task that was just sent, once).
 */
export class TurnCapture {
  constructor({ adapter, hub, log, claimTask, memory = null, record = false, doc = null, timers = null }) {
    this.record = record; // debug: keep the raw bytes of each stream for fixtures
    this.doc = doc; // the page, read for a reply's images at its end (none: only the stream's images)
    this.timers = timers || { setTimeout: (fn, ms) => setTimeout(fn, ms) };
    this.memory = memory; // TurnMemory: turn ids kept across a reload (none: every turn is new)
    this.adapter = adapter;
    this.hub = hub;
    this.log = log;
    this.claimTask = claimTask || (() => undefined);
    this.active = new Set();
    this.listeners = new Set();
    this.lastTurn = null;
    this.sentAt = 0;
    /** Requests seen shortly after a send that no adapter matched (where an endpoint moved). */
    this.unmatched = [];
  }

  /** A prompt was just sent (by a task or by the person): note unmatched requests for a while. */
  noteSend(now = Date.now()) {
    this.sentAt = now;
  }

  on(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(kind, turn, detail) {
    for (const fn of this.listeners) {
      try { fn(kind, turn, detail); } catch (err) { this.log('error', `capture listener: ${err.message}`); }
    }
  }

  /** True while a reply is streaming in this tab. */
  get busy() {
    return this.active.size > 0;
  }

  matches(url, method) {
    let matched = false;
    try {
      matched = Boolean(this.adapter.matchRequest(url, method));
    } catch (err) {
      this.log('warn', `${this.adapter.name}.matchRequest failed: ${err.message}`);
    }
    if (!matched && this.sentAt && Date.now() - this.sentAt < UNMATCHED_WINDOW_MS) this.noteUnmatched(url, method);
    return matched;
  }

  noteUnmatched(url, method) {
    const raw = url && typeof url === 'object' && 'url' in url ? url.url : String(url);
    const m = String(method || 'GET').toUpperCase();
    this.unmatched.push({ method: m, url: raw, at: Date.now() });
    if (this.unmatched.length > UNMATCHED_KEEP) this.unmatched.shift();
    this.log('info', `after a send, no adapter matched ${m} ${raw} / 发送后的请求未被适配器识别`);
  }

  /** Called by the interceptor for each matching response; returns the byte sink. */
  begin(meta) {
    const turn = new Turn(this, meta);
    if (this.record) { turn.raw = []; turn.rawBytes = 0; }
    try {
      turn.parser = this.adapter.createParser();
    } catch (err) {
      this.log('error', `${this.adapter.name}.createParser failed: ${err.message}`);
      return null;
    }
    if (meta.requestBody && this.adapter.promptFromRequest) {
      try { turn.prompt = this.adapter.promptFromRequest(meta.requestBody); } catch { turn.prompt = null; }
    }
    if (this.doc) {
      // The images the page shows before this reply: never taken for this reply's (a stale reply element).
      try { turn.imagesBefore = pageImageUrls(this.doc, this.adapter); } catch { turn.imagesBefore = new Set(); }
    }
    this.active.add(turn);
    this.lastTurn = turn;
    // Only a request whose body was read can say it carried no prompt (a resume request).
    turn.resume = meta.requestBody ? this.memory?.candidate(turn.prompt ?? null) || null : null;
    if (!turn.resume) this.announce(turn);
    return turn;
  }

  /** The turn's id is known: its `flow_start`, and `turn_start` to the listeners. */
  announce(turn) {
    this.hub.send(flowReport(turn.id, 'flow_start', { status: 'streaming' }));
    this.emit('turn_start', turn);
    this.memory?.note(turn); // after the listeners: they say whether the hub typed its prompt
  }

  /**
   * The images the newest reply shows on the page (not those the page showed when the turn began), read
   * once the stream's body closed (or
   * BODY_END_WAIT_MS passed) and the page had IMAGE_SETTLE_MS to render it; while the stream announced
   * more images than the page shows, read again until PENDING_IMAGE_WAIT_MS.
   */
  async pageImages(turn) {
    const sleep = (ms) => new Promise((resolve) => { this.timers.setTimeout(resolve, ms); });
    const started = Date.now();
    while (!turn.bodyEnded && Date.now() - started < BODY_END_WAIT_MS) await sleep(25);
    await sleep(IMAGE_SETTLE_MS);
    const before = turn.imagesBefore || new Set();
    const read = () => replyImages(this.doc, this.adapter).filter((img) => !before.has(img.url));
    let found = read();
    const deadline = Date.now() + PENDING_IMAGE_WAIT_MS;
    while (turn.pendingImages > 0 && found.length < turn.pendingImages && Date.now() < deadline) {
      await sleep(IMAGE_POLL_MS);
      found = read();
    }
    if (found.length < turn.pendingImages) {
      this.log('warn', `${turn.pendingImages - found.length} announced image(s) never showed on the page / 有图片未在页面上显示`);
    }
    return found;
  }

  /** A reply read from the page by the fallback: reported as one chunk and a turn_end. */
  domTurn(text, taskId) {
    const turnId = newTurnId();
    this.hub.send(chunk(turnId, 0, text));
    this.hub.send(turnEnd(turnId, text, taskId, { source: 'dom' }));
    this.emit('dom_turn_end', { id: turnId, taskId, text });
  }

  closeTurn(turn) {
    this.active.delete(turn);
    this.emit('idle_check', turn);
  }
}
