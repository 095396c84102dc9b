// ==UserScript==
// @name              AIcard
// @name:zh-CN        AIcard 多模型协作
// @namespace         https://github.com/aicard/aicard
// @version           0.1.0
// @description       Turns your web AI chat tabs into one team: streams replies to the local AIcard hub, types its tasks, shows flow progress. / 把网页 AI 对话标签页组成一个团队：回复实时发往本地 AIcard hub，自动输入任务，显示流程进度。
// @description:zh-CN 把网页 AI 对话标签页组成一个团队：回复实时发往本地 AIcard hub，自动输入任务，显示流程进度。
// @author            AIcard
// @license           MIT
// @match             https://chat.deepseek.com/*
// @match             https://www.doubao.com/*
// @match             https://yuanbao.tencent.com/*
// @match             https://tongyi.aliyun.com/*
// @match             https://www.qianwen.com/*
// @match             https://chat.qwen.ai/*
// @match             https://chatgpt.com/*
// @match             https://chat.openai.com/*
// @match             https://claude.ai/*
// @match             https://gemini.google.com/*
// @match             https://kimi.moonshot.cn/*
// @match             https://www.kimi.com/*
// @match             https://chatglm.cn/*
// @match             https://yiyan.baidu.com/*
// @match             https://xinghuo.xfyun.cn/*
// @match             https://doubao.com/*
// @match             https://www.tongyi.com/*
// @match             https://qianwen.com/*
// @match             https://kimi.com/*
// @match             https://ernie.baidu.com/*
// @run-at            document-start
// @early-start
// @grant             GM_getValue
// @grant             GM_setValue
// @grant             GM_xmlhttpRequest
// @grant             GM.xmlHttpRequest
// @grant             GM_info
// @grant             GM_registerMenuCommand
// @grant             unsafeWindow
// @connect           127.0.0.1
// @connect           localhost
// @noframes
// @updateURL         __AICARD_HUB_URL__/aicard.user.js
// @downloadURL       __AICARD_HUB_URL__/aicard.user.js
// ==/UserScript==

(() => {
  // src/adapters/lib/patch.js
  function createPatchState(options = {}) {
    const state = {
      root: {},
      cursor: { p: "", o: (options.initialOp || "set").toLowerCase() }
    };
    const appendStrings = options.appendStrings || (() => false);
    const batchCursorIsSelf = options.batchCursor === "self";
    function apply(event) {
      if (event === null || typeof event !== "object" || Array.isArray(event)) return [];
      if (typeof event.p === "string") state.cursor.p = event.p;
      if (typeof event.o === "string") state.cursor.o = event.o.toLowerCase();
      const applied = [];
      applyOp(state.cursor.p, state.cursor.o, event.v, applied);
      if (!batchCursorIsSelf && (state.cursor.o === "patch" || state.cursor.o === "batch") && applied.length > 0) {
        const last = applied[applied.length - 1];
        state.cursor = { p: last.pathString, o: last.op };
      }
      return applied;
    }
    function applyOp(path, op, value, applied) {
      if (op === "patch" || op === "batch") {
        if (!Array.isArray(value)) return;
        for (const sub of value) {
          if (sub === null || typeof sub !== "object") continue;
          const subPath = joinPath(path, typeof sub.p === "string" ? sub.p : "");
          applyOp(subPath, typeof sub.o === "string" ? sub.o.toLowerCase() : "set", sub.v, applied);
        }
        return;
      }
      const segments = splitPath(path);
      let effective = op;
      if (typeof value === "string" && (op === "set" || op === "replace") && appendStrings(path)) effective = "append";
      const resolved = applyLeaf(segments, effective, value);
      applied.push({ path: resolved, pathString: path, op: effective, value });
    }
    function applyLeaf(segments, op, value) {
      if (segments.length === 0) {
        if (op === "append" && isObject(state.root) && isObject(value)) Object.assign(state.root, value);
        else if (op !== "remove" && op !== "delete") state.root = isObject(value) ? value : { value };
        return [];
      }
      if (!isObject(state.root) && !Array.isArray(state.root)) state.root = {};
      let parent = state.root;
      const resolved = [];
      for (let i = 0; i < segments.length - 1; i += 1) {
        const key2 = resolveKey(parent, segments[i]);
        resolved.push(key2);
        if (parent[key2] === null || typeof parent[key2] !== "object") parent[key2] = /^\d+$/.test(segments[i + 1]) ? [] : {};
        parent = parent[key2];
      }
      const last = segments[segments.length - 1];
      const key = last === "-" && Array.isArray(parent) ? parent.length : resolveKey(parent, last);
      resolved.push(key);
      const current = parent[key];
      switch (op) {
        case "append":
          if (typeof current === "string" && typeof value === "string") parent[key] = current + value;
          else if (Array.isArray(current)) Array.isArray(value) ? current.push(...value) : current.push(value);
          else if (isObject(current) && isObject(value)) Object.assign(current, value);
          else parent[key] = value;
          break;
        case "remove":
        case "delete":
          if (Array.isArray(parent)) parent.splice(key, 1);
          else delete parent[key];
          break;
        case "truncate":
          if ((typeof current === "string" || Array.isArray(current)) && Number.isInteger(value)) {
            parent[key] = current.slice(0, value);
          }
          break;
        case "add":
          if (Array.isArray(parent) && key >= parent.length) parent.push(value);
          else parent[key] = value;
          break;
        default:
          parent[key] = value;
      }
      return resolved;
    }
    return {
      apply,
      get root() {
        return state.root;
      },
      set root(value) {
        state.root = value;
      },
      get cursor() {
        return { ...state.cursor };
      }
    };
  }
  function isObject(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
  }
  function resolveKey(container, segment) {
    if (Array.isArray(container) && /^-?\d+$/.test(segment)) {
      const n = Number(segment);
      return n < 0 ? Math.max(0, container.length + n) : n;
    }
    return segment;
  }
  var pathCache = /* @__PURE__ */ new Map();
  function splitPath(path) {
    const key = String(path);
    let segments = pathCache.get(key);
    if (!segments) {
      segments = key.split("/").filter((s) => s !== "").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
      if (pathCache.size > 512) pathCache.clear();
      pathCache.set(key, segments);
    }
    return segments;
  }
  function joinPath(parent, child) {
    if (!child) return parent;
    if (!parent) return child;
    return `${parent.replace(/\/$/, "")}/${child.replace(/^\//, "")}`;
  }

  // src/adapters/lib/utf8.js
  function createUtf8Decoder() {
    const decoder = new TextDecoder("utf-8");
    return {
      /** Decode one read; returns the complete characters it finishes. */
      decode(bytes) {
        if (!bytes || bytes.length === 0) return "";
        return decoder.decode(bytes, { stream: true });
      },
      /** Flush at end of body; a dangling partial character becomes U+FFFD. */
      flush() {
        return decoder.decode();
      }
    };
  }
  function toBytes(chunk2) {
    if (chunk2 instanceof Uint8Array) return chunk2;
    if (typeof chunk2 === "string") return new TextEncoder().encode(chunk2);
    if (chunk2 instanceof ArrayBuffer) return new Uint8Array(chunk2);
    if (ArrayBuffer.isView(chunk2)) return new Uint8Array(chunk2.buffer, chunk2.byteOffset, chunk2.byteLength);
    throw new TypeError("stream chunk must be bytes / 数据块必须是字节");
  }

  // src/adapters/lib/sse.js
  function createSseSplitter() {
    let buffer = "";
    let scanned = 0;
    let event = "";
    let data = [];
    let id = null;
    let hasField = false;
    function dispatch(out) {
      if (hasField && data.length > 0) {
        out.push({ event: event || "message", data: data.join("\n"), id });
      }
      event = "";
      data = [];
      hasField = false;
    }
    function line(text, out) {
      if (text === "") {
        dispatch(out);
        return;
      }
      if (text.charCodeAt(0) === 58) return;
      const colon = text.indexOf(":");
      let field = text;
      let value = "";
      if (colon >= 0) {
        field = text.slice(0, colon);
        value = text.slice(colon + 1);
        if (value.charCodeAt(0) === 32) value = value.slice(1);
      }
      hasField = true;
      if (field === "data") data.push(value);
      else if (field === "event") event = value;
      else if (field === "id") id = value;
    }
    function drain(final) {
      const out = [];
      let start2 = 0;
      for (let i = scanned; i < buffer.length; i += 1) {
        const c = buffer.charCodeAt(i);
        if (c === 10) {
          line(buffer.slice(start2, i), out);
          start2 = i + 1;
        } else if (c === 13) {
          if (i + 1 >= buffer.length && !final) break;
          line(buffer.slice(start2, i), out);
          if (buffer.charCodeAt(i + 1) === 10) i += 1;
          start2 = i + 1;
        }
      }
      buffer = buffer.slice(start2);
      scanned = buffer.length > 0 && buffer.charCodeAt(buffer.length - 1) === 13 ? buffer.length - 1 : buffer.length;
      if (final) {
        if (buffer.length > 0) line(buffer, out);
        buffer = "";
        scanned = 0;
        dispatch(out);
      }
      return out;
    }
    return {
      push(text) {
        buffer += text;
        return drain(false);
      },
      end() {
        return drain(true);
      }
    };
  }

  // src/adapters/lib/stream.js
  var INCOMPLETE = "the reply stream ended before the site marked it finished / 回复流在站点标记完成之前就结束了";
  function createOutput() {
    const events = [];
    let finished = false;
    return {
      delta(text) {
        if (!finished && typeof text === "string" && text !== "") events.push({ type: "delta", text });
      },
      reasoning(text) {
        if (!finished && typeof text === "string" && text !== "") events.push({ type: "reasoning", text });
      },
      /** An image of the answer (lib/images.js): `{url, alt}`, or `{pending: true, alt}` for one the page shows. */
      image({ url, alt, pending } = {}) {
        if (finished) return;
        if (pending) events.push({ type: "image", pending: true, alt: String(alt ?? "") });
        else if (typeof url === "string" && url !== "") events.push({ type: "image", url, alt: String(alt ?? "") });
      },
      done() {
        if (finished) return;
        finished = true;
        events.push({ type: "done" });
      },
      error(reason, code) {
        if (finished) return;
        finished = true;
        const event = { type: "error", reason: String(reason) };
        if (code !== void 0 && code !== null && code !== "") event.code = String(code);
        events.push(event);
      },
      get finished() {
        return finished;
      },
      take() {
        return events.splice(0, events.length);
      }
    };
  }
  function parseJson(text) {
    if (typeof text !== "string") return void 0;
    const t = text.trim();
    if (t === "") return void 0;
    const c = t[0];
    if (c !== "{" && c !== "[" && c !== '"' && t !== "true" && t !== "false" && !/^-?\d/.test(t)) return void 0;
    try {
      return JSON.parse(t);
    } catch {
      return void 0;
    }
  }
  function finishAtEof(out, { eofIsDone, trouble: trouble12, sample }) {
    if (out.finished) return;
    const reason = trouble12 ? trouble12(200, sample) : null;
    if (reason) out.error(reason, "trouble");
    else if (eofIsDone) out.done();
    else out.error(INCOMPLETE, "incomplete");
  }
  function sseParser({ onEvent: onEvent10, eofIsDone = false, trouble: trouble12 = null, init: init3 = () => ({}), atEof = null }) {
    return function createParser3() {
      const decoder = createUtf8Decoder();
      const splitter = createSseSplitter();
      const out = createOutput();
      const ctx = init3();
      let sample = "";
      const handle = (records) => {
        for (const record of records) {
          if (out.finished) break;
          try {
            onEvent10(record, out, ctx);
          } catch {
          }
        }
      };
      const feed = (text) => {
        if (sample.length < 4096) sample += text.slice(0, 4096 - sample.length);
        handle(splitter.push(text));
      };
      return {
        push(bytes) {
          feed(decoder.decode(toBytes(bytes)));
          return out.take();
        },
        end() {
          feed(decoder.flush());
          handle(splitter.end());
          if (atEof && !out.finished) atEof(out, ctx);
          finishAtEof(out, { eofIsDone, trouble: trouble12, sample });
          return out.take();
        }
      };
    };
  }
  function dig(value, ...keys) {
    let v = value;
    for (const k of keys) {
      if (v === null || v === void 0) return void 0;
      if (typeof k === "number" && Array.isArray(v) && k < 0) v = v[v.length + k];
      else v = v[k];
    }
    return v;
  }

  // src/adapters/lib/trouble.js
  var REASONS = {
    rateLimit: "rate limited by the site (HTTP 429) / 站点限流（HTTP 429）",
    login: "not logged in to the site, please log in in this tab / 站点未登录，请在此标签页登录",
    captcha: "the site asks for a captcha or human check / 站点要求人机验证",
    forbidden: "the site refused the request (HTTP 403) / 站点拒绝了请求（HTTP 403）",
    server: (status) => `the site failed (HTTP ${status}) / 站点出错（HTTP ${status}）`,
    client: (status) => `the site rejected the request (HTTP ${status}) / 站点拒绝了请求（HTTP ${status}）`,
    htmlPage: "the site returned a web page instead of a reply stream (login or check page?) / 站点返回了网页而不是回复流（登录页或验证页？）"
  };
  var TROUBLE_KINDS = Object.freeze(["rate_limited", "captcha", "login", "network", "site_error", "parser_miss", "content_filter", "attachment_refused"]);
  var CONTENT_FILTER = "content_filter";
  var RATE_LIMITED = /rate.?limit|too many requests|usage limit|HTTP 429|限流|频繁|使用上限|次数上限/i;
  var LOGIN_REASON = /log ?in|sign in|session token is stale|登录|会话令牌已过期/i;
  var CAPTCHA_REASON = /captcha|human check|人机验证|验证码/i;
  var CONTENT_FILTER_REASON = /content filter|moderation|内容过滤|内容审核/i;
  function troubleKind(reason, kinds = TROUBLE_KINDS) {
    const r = typeof reason === "string" ? reason : "";
    if (r === REASONS.htmlPage || r === REASONS.forbidden) return "site_error";
    if (CONTENT_FILTER_REASON.test(r)) return kinds.includes(CONTENT_FILTER) ? CONTENT_FILTER : "site_error";
    if (r === REASONS.rateLimit || RATE_LIMITED.test(r)) return "rate_limited";
    if (r === REASONS.captcha || CAPTCHA_REASON.test(r)) return "captcha";
    if (r === REASONS.login || LOGIN_REASON.test(r)) return "login";
    return "site_error";
  }
  var CAPTCHA = /captcha|challenge-platform|cf-chl|turnstile|verify you are human|are you a robot|人机验证|滑块验证|验证码|rgv587_flag|FAIL_SYS_USER_VALIDATE/i;
  var LOGIN = /please log ?in|sign in to continue|login required|not logged in|unauthori[sz]ed|请登录|登录已过期|未登录|重新登录/i;
  function makeTrouble({ codes = {}, codePatterns = [] } = {}) {
    return function trouble12(status, bodySample) {
      const body = typeof bodySample === "string" ? bodySample : "";
      const head = body.slice(0, 4096);
      const code = findCode(head, codes, codePatterns);
      if (status === 429) return REASONS.rateLimit;
      if (code) return codes[code];
      if (status === 401) return REASONS.login;
      if (status === 403) return CAPTCHA.test(head) ? REASONS.captcha : REASONS.forbidden;
      if (status >= 500) return REASONS.server(status);
      if (status >= 400) {
        if (CAPTCHA.test(head)) return REASONS.captcha;
        if (LOGIN.test(head)) return REASONS.login;
        return REASONS.client(status);
      }
      const trimmed = head.replace(/^\uFEFF/, "").trimStart();
      if (/^<(!doctype|html|head|body)/i.test(trimmed)) {
        if (CAPTCHA.test(head)) return REASONS.captcha;
        if (LOGIN.test(head)) return REASONS.login;
        return REASONS.htmlPage;
      }
      if (trimmed.startsWith("{") && !/^\{\s*"(event_data|choices|communication|v|p|message|type)"/.test(trimmed)) {
        if (CAPTCHA.test(head)) return REASONS.captcha;
        if (LOGIN.test(head)) return REASONS.login;
      }
      return null;
    };
  }
  function findCode(text, codes, patterns) {
    const keys = Object.keys(codes);
    if (keys.length === 0) return null;
    for (const pattern of patterns) {
      const m2 = pattern.exec(text);
      if (m2 && Object.prototype.hasOwnProperty.call(codes, m2[1])) return m2[1];
    }
    const re = /"(?:code|error_code|errorCode|status)"\s*:\s*"?(-?\d+)"?/g;
    let m;
    while ((m = re.exec(text)) !== null) {
      if (Object.prototype.hasOwnProperty.call(codes, m[1])) return m[1];
    }
    return null;
  }

  // src/adapters/lib/url.js
  var BASE = "https://relative.invalid/";
  function parseRequestUrl(url) {
    const raw = url && typeof url === "object" && "url" in url ? url.url : String(url);
    let parsed;
    try {
      parsed = new URL(raw, BASE);
    } catch {
      return null;
    }
    const host = parsed.host === "relative.invalid" ? "" : parsed.hostname.toLowerCase();
    return { host, path: parsed.pathname, search: parsed.search, params: parsed.searchParams };
  }
  function endpointMatcher({ hosts: hosts12, paths, methods = ["POST"] }) {
    const hostSet = new Set(hosts12.map((h) => h.toLowerCase()));
    return function matchRequest(url, method) {
      const m = String(method || "GET").toUpperCase();
      if (!methods.includes(m)) return false;
      const u = parseRequestUrl(url);
      if (!u) return false;
      if (u.host !== "" && !hostSet.has(u.host)) return false;
      return paths.some((re) => re.test(u.path));
    };
  }

  // src/adapters/lib/upload.js
  var MB = 1024 * 1024;
  var IMAGES = Object.freeze(["image/png", "image/jpeg", "image/webp", "image/gif"]);
  var DOCS = Object.freeze(["application/pdf", ".pdf", ".txt", ".md", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".csv", ".json"]);
  function uploadTable({ how = "input", accept, maxBytes, maxFiles, input = [], target = [], chip, busy, error }) {
    return Object.freeze({
      how,
      accept: Object.freeze([...accept]),
      maxBytes,
      maxFiles,
      input: Object.freeze([...input, 'input[type="file"]']),
      target: Object.freeze([...target]),
      chip: Object.freeze([...chip]),
      busy: Object.freeze([...busy, '[role="progressbar"]']),
      error: Object.freeze([...error])
    });
  }

  // src/adapters/chatgpt.js
  var hosts = ["chatgpt.com", "chat.openai.com"];
  function isObject2(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
  }
  function visibleMessage(root) {
    const message = isObject2(root) ? root.message : null;
    if (!isObject2(message) || dig(message, "author", "role") !== "assistant") return null;
    if (message.recipient !== void 0 && message.recipient !== "all") return null;
    return message;
  }
  function streamedFor(ctx, message) {
    const id = message.id || "current";
    let s = ctx.streamed.get(id);
    if (!s) {
      s = { text: "", thoughts: "" };
      ctx.streamed.set(id, s);
    }
    return s;
  }
  function fullText(message) {
    const content = message.content || {};
    if (content.content_type === "text" || content.content_type === "multimodal_text") {
      return { kind: "text", text: (Array.isArray(content.parts) ? content.parts : []).filter((p) => typeof p === "string").join("") };
    }
    if (content.content_type === "thoughts") {
      const thoughts = Array.isArray(content.thoughts) ? content.thoughts : [];
      return { kind: "thoughts", text: thoughts.map((t) => t && typeof t.content === "string" ? t.content : "").join("\n") };
    }
    return null;
  }
  function syncMessage(out, ctx) {
    const message = visibleMessage(ctx.patch.root);
    if (!message) return;
    const full = fullText(message);
    if (!full) return;
    const streamed = streamedFor(ctx, message);
    const before = streamed[full.kind];
    if (full.text.length > before.length && full.text.startsWith(before)) {
      const piece = full.text.slice(before.length);
      if (full.kind === "text") out.delta(piece);
      else out.reasoning(piece);
    }
    if (!before.startsWith(full.text)) streamed[full.kind] = full.text;
  }
  function streamAppend(out, ctx, leaf) {
    const path = leaf.path;
    if (path.length === 0) return false;
    if (path[0] !== "message" || path[1] !== "content") return null;
    const message = visibleMessage(ctx.patch.root);
    if (!message) return null;
    if (leaf.op !== "append" || typeof leaf.value !== "string") return false;
    const content = message.content || {};
    const streamed = streamedFor(ctx, message);
    if (path[2] === "parts" && path.length === 4 && Array.isArray(content.parts) && path[3] === content.parts.length - 1 && (content.content_type === "text" || content.content_type === "multimodal_text")) {
      out.delta(leaf.value);
      streamed.text += leaf.value;
      return true;
    }
    if (path[2] === "thoughts" && path.length === 5 && path[4] === "content" && content.content_type === "thoughts" && Array.isArray(content.thoughts) && path[3] === content.thoughts.length - 1) {
      out.reasoning(leaf.value);
      streamed.thoughts += leaf.value;
      return true;
    }
    return false;
  }
  function takeImages(out, ctx) {
    const message = isObject2(ctx.patch.root) ? ctx.patch.root.message : null;
    if (!isObject2(message) || message.content?.content_type !== "multimodal_text") return;
    const role = dig(message, "author", "role");
    if (role !== "tool" && role !== "assistant") return;
    for (const part of Array.isArray(message.content.parts) ? message.content.parts : []) {
      if (!isObject2(part) || part.content_type !== "image_asset_pointer" || typeof part.asset_pointer !== "string") continue;
      if (ctx.images.has(part.asset_pointer)) continue;
      ctx.images.add(part.asset_pointer);
      out.image({ pending: true, alt: dig(part, "metadata", "dalle", "prompt") || "" });
    }
  }
  function checkEnd(out, ctx) {
    const root = ctx.patch.root;
    if (isObject2(root) && root.error) {
      out.error(typeof root.error === "string" ? root.error : root.error.message || "ChatGPT error / ChatGPT 出错", dig(root.error, "code") || "error");
      return;
    }
    const message = visibleMessage(root);
    if (message && message.status === "finished_successfully" && message.end_turn === true) out.done();
  }
  function onEvent(record, out, ctx) {
    if (record.event === "delta_encoding") return;
    const data = record.data.trim();
    if (data === "[DONE]") {
      out.done();
      return;
    }
    const frame = parseJson(data);
    if (!isObject2(frame)) return;
    if (typeof frame.type === "string" && !("v" in frame) && !("message" in frame)) {
      if (frame.type === "message_stream_complete") out.done();
      else if (frame.type === "error" || frame.type === "moderation_error") {
        out.error(frame.message || frame.error || "ChatGPT error / ChatGPT 出错", frame.code || frame.type);
      }
      return;
    }
    if (!("v" in frame) && ("message" in frame || "error" in frame)) {
      ctx.patch.root = frame;
      syncMessage(out, ctx);
    } else if (!("p" in frame) && isObject2(frame.v) && "message" in frame.v) {
      ctx.patch.root = frame.v;
      syncMessage(out, ctx);
    } else if ("v" in frame) {
      let slow = false;
      for (const leaf of ctx.patch.apply(frame)) if (streamAppend(out, ctx, leaf) === false) slow = true;
      if (slow) syncMessage(out, ctx);
    } else {
      return;
    }
    takeImages(out, ctx);
    checkEnd(out, ctx);
  }
  var trouble = makeTrouble();
  var chatgpt_default = {
    name: "chatgpt",
    hosts,
    matchRequest: endpointMatcher({ hosts, paths: [/^\/backend-(api|anon)\/(f\/)?conversation$/] }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      const messages = body && Array.isArray(body.messages) ? body.messages : [];
      for (let i = messages.length - 1; i >= 0; i -= 1) {
        const parts = dig(messages[i], "content", "parts");
        if (Array.isArray(parts)) {
          const text = parts.filter((p) => typeof p === "string");
          if (text.length) return text.join("\n");
        }
      }
      return null;
    },
    createParser: sseParser({
      onEvent,
      trouble,
      init: () => ({ patch: createPatchState({ initialOp: "append" }), streamed: /* @__PURE__ */ new Map(), images: /* @__PURE__ */ new Set() })
    }),
    input: {
      selectors: ['#prompt-textarea[contenteditable="true"]', "div.ProseMirror#prompt-textarea", "textarea#prompt-textarea", 'div[contenteditable="true"].ProseMirror'],
      kind: "contenteditable"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/chatgpt.md).
    upload: uploadTable({
      how: "input",
      accept: [],
      maxBytes: 512 * MB,
      maxFiles: 10,
      input: ["input#upload-files", 'input[type="file"][multiple]'],
      chip: [".composer-attachment", '[data-testid="file-attachment"]'],
      busy: [".composer-attachment-loading"],
      error: [".composer-attachment-error"]
    }),
    send: {
      selectors: ['button[data-testid="send-button"]', "#composer-submit-button", 'button[aria-label="Send prompt"]', 'button[aria-label="发送提示"]'],
      key: "Enter"
    },
    trouble
  };

  // src/adapters/chatglm.js
  var hosts2 = ["chatglm.cn"];
  var FIELDS = { text: "text", think: "think" };
  function takeImages2(item, out, ctx) {
    for (const img of Array.isArray(item.image) ? item.image : []) {
      const url = img && typeof img.image_url === "string" ? img.image_url : null;
      if (!url || !/^https?:\/\//i.test(url) || ctx.images.has(url)) continue;
      ctx.images.add(url);
      out.image({ url, alt: typeof img.alt === "string" ? img.alt : "" });
    }
  }
  function keyState(ctx, key) {
    let s = ctx.keys.get(key);
    if (!s) {
      s = { text: "" };
      ctx.keys.set(key, s);
    }
    return s;
  }
  function newText(ctx, state, piece, isFull) {
    const acc = state.text;
    if (isFull || ctx.mode === "cumulative") {
      if (piece.startsWith(acc)) {
        state.text = piece;
        return piece.slice(acc.length);
      }
      if (!isFull && !acc.startsWith(piece)) state.text = piece;
      return "";
    }
    if (ctx.mode === "incremental" || acc === "") {
      state.text = acc + piece;
      return piece;
    }
    if (piece.length > acc.length && piece.startsWith(acc)) {
      ctx.mode = "cumulative";
      state.text = piece;
      return piece.slice(acc.length);
    }
    if (piece === acc) return "";
    ctx.mode = "incremental";
    state.text = acc + piece;
    return piece;
  }
  function onEvent2(record, out, ctx) {
    const data = record.data.trim();
    if (data === "[DONE]") {
      out.done();
      return;
    }
    const frame = parseJson(data);
    if (!frame || typeof frame !== "object" || Array.isArray(frame)) return;
    if (typeof frame.status === "number" && frame.status !== 0) {
      out.error(frame.message || frame.msg || "ChatGLM error / 智谱清言出错", frame.status);
      return;
    }
    const lastError = frame.last_error;
    if (frame.status === "intervene" || lastError && typeof lastError === "object" && (lastError.code || lastError.msg)) {
      const reason = lastError && (lastError.intervene_text || lastError.msg) || "ChatGLM stopped the reply / 智谱清言中止了回复";
      out.error(reason, lastError && lastError.code || frame.status);
      return;
    }
    for (const part of Array.isArray(frame.parts) ? frame.parts : []) {
      if (!part || typeof part !== "object" || part.role && part.role !== "assistant") continue;
      const partKey = part.logic_id || part.id || "";
      const isFull = part.status === "finish";
      for (const item of Array.isArray(part.content) ? part.content : []) {
        if (item && item.type === "image") takeImages2(item, out, ctx);
        const field = item && FIELDS[item.type];
        if (!field || typeof item[field] !== "string") continue;
        const piece = newText(ctx, keyState(ctx, `${partKey}:${item.type}`), item[field], isFull);
        if (item.type === "think") out.reasoning(piece);
        else out.delta(piece);
      }
    }
    if (frame.status === "finish") out.done();
  }
  var trouble2 = makeTrouble({ codes: { 40102: REASONS.login, 40103: REASONS.login } });
  var chatglm_default = {
    name: "chatglm",
    hosts: hosts2,
    matchRequest: endpointMatcher({
      hosts: hosts2,
      paths: [/^\/chatglm\/backend-api\/assistant\/stream$/, /^\/chatglm\/backend-api\/v1\/stream$/]
    }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      const messages = body && Array.isArray(body.messages) ? body.messages : [];
      const last = messages[messages.length - 1];
      if (!last) return null;
      if (typeof last.content === "string") return last.content;
      const items = Array.isArray(last.content) ? last.content : [];
      const text = items.filter((c) => c && c.type === "text" && typeof c.text === "string").map((c) => c.text);
      return text.length ? text.join("\n") : null;
    },
    createParser: sseParser({ onEvent: onEvent2, trouble: trouble2, init: () => ({ keys: /* @__PURE__ */ new Map(), mode: null, images: /* @__PURE__ */ new Set() }) }),
    input: {
      selectors: [".input-box-inner textarea", "textarea.scroll-display-none", 'textarea[placeholder*="清言"]', "div.input-wrap textarea"],
      kind: "textarea"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/chatglm.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 100 * MB,
      maxFiles: 10,
      input: ["input.upload-file-input"],
      chip: [".file-item"],
      busy: [".file-item-loading"],
      error: [".file-item-error"]
    }),
    send: {
      selectors: [".input-box-inner .enter", ".enter_icon", "div.enter", 'button[aria-label="发送"]'],
      key: "Enter"
    },
    trouble: trouble2
  };

  // src/adapters/claude.js
  var hosts3 = ["claude.ai"];
  function onEvent3(record, out, ctx) {
    const frame = parseJson(record.data);
    if (!frame || typeof frame !== "object") return;
    const type = frame.type || record.event;
    switch (type) {
      case "content_block_start": {
        const block = frame.content_block || {};
        ctx.blocks.set(frame.index, block.type);
        if (block.type === "text") out.delta(block.text);
        else if (block.type === "thinking") out.reasoning(block.thinking);
        return;
      }
      case "content_block_delta": {
        const delta = frame.delta || {};
        const blockType = ctx.blocks.get(frame.index);
        if (delta.type === "text_delta" && (blockType === void 0 || blockType === "text")) out.delta(delta.text);
        else if (delta.type === "thinking_delta") out.reasoning(delta.thinking);
        return;
      }
      case "message_delta":
        if (frame.delta && frame.delta.stop_reason) ctx.stopReason = frame.delta.stop_reason;
        return;
      case "message_stop":
        out.done();
        return;
      case "error": {
        const err = frame.error || {};
        out.error(err.message || "Claude error / Claude 出错", err.type || "error");
        return;
      }
      case "completion":
        out.delta(frame.completion);
        if (frame.stop_reason) out.done();
        return;
      default:
        if (frame.error && typeof frame.error === "object") {
          out.error(frame.error.message || "Claude error / Claude 出错", frame.error.type || "error");
        }
    }
  }
  var trouble3 = makeTrouble();
  var claude_default = {
    name: "claude",
    hosts: hosts3,
    matchRequest: endpointMatcher({
      hosts: hosts3,
      paths: [
        /^\/api\/organizations\/[^/]+\/chat_conversations\/[^/]+\/(completion|retry_completion)$/,
        /^\/api\/append_message$/
      ]
    }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      if (!body) return null;
      if (typeof body.prompt === "string") return body.prompt;
      return typeof body.completion?.prompt === "string" ? body.completion.prompt : null;
    },
    createParser: sseParser({
      onEvent: onEvent3,
      trouble: trouble3,
      init: () => ({ blocks: /* @__PURE__ */ new Map(), stopReason: null }),
      atEof: (out, ctx) => {
        if (ctx.stopReason) out.done();
      }
    }),
    input: {
      selectors: [
        'div.ProseMirror[contenteditable="true"]',
        '[data-testid="chat-input"][contenteditable="true"]',
        'div[contenteditable="true"][aria-label*="Claude"]'
      ],
      kind: "contenteditable"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/claude.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 30 * MB,
      maxFiles: 20,
      input: ['input[data-testid="file-upload"]'],
      chip: [".attachment-thumbnail", '[data-testid="file-thumbnail"]'],
      busy: [".attachment-uploading"],
      error: [".attachment-error"]
    }),
    send: {
      selectors: ['button[aria-label="Send message"]', 'button[aria-label="Send Message"]', 'button[aria-label="发送消息"]'],
      key: "Enter"
    },
    trouble: trouble3
  };

  // src/adapters/lib/citations.js
  var MARKER = /\[(reference|citation):(\d{1,6})\]/g;
  var PREFIXES = ["[reference:", "[citation:"];
  var LONGEST = "[reference:".length + 6;
  function couldBeMarker(tail) {
    if (tail.length > LONGEST) return false;
    for (const p of PREFIXES) {
      if (p.startsWith(tail)) return true;
      if (tail.startsWith(p) && /^\d*$/.test(tail.slice(p.length))) return true;
    }
    return false;
  }
  function createMarkerFilter() {
    let held = "";
    return {
      push(text) {
        const markers = [];
        if (typeof text !== "string" || text === "") return { text: "", markers };
        let s = (held + text).replace(MARKER, (_, kind, n) => {
          markers.push({ kind, n: Number(n) });
          return "";
        });
        held = "";
        const i = s.lastIndexOf("[");
        if (i >= 0 && couldBeMarker(s.slice(i))) {
          held = s.slice(i);
          s = s.slice(0, i);
        }
        return { text: s, markers };
      },
      flush() {
        const s = held;
        held = "";
        return s;
      }
    };
  }
  function sourcesBlock(sources) {
    const seen = /* @__PURE__ */ new Set();
    const lines = [];
    for (const s of Array.isArray(sources) ? sources : []) {
      if (!s || typeof s !== "object" || typeof s.url !== "string") continue;
      const url = s.url.trim();
      if (!/^https?:\/\/\S+$/i.test(url) || seen.has(url)) continue;
      seen.add(url);
      const title = typeof s.title === "string" ? s.title.replace(/\s+/g, " ").trim() : "";
      lines.push(`${lines.length + 1}. ${title ? `${title} — ${url}` : url}`);
    }
    return lines.length ? `

来源 / Sources
${lines.join("\n")}` : "";
  }

  // src/adapters/deepseek.js
  var hosts4 = ["chat.deepseek.com"];
  var CONTENT_FILTERED = "DeepSeek withdrew the reply (content filter) / DeepSeek 撤回了回复（内容过滤）";
  function answer(out, ctx, text) {
    const { text: clean, markers } = ctx.markers.push(text);
    for (const m of markers) if (m.kind === "citation") ctx.cited.push({ cite: m.n });
    out.delta(clean);
  }
  function emitFragmentText(out, ctx, fragment, text) {
    if (!fragment || typeof text !== "string") return;
    if (fragment.type === "RESPONSE") answer(out, ctx, text);
    else if (fragment.type === "THINK") out.reasoning(text);
  }
  function emitFragments(out, ctx, fragments) {
    for (const f of Array.isArray(fragments) ? fragments : []) emitFragmentText(out, ctx, f, f && f.content);
  }
  function emitApplied(out, ctx, leaf) {
    const root = ctx.patch.root;
    const path = leaf.path;
    if (path[0] !== "response") return;
    if (path.length === 4 && path[1] === "fragments" && path[3] === "references" && Array.isArray(leaf.value)) {
      if (dig(root, "response", "fragments", path[2], "type") === "RESPONSE") ctx.cited.push({ refs: leaf.value });
      return;
    }
    if (leaf.op !== "append") return;
    if (path.length === 4 && path[1] === "fragments" && path[3] === "content") {
      emitFragmentText(out, ctx, dig(root, "response", "fragments", path[2]), leaf.value);
    } else if (path.length === 2 && path[1] === "fragments") {
      emitFragments(out, ctx, Array.isArray(leaf.value) ? leaf.value : [leaf.value]);
    } else if (path.length === 2 && path[1] === "content" && typeof leaf.value === "string") {
      answer(out, ctx, leaf.value);
    } else if (path.length === 2 && path[1] === "thinking_content" && typeof leaf.value === "string") {
      out.reasoning(leaf.value);
    }
  }
  var isObject3 = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  function citedSources(ctx) {
    const response = dig(ctx.patch.root, "response");
    if (!isObject3(response)) return [];
    const fragments = Array.isArray(response.fragments) ? response.fragments.filter(isObject3) : [];
    const byId = new Map(fragments.map((f) => [f.id, f]));
    const pool = [response.search_results, ...fragments.map((f) => f.results)].flatMap((list) => Array.isArray(list) ? list.filter(isObject3) : []);
    const sources = [];
    for (const c of ctx.cited) {
      if (c.refs) {
        for (const ref of c.refs) {
          const f = isObject3(ref) ? byId.get(ref.id) : void 0;
          if (!f) continue;
          if (isObject3(f.result)) sources.push(f.result);
          else if (Array.isArray(f.results)) sources.push(...f.results.filter(isObject3));
        }
      } else {
        const hit = pool.find((r) => r.cite_index !== null && r.cite_index !== void 0 && Number(r.cite_index) === c.cite);
        if (hit) sources.push(hit);
      }
    }
    return sources;
  }
  function finish(out, ctx) {
    if (out.finished) return;
    out.delta(ctx.markers.flush());
    out.delta(sourcesBlock(citedSources(ctx)));
    out.done();
  }
  function onEvent4(record, out, ctx) {
    if (record.event === "hint") {
      const hint = parseJson(record.data);
      if (hint && hint.type === "error") out.error(hint.content || "DeepSeek error / DeepSeek 出错", hint.finish_reason);
      return;
    }
    if (record.event === "close") {
      finish(out, ctx);
      return;
    }
    if (record.event !== "message") return;
    const frame = parseJson(record.data);
    if (!frame || typeof frame !== "object" || Array.isArray(frame)) return;
    if (frame.code !== void 0 && frame.code !== 0 && frame.msg !== void 0 && !("v" in frame)) {
      out.error(frame.msg, frame.code);
      return;
    }
    if (!("p" in frame) && isObject3(frame.v) && "response" in frame.v) {
      ctx.patch.root = frame.v;
      const response2 = frame.v.response || {};
      if (typeof response2.thinking_content === "string") out.reasoning(response2.thinking_content);
      if (typeof response2.content === "string") answer(out, ctx, response2.content);
      emitFragments(out, ctx, response2.fragments);
    } else if ("v" in frame) {
      for (const leaf of ctx.patch.apply(frame)) emitApplied(out, ctx, leaf);
    } else {
      return;
    }
    const response = dig(ctx.patch.root, "response");
    const status = dig(response, "status");
    if (status === "CONTENT_FILTER" || dig(response, "quasi_status") === "CONTENT_FILTER") out.error(CONTENT_FILTERED, "content_filter");
    else if (status === "FINISHED" || status === "INCOMPLETE") finish(out, ctx);
  }
  var trouble4 = makeTrouble({
    codes: {
      40003: REASONS.login,
      40002: REASONS.login
    }
  });
  var deepseek_default = {
    name: "deepseek",
    hosts: hosts4,
    matchRequest: endpointMatcher({ hosts: hosts4, paths: [/^\/api\/v0\/chat\/(completion|regenerate|resume_stream|continue)$/] }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      return body && typeof body.prompt === "string" ? body.prompt : null;
    },
    createParser: sseParser({
      onEvent: onEvent4,
      trouble: trouble4,
      init: () => ({
        patch: createPatchState({
          initialOp: "SET",
          appendStrings: (p) => /(^|\/)(content|thinking_content)$/.test(p),
          batchCursor: "self"
        }),
        markers: createMarkerFilter(),
        cited: []
      })
    }),
    input: {
      selectors: ["textarea#chat-input", 'textarea[placeholder*="DeepSeek"]', 'textarea[placeholder*="发送消息"]'],
      kind: "textarea"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/deepseek.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 100 * MB,
      maxFiles: 50,
      input: ["input.ds-upload-input"],
      chip: [".ds-file-card"],
      busy: [".ds-file-card__loading"],
      error: [".ds-file-card--error"]
    }),
    send: {
      selectors: [
        'div[role="button"]._7436101',
        'div.ds-button--primary[role="button"]',
        'button[aria-label="发送"]',
        'button[aria-label="Send"]'
      ],
      key: "Enter"
    },
    trouble: trouble4
  };

  // src/adapters/doubao.js
  var hosts5 = ["www.doubao.com", "doubao.com"];
  var TEXT_BLOCK = 1e4;
  var THINKING_BLOCK = 10040;
  var CREATION_BLOCK = 2074;
  function creationImage(creation) {
    const image = creation && typeof creation === "object" ? creation.image : null;
    if (!image || typeof image !== "object") return null;
    for (const key of ["image_ori_raw", "image_ori", "image_preview", "image_thumb"]) {
      const v = image[key];
      const url = typeof v === "string" ? v : v && typeof v === "object" ? v.url : null;
      if (typeof url === "string" && /^https?:\/\//i.test(url)) return url;
    }
    return null;
  }
  function takeCreations(block, ctx) {
    const creations = dig(block, "content", "creation_block", "creations");
    for (const creation of Array.isArray(creations) ? creations : []) {
      const url = creationImage(creation);
      if (!url || ctx.imageKeys.has(url.split("?")[0])) continue;
      ctx.imageKeys.add(url.split("?")[0]);
      ctx.images.push({ url, alt: typeof creation.image?.description === "string" ? creation.image.description : "" });
    }
  }
  function init() {
    return {
      primary: "",
      // STREAM_MSG_NOTIFY + patch_object 1 + CHUNK_DELTA
      mirror: "",
      // tts_content (patch_object 111) + CHUNK_DELTA
      mirrorExtendsAt: -1,
      // primary length at which the mirror was last checked to extend it
      mirrorExtends: false,
      source: "primary",
      // what has been streamed so far
      emitted: 0,
      // characters of `source` already streamed
      reasoning: "",
      reasoningEmitted: 0,
      images: [],
      // generated images (creation blocks) not yet reported
      imageKeys: /* @__PURE__ */ new Set()
      // their addresses without the query
    };
  }
  function takeBlocks(blocks, ctx) {
    if (!Array.isArray(blocks)) return;
    for (const block of blocks) {
      if (!block || typeof block !== "object") continue;
      if (block.block_type === TEXT_BLOCK || block.block_type === void 0 && dig(block, "content", "text_block")) {
        const text = dig(block, "content", "text_block", "text");
        if (typeof text === "string") ctx.primary += text;
      } else if (block.block_type === CREATION_BLOCK || dig(block, "content", "creation_block")) {
        takeCreations(block, ctx);
      } else if (block.block_type === THINKING_BLOCK) {
        const tb = dig(block, "content", "thinking_block") || {};
        const text = typeof tb.text === "string" ? tb.text : tb.content;
        if (typeof text === "string") ctx.reasoning += text;
      }
    }
  }
  function flush(out, ctx) {
    for (const img of ctx.images.splice(0)) out.image(img);
    if (ctx.reasoning.length > ctx.reasoningEmitted) {
      out.reasoning(ctx.reasoning.slice(ctx.reasoningEmitted));
      ctx.reasoningEmitted = ctx.reasoning.length;
    }
    let source = "primary";
    if (ctx.mirror.length > ctx.primary.length) {
      if (ctx.mirrorExtendsAt !== ctx.primary.length) {
        ctx.mirrorExtends = ctx.mirror.startsWith(ctx.primary);
        ctx.mirrorExtendsAt = ctx.primary.length;
      }
      if (ctx.mirrorExtends) source = "mirror";
    }
    const text = ctx[source];
    if (text.length <= ctx.emitted) return;
    if (source !== ctx.source) {
      if (!text.startsWith(ctx[ctx.source].slice(0, ctx.emitted))) return;
      ctx.source = source;
    }
    out.delta(text.slice(ctx.emitted));
    ctx.emitted = text.length;
  }
  function finishWithBrief(out, ctx, brief) {
    if (typeof brief !== "string" || brief.length <= ctx.emitted) return;
    if (brief.startsWith(ctx[ctx.source].slice(0, ctx.emitted))) {
      out.delta(brief.slice(ctx.emitted));
      ctx.emitted = brief.length;
    }
  }
  function onCurrent(record, out, ctx) {
    const frame = parseJson(record.data);
    if (!frame || typeof frame !== "object") return;
    switch (record.event) {
      case "STREAM_MSG_NOTIFY":
        takeBlocks(dig(frame, "content", "content_block"), ctx);
        if (typeof dig(frame, "content", "tts_content") === "string") ctx.mirror += frame.content.tts_content;
        break;
      case "STREAM_CHUNK":
        for (const op of Array.isArray(frame.patch_op) ? frame.patch_op : []) {
          if (!op || op.patch_type === 2) continue;
          if (op.patch_object === 1) takeBlocks(dig(op, "patch_value", "content_block"), ctx);
          else if (op.patch_object === 111 && typeof dig(op, "patch_value", "tts_content") === "string") {
            ctx.mirror += op.patch_value.tts_content;
          }
        }
        break;
      case "CHUNK_DELTA":
        if (typeof frame.text === "string") {
          ctx.primary += frame.text;
          ctx.mirror += frame.text;
        }
        break;
      case "SSE_REPLY_END":
        if (frame.end_type === 1) {
          const brief = dig(frame, "msg_finish_attr", "brief");
          flush(out, ctx);
          finishWithBrief(out, ctx, brief);
          out.done();
        } else if (frame.end_type === 3) {
          flush(out, ctx);
          out.done();
        }
        return;
      case "STREAM_ERROR":
        out.error(frame.error_msg || "Doubao error / 豆包出错", frame.error_code || "error");
        return;
      default:
        return;
    }
    flush(out, ctx);
  }
  function onSamantha(frame, out) {
    if (typeof frame.code === "number" && frame.code !== 0) {
      out.error(frame.message || frame.msg || "Doubao error / 豆包出错", frame.code);
      return;
    }
    if (frame.event_type === 2003) {
      out.done();
      return;
    }
    if (frame.event_type === 2005) {
      const ed2 = parseJson(frame.event_data) || {};
      out.error(ed2.message || ed2.error_msg || "Doubao error / 豆包出错", ed2.code || ed2.error_code || 2005);
      return;
    }
    if (frame.event_type !== 2001) return;
    const ed = parseJson(frame.event_data);
    if (!ed || !ed.message) return;
    const type = ed.message.content_type;
    if (type === 2001 || type === 2008) {
      const content = parseJson(ed.message.content);
      if (content && typeof content.text === "string") out.delta(content.text);
      if (ed.is_finish === true) out.done();
    }
  }
  function onEvent5(record, out, ctx) {
    if (record.event !== "message") {
      onCurrent(record, out, ctx);
      return;
    }
    const frame = parseJson(record.data);
    if (frame && typeof frame === "object" && ("event_type" in frame || "code" in frame)) onSamantha(frame, out);
  }
  var trouble5 = makeTrouble({
    codes: {
      710022004: "Doubao rate limit, too many requests / 豆包限流，请求过于频繁",
      710012002: REASONS.login
    }
  });
  var doubao_default = {
    name: "doubao",
    hosts: hosts5,
    matchRequest: endpointMatcher({ hosts: hosts5, paths: [/^\/chat\/completion$/, /^\/samantha\/chat\/completion$/] }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      if (!body || !Array.isArray(body.messages) || body.messages.length === 0) return null;
      const message = body.messages[body.messages.length - 1];
      const current = dig(message, "content_block", 0, "content", "text_block", "text");
      if (typeof current === "string") return current;
      const legacy = parseJson(message.content);
      return legacy && typeof legacy.text === "string" ? legacy.text : null;
    },
    createParser: sseParser({ onEvent: onEvent5, trouble: trouble5, init }),
    input: {
      selectors: ['textarea[data-testid="chat_input_input"]', "textarea.semi-input-textarea", 'div[data-testid="chat_input"] textarea'],
      kind: "textarea"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/doubao.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 50 * MB,
      maxFiles: 50,
      input: ['input[data-testid="upload_file_input"]'],
      chip: [".file-card-wrapper"],
      busy: [".file-card-loading"],
      error: [".file-card-error"]
    }),
    send: {
      selectors: ['button[data-testid="chat_input_send_button"]', "#flow-end-msg-send", 'button[aria-label="发送"]'],
      key: "Enter"
    },
    trouble: trouble5
  };

  // src/adapters/lib/frames.js
  var XSSI_PREFIX = ")]}'";
  function createLengthPrefixedReader() {
    let buffer = "";
    let prefixChecked = false;
    let scan = null;
    function skipPrefix() {
      if (prefixChecked) return true;
      const trimmed = buffer.replace(/^\uFEFF/, "");
      if (trimmed.length < XSSI_PREFIX.length && XSSI_PREFIX.startsWith(trimmed)) return false;
      if (trimmed.startsWith(XSSI_PREFIX)) buffer = trimmed.slice(XSSI_PREFIX.length);
      prefixChecked = true;
      return true;
    }
    function next(final) {
      if (scan) return finishFrame(scan, null, final);
      let i = 0;
      while (i < buffer.length && /\s/.test(buffer[i])) i += 1;
      let digits = i;
      while (digits < buffer.length && buffer.charCodeAt(digits) >= 48 && buffer.charCodeAt(digits) <= 57) digits += 1;
      if (digits === buffer.length && !final) return void 0;
      let j = digits;
      while (j < buffer.length && /\s/.test(buffer[j])) j += 1;
      if (j >= buffer.length) return void 0;
      const length = digits > i ? Number(buffer.slice(i, digits)) : null;
      return finishFrame({ start: j, pos: j, depth: 0, inString: false }, length, final);
    }
    function finishFrame(state, length, final) {
      const end = scanJsonValue(buffer, state.start, state);
      if (end < 0) {
        scan = state;
        if (final) throw new SyntaxError("truncated frame at end of body / 数据帧在结尾被截断");
        return void 0;
      }
      scan = null;
      const text = buffer.slice(state.start, end);
      buffer = buffer.slice(end);
      return { length, value: JSON.parse(text) };
    }
    function drain(final) {
      const out = [];
      if (!skipPrefix()) return out;
      for (; ; ) {
        const frame = next(final);
        if (frame === void 0) break;
        out.push(frame.value);
      }
      if (final) buffer = "";
      return out;
    }
    return {
      push(text) {
        buffer += text;
        return drain(false);
      },
      end() {
        return drain(true);
      }
    };
  }
  function scanJsonValue(text, start2, state = { pos: start2, depth: 0, inString: false }) {
    const first = text[start2];
    if (first !== "[" && first !== "{") {
      const m = /\s/.exec(text.slice(start2));
      return m ? start2 + m.index : -1;
    }
    let { depth, inString } = state;
    let i = state.pos;
    for (; i < text.length; i += 1) {
      const c = text.charCodeAt(i);
      if (inString) {
        if (c === 92) {
          if (i + 1 >= text.length) break;
          i += 1;
        } else if (c === 34) inString = false;
      } else if (c === 34) inString = true;
      else if (c === 91 || c === 123) depth += 1;
      else if (c === 93 || c === 125) {
        depth -= 1;
        if (depth === 0) return i + 1;
      }
    }
    state.pos = i;
    state.depth = depth;
    state.inString = inString;
    return -1;
  }

  // src/adapters/lib/snapshot.js
  function createSnapshotDiffer() {
    let previous = "";
    return {
      next(full) {
        if (typeof full !== "string") return "";
        if (full.startsWith(previous)) {
          const suffix = full.slice(previous.length);
          previous = full;
          return suffix;
        }
        if (!previous.startsWith(full)) previous = full;
        return "";
      },
      /** Extend the snapshot by an incremental piece (no diff needed); returns the piece. */
      append(piece) {
        if (typeof piece !== "string") return "";
        previous += piece;
        return piece;
      },
      /** The latest snapshot. */
      get text() {
        return previous;
      }
    };
  }

  // src/adapters/gemini.js
  var hosts6 = ["gemini.google.com"];
  var ERRORS = {
    1037: "Gemini usage limit reached / Gemini 已达使用上限",
    1060: "Gemini blocked this IP address / Gemini 屏蔽了此 IP 地址",
    1013: "Gemini is temporarily unavailable / Gemini 暂时不可用",
    1096: "Gemini session token is stale, reload the page / Gemini 会话令牌已过期，请刷新页面",
    1157: "Gemini session token is stale, reload the page / Gemini 会话令牌已过期，请刷新页面"
  };
  function errorCode(entry) {
    const info = dig(entry, 5, 2);
    if (Array.isArray(info)) {
      for (const item of info) {
        const code = dig(item, 1, 0);
        if (typeof code === "number") return code;
      }
    }
    const status = dig(entry, 5, 0);
    return typeof status === "number" ? status : null;
  }
  var PLACEHOLDER = /https?:\/\/googleusercontent\.com\/image_generation_content\/\d+/g;
  var PLACEHOLDER_HEADS = ["http://googleusercontent.com/image_generation_content/", "https://googleusercontent.com/image_generation_content/"];
  function withoutPlaceholders(text, final) {
    const t = text.replace(PLACEHOLDER, "").replace(/\n{3,}/g, "\n\n");
    if (final) return t;
    for (let k = Math.min(t.length, PLACEHOLDER_HEADS[1].length + 12); k > 0; k -= 1) {
      const tail = t.slice(t.length - k);
      if (PLACEHOLDER_HEADS.some((h) => h.startsWith(tail) || tail.startsWith(h) && /^\d*$/.test(tail.slice(h.length)))) return t.slice(0, t.length - k);
    }
    return t;
  }
  function takeImages3(candidate, out, ctx) {
    const found = [];
    const generated = dig(candidate, 12, 7, 0);
    for (const [i, item] of (Array.isArray(generated) ? generated : []).entries()) {
      const alt = dig(item, 3, 5, 0);
      found.push({ url: dig(item, 0, 3, 3), alt: typeof alt === "string" ? alt : `Generated image ${i + 1}` });
    }
    const web = dig(candidate, 12, 1);
    for (const item of Array.isArray(web) ? web : []) {
      const alt = dig(item, 0, 4);
      found.push({ url: dig(item, 0, 0, 0), alt: typeof alt === "string" ? alt : "" });
    }
    for (const img of found) {
      if (typeof img.url !== "string" || !/^https?:\/\//i.test(img.url) || ctx.images.has(img.url)) continue;
      ctx.images.add(img.url);
      out.image(img);
    }
  }
  function onEntry(entry, out, ctx) {
    if (!Array.isArray(entry) || entry[0] !== "wrb.fr") return;
    if (typeof entry[2] !== "string") {
      const code = errorCode(entry);
      if (code !== null) out.error(ERRORS[code] || `Gemini error ${code} / Gemini 出错 ${code}`, code);
      return;
    }
    const payload = parseJson(entry[2]);
    if (!Array.isArray(payload)) return;
    const candidate = dig(payload, 4, 0);
    if (Array.isArray(candidate)) {
      const reasoning = dig(candidate, 37, 0, 0);
      if (typeof reasoning === "string") out.reasoning(ctx.reasoning.next(reasoning));
      const final = dig(candidate, 8, 0) === 2;
      const text = dig(candidate, 1, 0);
      if (typeof text === "string") {
        ctx.raw = text;
        out.delta(ctx.answer.next(withoutPlaceholders(text, final)));
      }
      takeImages3(candidate, out, ctx);
      if (final) out.done();
    }
    const tail = payload[2];
    if (tail && typeof tail === "object" && !Array.isArray(tail) && tail["44"] === true) out.done();
  }
  function createParser() {
    const decoder = createUtf8Decoder();
    const reader = createLengthPrefixedReader();
    const out = createOutput();
    const ctx = { answer: createSnapshotDiffer(), reasoning: createSnapshotDiffer(), images: /* @__PURE__ */ new Set(), raw: null };
    let sample = "";
    let broken = false;
    const handle = (frames) => {
      for (const frame of frames) {
        for (const entry of Array.isArray(frame) ? frame : []) {
          if (out.finished) return;
          onEntry(entry, out, ctx);
        }
      }
    };
    const feed = (text, final) => {
      if (sample.length < 4096) sample += text.slice(0, 4096 - sample.length);
      try {
        handle(reader.push(text));
        if (final) handle(reader.end());
      } catch {
        broken = true;
      }
    };
    return {
      push(bytes) {
        if (!broken) feed(decoder.decode(toBytes(bytes)), false);
        return out.take();
      },
      end() {
        if (!broken) feed(decoder.flush(), true);
        if (!out.finished && typeof ctx.raw === "string") out.delta(ctx.answer.next(withoutPlaceholders(ctx.raw, true)));
        if (broken && !out.finished) out.error(INCOMPLETE, "incomplete");
        finishAtEof(out, { eofIsDone: true, trouble: trouble6, sample });
        return out.take();
      }
    };
  }
  var trouble6 = makeTrouble({
    codes: ERRORS,
    // `[13,null,[["type.googleapis.com/…BardErrorInfo",[1037]]]]`
    codePatterns: [/\[\s*\d+\s*,\s*null\s*,\s*\[\s*\[\s*"[^"]*"\s*,\s*\[\s*(\d+)\s*\]/]
  });
  var gemini_default = {
    name: "gemini",
    hosts: hosts6,
    matchRequest: endpointMatcher({
      hosts: hosts6,
      paths: [/^(\/u\/\d+)?\/_\/BardChatUi\/data\/assistant\.lamda\.BardFrontendService\/StreamGenerate$/]
    }),
    promptFromRequest(bodyText) {
      if (typeof bodyText !== "string") return null;
      const freq = new URLSearchParams(bodyText).get("f.req");
      const outer = parseJson(freq);
      const inner = parseJson(dig(outer, 1));
      const prompt = dig(inner, 0, 0);
      return typeof prompt === "string" ? prompt : null;
    },
    createParser,
    input: {
      selectors: ['rich-textarea .ql-editor[contenteditable="true"]', 'div.ql-editor[contenteditable="true"][role="textbox"]', 'div[contenteditable="true"][aria-label*="prompt"]'],
      kind: "contenteditable"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/gemini.md).
    upload: uploadTable({
      how: ["drop", "paste"],
      accept: [...IMAGES, ...DOCS],
      maxBytes: 100 * MB,
      maxFiles: 10,
      target: ["div[xapfileselectordropzone]"],
      chip: [".xap-filed-upload-preview", ".file-preview-chip"],
      busy: [".file-preview-chip-loading"],
      error: [".file-upload-error"]
    }),
    send: {
      selectors: ["button.send-button", 'button[aria-label="Send message"]', 'button[aria-label="发送"]', 'button[mattooltip="Submit"]'],
      key: "Enter"
    },
    trouble: trouble6
  };

  // src/adapters/lib/connect.js
  var HEADER = 5;
  function createConnectReader() {
    let buffer = new Uint8Array(0);
    const decoder = new TextDecoder("utf-8");
    function append(bytes) {
      if (buffer.length === 0) {
        buffer = bytes.slice();
        return;
      }
      const joined = new Uint8Array(buffer.length + bytes.length);
      joined.set(buffer, 0);
      joined.set(bytes, buffer.length);
      buffer = joined;
    }
    function drain() {
      const out = [];
      let offset = 0;
      while (buffer.length - offset >= HEADER) {
        const flags = buffer[offset];
        const view = new DataView(buffer.buffer, buffer.byteOffset + offset + 1, 4);
        const length = view.getUint32(0, false);
        if (buffer.length - offset - HEADER < length) break;
        const payload = buffer.subarray(offset + HEADER, offset + HEADER + length);
        offset += HEADER + length;
        if (flags & 1) {
          out.push({ flags, end: Boolean(flags & 2), json: null, compressed: true });
          continue;
        }
        const text = decoder.decode(payload);
        out.push({ flags, end: Boolean(flags & 2), json: text.trim() === "" ? {} : JSON.parse(text) });
      }
      buffer = buffer.slice(offset);
      return out;
    }
    return {
      push(bytes) {
        append(bytes);
        return drain();
      },
      /** Bytes left over at end of body (a truncated frame) — 0 for a well-formed stream. */
      end() {
        const out = drain();
        const leftover = buffer.length;
        buffer = new Uint8Array(0);
        return { frames: out, leftover };
      }
    };
  }

  // src/adapters/kimi.js
  var hosts7 = ["www.kimi.com", "kimi.com", "kimi.moonshot.cn"];
  var trouble7 = makeTrouble({ codes: { 40100: REASONS.login, 40102: REASONS.login, 42900: REASONS.rateLimit } });
  function onLegacyEvent(record, out, ctx) {
    const frame = parseJson(record.data);
    if (!frame || typeof frame !== "object") return;
    switch (frame.event) {
      case "cmpl":
        out.delta(frame.text);
        return;
      case "k1":
        out.reasoning(frame.text);
        return;
      case "all_done":
        out.done();
        return;
      case "done":
        ctx.sawDone = true;
        return;
      case "error": {
        const err = frame.error || {};
        out.error(err.message || err.msg || "Kimi error / Kimi 出错", err.error_type || err.code || "error");
        return;
      }
      default:
    }
  }
  var createLegacyParser = sseParser({
    onEvent: onLegacyEvent,
    trouble: trouble7,
    init: () => ({ sawDone: false }),
    atEof: (out, ctx) => {
      if (ctx.sawDone) out.done();
    }
  });
  function onConnectFrame(frame, out, ctx) {
    if (frame.error) {
      out.error(frame.error.message || "Kimi error / Kimi 出错", frame.error.code || "error");
      return;
    }
    if (frame.done !== void 0) {
      out.done();
      return;
    }
    const mask = typeof frame.mask === "string" ? frame.mask : "";
    if (!frame.op || !mask) return;
    const message = frame.message;
    if (mask === "message" || mask.startsWith("message.")) {
      if (dig(message, "role") === "user") return;
      const status = dig(message, "status");
      if (status === "MESSAGE_STATUS_COMPLETED") out.done();
      else if (status === "MESSAGE_STATUS_FAILED") out.error("Kimi could not answer / Kimi 回答失败", status);
      return;
    }
    if (!frame.block) return;
    const kind = mask.startsWith("block.think") ? "think" : mask.startsWith("block.text") ? "text" : null;
    if (!kind) return;
    const piece = dig(frame.block, kind, "content");
    if (typeof piece !== "string") return;
    const key = `${frame.block.id}:${kind}`;
    let differ = ctx.blocks.get(key);
    if (!differ) {
      differ = createSnapshotDiffer();
      ctx.blocks.set(key, differ);
    }
    const emit = kind === "think" ? (t) => out.reasoning(t) : (t) => out.delta(t);
    if (frame.op === "append") emit(differ.append(piece));
    else emit(differ.next(piece));
  }
  function createConnectParser() {
    const reader = createConnectReader();
    const out = createOutput();
    const ctx = { blocks: /* @__PURE__ */ new Map() };
    const handle = (frames) => {
      for (const f of frames) {
        if (out.finished) break;
        if (f.compressed) out.error("compressed Connect frame not supported / 不支持压缩的 Connect 帧", "compressed");
        else if (f.end) {
          if (f.json && f.json.error) onConnectFrame({ error: f.json.error }, out, ctx);
          else out.done();
        } else {
          try {
            onConnectFrame(f.json, out, ctx);
          } catch {
          }
        }
      }
    };
    return {
      push(bytes) {
        handle(reader.push(bytes));
        return out.take();
      },
      end() {
        const { frames, leftover } = reader.end();
        handle(frames);
        if (!out.finished && leftover > 0) out.error(INCOMPLETE, "incomplete");
        finishAtEof(out, { eofIsDone: false, trouble: null, sample: "" });
        return out.take();
      }
    };
  }
  function createParser2() {
    let inner = null;
    return {
      push(chunk2) {
        const bytes = toBytes(chunk2);
        if (!inner) {
          if (bytes.length === 0) return [];
          inner = bytes[0] <= 3 ? createConnectParser() : createLegacyParser();
        }
        return inner.push(bytes);
      },
      end() {
        if (!inner) inner = createLegacyParser();
        return inner.end();
      }
    };
  }
  var kimi_default = {
    name: "kimi",
    hosts: hosts7,
    matchRequest: endpointMatcher({
      hosts: hosts7,
      paths: [/^\/api\/chat\/[^/]+\/completion\/stream$/, /^\/apiv2\/kimi\.gateway\.chat\.v1\.ChatService\/Chat$/]
    }),
    promptFromRequest(bodyText) {
      if (typeof bodyText !== "string") return null;
      const start2 = bodyText.indexOf("{");
      const end = bodyText.lastIndexOf("}");
      if (start2 < 0 || end < start2) return null;
      const body = parseJson(bodyText.slice(start2, end + 1));
      if (!body) return null;
      const legacy = dig(body, "messages", -1, "content");
      if (typeof legacy === "string") return legacy;
      const blocks = dig(body, "message", "blocks");
      if (Array.isArray(blocks)) {
        const text = blocks.map((b) => dig(b, "text", "content")).filter((t) => typeof t === "string");
        if (text.length) return text.join("\n");
      }
      return null;
    },
    createParser: createParser2,
    input: {
      selectors: [
        '.chat-input-editor[contenteditable="true"]',
        'div[data-lexical-editor="true"][contenteditable="true"]',
        '#msh-chatinput-editor[contenteditable="true"]'
      ],
      kind: "contenteditable"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/kimi.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 100 * MB,
      maxFiles: 50,
      input: ["input.hidden-input"],
      chip: [".attachment-item"],
      busy: [".attachment-item-loading"],
      error: [".attachment-item-error"]
    }),
    send: {
      selectors: [".send-button-container:not(.disabled) .send-button", ".send-button", "#send-button", 'button[data-testid="msh-chatinput-send-button"]'],
      key: "Enter"
    },
    trouble: trouble7
  };

  // src/adapters/qianwen.js
  var hosts8 = ["tongyi.aliyun.com", "www.tongyi.com", "www.qianwen.com", "qianwen.com", "chat.qwen.ai"];
  var endpointHosts = [...hosts8, "chat2.qianwen.com", "qianwen.biz.aliyun.com"];
  var DEEP_THINK_MARK = /\[\(deep_think\)\]/g;
  function init2() {
    return {
      answer: createSnapshotDiffer(),
      reasoning: createSnapshotDiffer(),
      summary: createSnapshotDiffer(),
      format: null,
      candidates: /* @__PURE__ */ new Map(),
      // chat.qwen.ai: response_id → response_index, from `response.created`
      images: /* @__PURE__ */ new Set()
      // chat.qwen.ai: image addresses already reported (`image_gen` phase)
    };
  }
  function onCreated(created, ctx) {
    if (!created || typeof created !== "object" || typeof created.response_id !== "string") return;
    const index = Number(created.response_index);
    ctx.candidates.set(created.response_id, Number.isFinite(index) ? index : Infinity);
  }
  function shownCandidate(ctx) {
    let best = null;
    let bestIndex = Infinity;
    for (const [id, index] of ctx.candidates) {
      if (best === null || index < bestIndex) {
        best = id;
        bestIndex = index;
      }
    }
    return best;
  }
  function onCn(frame, out, ctx) {
    if (frame.error_code && frame.error_code !== 0 || frame.success === false) {
      out.error(frame.error_msg || "Qianwen error / 千问出错", frame.error_code || "error");
      return;
    }
    const data = frame.data || {};
    if (dig(data, "audit_info", "problem_code") === "blocked") {
      out.error("Qianwen blocked the reply (moderation) / 千问拦截了回复（内容审核）", "blocked");
      return;
    }
    const messages = Array.isArray(data.messages) ? data.messages : [];
    let answer2 = null;
    let reasoning = null;
    for (const m of messages) {
      if (!m || typeof m !== "object") continue;
      if ((m.mime_type === "multi_load/iframe" || m.mime_type === "text/plain") && typeof m.content === "string") answer2 = m.content;
      for (const item of Array.isArray(dig(m, "meta_data", "multi_load")) ? m.meta_data.multi_load : []) {
        const think = dig(item, "content", "think_content");
        if (item && item.type === "deep_think" && typeof think === "string") reasoning = think;
      }
    }
    if (reasoning !== null) out.reasoning(ctx.reasoning.next(reasoning));
    if (answer2 !== null) out.delta(ctx.answer.next(answer2.replace(DEEP_THINK_MARK, "")));
    if (data.status === "complete") out.done();
  }
  function onIntl(frame, out, ctx) {
    const delta = dig(frame, "choices", 0, "delta");
    if (!delta || typeof delta !== "object") return;
    if (ctx.candidates.size > 0 && typeof frame.response_id === "string" && frame.response_id !== shownCandidate(ctx)) return;
    const phase = delta.phase;
    if (phase === "thinking_summary") {
      const list = dig(delta, "extra", "summary_thought", "content");
      if (Array.isArray(list)) out.reasoning(ctx.summary.next(list.filter((s) => typeof s === "string").join("\n")));
    } else if (phase === "think" || phase === "thinking" || phase === "reasoning") {
      out.reasoning(delta.content);
    } else if (phase === "image_gen") {
      const url = typeof delta.content === "string" ? delta.content.trim() : "";
      if (/^https?:\/\//i.test(url) && !ctx.images.has(url)) {
        ctx.images.add(url);
        out.image({ url, alt: "" });
      }
    } else if (phase === "answer" || phase === null || phase === void 0) {
      out.delta(delta.content);
    }
    if (delta.status === "finished" && (phase === "answer" || phase === null || phase === void 0)) out.done();
  }
  function onLegacy(frame, out, ctx) {
    if (frame.errorCode || frame.errorMsg) {
      out.error(frame.errorMsg || "Tongyi error / 通义出错", frame.errorCode || "error");
      return;
    }
    const contents = Array.isArray(frame.contents) ? frame.contents : [];
    const text = contents.filter((c) => c && c.contentType === "text" && c.role !== "user" && typeof c.content === "string");
    if (text.length) out.delta(ctx.answer.next(text[text.length - 1].content));
    if (frame.msgStatus === "finished") out.done();
  }
  function onEvent6(record, out, ctx) {
    const data = record.data.trim();
    if (data === "[DONE]" || data === "true") {
      if (record.event === "complete" || ctx.format !== "cn" || data === "[DONE]") out.done();
      return;
    }
    const frame = parseJson(data);
    if (!frame || typeof frame !== "object" || Array.isArray(frame)) return;
    if (frame.error && typeof frame.error === "object") {
      out.error(frame.error.details || frame.error.message || "Qwen error / 通义千问出错", frame.error.code || "error");
      return;
    }
    if ("response.created" in frame) {
      ctx.format = "intl";
      onCreated(frame["response.created"], ctx);
    } else if ("choices" in frame) {
      ctx.format = "intl";
      onIntl(frame, out, ctx);
    } else if ("communication" in frame || dig(frame, "data", "messages") !== void 0 || "error_code" in frame) {
      ctx.format = "cn";
      onCn(frame, out, ctx);
    } else if ("msgStatus" in frame || "contents" in frame) {
      ctx.format = "legacy";
      onLegacy(frame, out, ctx);
    }
  }
  var trouble8 = makeTrouble({
    codes: {
      1004: REASONS.login,
      20006: "Qianwen rate limit / 千问限流"
    }
  });
  var qianwen_default = {
    name: "qianwen",
    hosts: hosts8,
    matchRequest: endpointMatcher({
      hosts: endpointHosts,
      paths: [/^\/api\/v2\/chat$/, /^\/api\/v2\/chat\/completions$/, /^\/api\/chat\/completions$/, /^\/dialog\/conversation$/]
    }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      if (!body) return null;
      const messages = Array.isArray(body.messages) ? body.messages : [];
      const last = messages[messages.length - 1];
      if (last && typeof last.content === "string") return last.content;
      const contents = Array.isArray(body.contents) ? body.contents : [];
      const user = contents.filter((c) => c && c.role === "user" && typeof c.content === "string");
      return user.length ? user[user.length - 1].content : null;
    },
    createParser: sseParser({
      onEvent: onEvent6,
      trouble: trouble8,
      init: init2,
      atEof: (out, ctx) => {
        if (ctx.format === "intl") out.done();
      }
    }),
    input: {
      selectors: ["textarea#chat-input", 'textarea[placeholder*="千问"]', "textarea.ant-input", 'div[contenteditable="true"][role="textbox"]'],
      kind: "textarea"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/qianwen.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 100 * MB,
      maxFiles: 10,
      input: ["input#filesUpload"],
      chip: ["div.prompt-input-file-list .fileitem-file"],
      busy: [".fileitem-loading"],
      error: [".fileitem-error"]
    }),
    send: {
      selectors: ["button#send-message-button", 'button[aria-label="发送"]', 'div[class*="operateBtn"]', 'button[class*="send"]'],
      key: "Enter"
    },
    trouble: trouble8
  };

  // src/adapters/xinghuo.js
  var hosts9 = ["xinghuo.xfyun.cn"];
  var THINK_MARK = "<deep_x1>";
  var BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
  function base64Bytes(text) {
    const padded = text + "=".repeat((4 - text.length % 4) % 4);
    const bin = atob(padded);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i += 1) out[i] = bin.charCodeAt(i);
    return out;
  }
  function siteError(out, collected) {
    const info = parseJson(collected.replace(/^\[error\]/, "")) || {};
    const reason = info.descr || info.desc || info.message || "Spark could not answer / 讯飞星火回答失败";
    out.error(reason, info.key !== void 0 ? info.key : "error");
  }
  function onEvent7(record, out, ctx) {
    const data = record.data.trim();
    if (data === "") return;
    if (ctx.error !== null) {
      if (data === "<end>") siteError(out, ctx.error);
      else ctx.error += data;
      return;
    }
    if (data === "<end>") {
      out.done();
      return;
    }
    if (data === "[error]") {
      ctx.error = "";
      return;
    }
    if (data === "[geeError]") {
      out.error(REASONS.captcha, "geeError");
      return;
    }
    if (data === "[belongerr]") {
      out.error("this chat is not in your Spark account, open a new one / 该对话不属于当前账号，请新建对话", "belongerr");
      return;
    }
    if (/^<[^>]*>$/.test(data) || data.endsWith("<sid>")) return;
    if (!BASE64.test(data)) return;
    let text;
    try {
      text = ctx.decoder.decode(base64Bytes(data), { stream: true });
    } catch {
      ctx.decoder = new TextDecoder("utf-8", { fatal: true });
      return;
    }
    if (text.startsWith(THINK_MARK)) {
      out.reasoning(text.slice(THINK_MARK.length));
      return;
    }
    if (/^\s*[{[]/.test(text) && /"(allTool|multi_image_url)"/.test(text)) return;
    out.delta(text);
  }
  var trouble9 = makeTrouble({ codes: {} });
  function formField(bodyText, name) {
    if (typeof bodyText !== "string" || bodyText === "") return null;
    const trimmed = bodyText.trimStart();
    if (trimmed.startsWith("--")) {
      const boundary = trimmed.slice(0, trimmed.search(/\r?\n/));
      if (boundary.length < 3) return null;
      for (const part of trimmed.split(boundary)) {
        const head = part.search(/\r?\n\r?\n/);
        if (head < 0) continue;
        const headers = part.slice(0, head);
        if (!new RegExp(`name="${name}"(;|\\s|$)`, "i").test(headers)) continue;
        const value2 = part.slice(head).replace(/^\r?\n\r?\n/, "").replace(/\r?\n$/, "");
        return value2.replace(/\r\n/g, "\n");
      }
      return null;
    }
    if (trimmed.startsWith("{")) {
      const body = parseJson(trimmed);
      return body && typeof body[name] === "string" ? body[name] : null;
    }
    if (!bodyText.includes("=")) return null;
    const value = new URLSearchParams(bodyText).get(name);
    return typeof value === "string" ? value : null;
  }
  var xinghuo_default = {
    name: "xinghuo",
    hosts: hosts9,
    matchRequest: endpointMatcher({
      hosts: hosts9,
      paths: [
        /^\/iflygpt-chat\/u\/chat_message\/chat$/,
        /^\/iflygpt\/u\/chat_message\/chat$/,
        /^\/iflygpt-longcontext\/u\/chat_message\/web\/chat$/
      ]
    }),
    promptFromRequest(bodyText) {
      return formField(bodyText, "text");
    },
    createParser: sseParser({
      onEvent: onEvent7,
      trouble: trouble9,
      init: () => ({ decoder: new TextDecoder("utf-8", { fatal: true }), error: null }),
      atEof: (out, ctx) => {
        if (ctx.error !== null) siteError(out, ctx.error);
      }
    }),
    input: {
      selectors: ['div[class*="chat_textAreaWrapper"] textarea', 'textarea[placeholder*="输入您要提问"]', 'div[class*="chat_inputArea"] textarea'],
      kind: "textarea"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/xinghuo.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 20 * MB,
      maxFiles: 10,
      input: ["input.upload-input"],
      chip: [".file-card"],
      busy: [".file-card-uploading"],
      error: [".file-card-failed"]
    }),
    send: {
      selectors: ['div[class*="chat_send__"]', 'div[class*="chat_inputArea"] div[class*="send"]'],
      key: "Enter"
    },
    trouble: trouble9
  };

  // src/adapters/yiyan.js
  var hosts10 = ["yiyan.baidu.com", "ernie.baidu.com"];
  function onEvent8(record, out, ctx) {
    const frame = parseJson(record.data);
    if (!frame || typeof frame !== "object" || Array.isArray(frame)) return;
    if (frame.code !== void 0 && Number(frame.code) !== 0) {
      out.error(frame.msg || frame.message || "ERNIE Bot error / 文心一言出错", frame.code);
      return;
    }
    const data = frame.data;
    if (!data || typeof data !== "object") return;
    if (record.event === "thought") {
      if (typeof data.content === "string") out.reasoning(data.content);
      return;
    }
    if (record.event !== "message") return;
    if (data.isBan === true) {
      out.error("ERNIE Bot declined to answer / 文心一言拒绝回答", "isBan");
      return;
    }
    if (Number(data.is_end) === 1) {
      const all2 = typeof data.tokens_all === "string" ? data.tokens_all : null;
      if (all2 !== null && all2.startsWith(ctx.text)) out.delta(all2.slice(ctx.text.length));
      else if (all2 === null && typeof data.content === "string") out.delta(data.content);
      out.done();
      return;
    }
    if (typeof data.content === "string") {
      ctx.text += data.content;
      out.delta(data.content);
    }
  }
  var trouble10 = makeTrouble({ codes: {} });
  var yiyan_default = {
    name: "yiyan",
    hosts: hosts10,
    matchRequest: endpointMatcher({ hosts: hosts10, paths: [/^\/eb\/chat\/conversation(\/v2)?$/] }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      return body && typeof body === "object" && typeof body.text === "string" ? body.text : null;
    },
    createParser: sseParser({ onEvent: onEvent8, trouble: trouble10, init: () => ({ text: "" }) }),
    input: {
      selectors: ["#dialogue-input", 'textarea[placeholder*="输入问题"]', 'div[contenteditable="true"][class*="editor"]'],
      kind: "textarea"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/yiyan.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 50 * MB,
      maxFiles: 10,
      input: ["input.dialogue-upload-input"],
      chip: [".upload-file-item"],
      busy: [".upload-file-item-loading"],
      error: [".upload-file-item-error"]
    }),
    send: {
      selectors: ["#sendBtn", 'span[class*="sendInner"]', 'div[class*="sendBtn"]', 'button[aria-label="发送"]'],
      key: "Enter"
    },
    trouble: trouble10
  };

  // src/adapters/yuanbao.js
  var hosts11 = ["yuanbao.tencent.com"];
  var MARKUP = /\[\]\(@[A-Za-z_]+=[^)\s]*\)/g;
  function onEvent9(record, out) {
    if (record.event === "speech_type") return;
    const data = record.data.trim();
    if (data === "[DONE]") {
      out.done();
      return;
    }
    if (!data.startsWith("{")) return;
    const frame = parseJson(data);
    if (!frame || typeof frame !== "object") return;
    switch (frame.type) {
      case "text":
        if (typeof frame.msg === "string") out.delta(frame.msg.replace(MARKUP, ""));
        return;
      case "think":
      case "reasoner":
        out.reasoning(typeof frame.content === "string" ? frame.content : frame.msg);
        return;
      case "error":
        out.error(frame.msg || "Yuanbao error / 元宝出错", frame.code || "error");
        return;
      default:
        if (frame.error && frame.error.code) out.error(frame.error.message || "Yuanbao error / 元宝出错", frame.error.code);
    }
  }
  var trouble11 = makeTrouble({
    codes: {
      23e3: REASONS.login,
      21007: "Yuanbao could not fetch the answer / 元宝回答拉取失败"
    }
  });
  var yuanbao_default = {
    name: "yuanbao",
    hosts: hosts11,
    matchRequest: endpointMatcher({ hosts: hosts11, paths: [/^\/api\/chat\/[A-Za-z0-9_-]+$/] }),
    promptFromRequest(bodyText) {
      const body = parseJson(bodyText);
      if (!body) return null;
      if (typeof body.prompt === "string") return body.prompt;
      return typeof body.displayPrompt === "string" ? body.displayPrompt : null;
    },
    createParser: sseParser({ onEvent: onEvent9, trouble: trouble11 }),
    input: {
      selectors: ['.chat-input-editor .ql-editor[contenteditable="true"]', 'div.ql-editor[contenteditable="true"]', '#search-bar [contenteditable="true"]'],
      kind: "contenteditable"
    },
    // What the composer takes and how (src/core/attach.js; facts and sources: docs/sites/yuanbao.md).
    upload: uploadTable({
      how: "input",
      accept: [...IMAGES, ...DOCS],
      maxBytes: 100 * MB,
      maxFiles: 50,
      input: ["input.hyc-upload-input"],
      chip: [".hyc-file-item"],
      busy: [".hyc-file-item__loading"],
      error: [".hyc-file-item--fail"]
    }),
    send: {
      selectors: ["a#yuanbao-send-btn", "#yuanbao-send-btn", 'a[class*="send-btn"]', 'button[class*="send-btn"]'],
      key: "Enter"
    },
    trouble: trouble11
  };

  // src/adapters/index.js
  var adapters = [deepseek_default, doubao_default, yuanbao_default, qianwen_default, chatgpt_default, claude_default, gemini_default, kimi_default, chatglm_default, yiyan_default, xinghuo_default];

  // src/core-test-site/sim-adapter.js
  function sseLines() {
    const decoder = new TextDecoder();
    let buffer = "";
    return {
      push(bytes, final = false) {
        buffer += decoder.decode(bytes, { stream: !final });
        const lines = buffer.split(/\r\n|\n|\r/);
        buffer = final ? "" : lines.pop();
        return lines;
      }
    };
  }
  var sim_adapter_default = {
    name: "sim",
    hosts: ["sim.aicard.test"],
    matchRequest(url, method) {
      return method === "POST" && new URL(url).pathname === "/api/sim/chat";
    },
    promptFromRequest(bodyText) {
      try {
        return JSON.parse(bodyText).prompt ?? null;
      } catch {
        return null;
      }
    },
    createParser() {
      const lines = sseLines();
      const read = (list) => {
        const events = [];
        for (const line of list) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") {
            events.push({ type: "done" });
            continue;
          }
          let obj;
          try {
            obj = JSON.parse(data);
          } catch {
            continue;
          }
          if (typeof obj.delta === "string") events.push({ type: "delta", text: obj.delta });
          if (typeof obj.reasoning === "string") events.push({ type: "reasoning", text: obj.reasoning });
          if (obj.error) events.push({ type: "error", reason: String(obj.error), code: obj.code });
        }
        return events;
      };
      return {
        push: (bytes) => read(lines.push(bytes)),
        end: () => read(lines.push(new Uint8Array(0), true))
      };
    },
    input: { selectors: ["textarea#sim-input"], kind: "textarea" },
    send: { selectors: ["button#sim-send"], key: "Enter" },
    trouble(status, sample) {
      if (status === 429) return "rate limited (HTTP 429) / 请求过于频繁";
      if (/"code":\s*"?rate_limit/.test(sample)) return "rate limited by the site / 站点限流";
      return null;
    }
  };

  // src/core/adapters.js
  function pickAdapter(adapters2, hostname) {
    const host = String(hostname).toLowerCase();
    for (const adapter of adapters2) {
      for (const h of adapter.hosts || []) {
        const want = h.toLowerCase();
        if (host === want || host.endsWith(`.${want}`)) return adapter;
      }
    }
    return null;
  }

  // src/adapters/lib/bend.js
  var MAX_SCAN_CHARS = 4 * 1024 * 1024;
  var MIN_GROWTH_FRAMES = 3;
  function leaves(value, path, out, depth = 0) {
    if (depth > 40) return out;
    if (typeof value === "string") {
      const t = value.trim();
      if ((t.startsWith("{") || t.startsWith("[")) && t.length > 1) {
        try {
          return leaves(JSON.parse(t), path, out, depth + 1);
        } catch {
        }
      }
      out.push([path, value]);
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => leaves(v, [...path, String(i)], out, depth + 1));
    } else if (value && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) leaves(v, [...path, k], out, depth + 1);
    }
    return out;
  }
  function jsonFrames(text) {
    const frames = [];
    const tryParse = (s) => {
      const i = s.search(/[[{]/);
      if (i < 0) return;
      try {
        frames.push(JSON.parse(s.slice(i)));
      } catch {
      }
    };
    const whole = text.trim();
    if (whole.startsWith("{") || whole.startsWith("[")) {
      try {
        return [JSON.parse(whole)];
      } catch {
      }
    }
    for (const line of text.split(/\r\n|\r|\n|\u0000|\u0002/)) {
      const l = line.startsWith("data:") ? line.slice(5) : line;
      if (l.trim()) tryParse(l);
    }
    return frames;
  }
  function pathMatches(pattern, path) {
    if (pattern.length !== path.length) return false;
    return pattern.every((p, i) => p === "*" || p === path[i]);
  }
  function fallbackText(frames, textOverride) {
    if (textOverride && Array.isArray(textOverride.paths) && textOverride.paths.length) {
      const patterns = textOverride.paths.map((p) => String(p).split("."));
      const values = [];
      for (const frame of frames) {
        for (const [path, v] of leaves(frame, [], [])) if (patterns.some((p) => pathMatches(p, path))) values.push(v);
      }
      if (textOverride.mode === "cumulative") return values.reduce((best, v) => v.length >= best.length ? v : best, "");
      return values.join("");
    }
    const chains = /* @__PURE__ */ new Map();
    for (const frame of frames) {
      const seenHere = /* @__PURE__ */ new Set();
      for (const [path, v] of leaves(frame, [], [])) {
        const key = path.join(".");
        if (seenHere.has(key)) continue;
        seenHere.add(key);
        const c = chains.get(key) || { last: "", grew: 0, broken: false };
        if (!c.broken) {
          if (v.length > c.last.length && v.startsWith(c.last)) {
            c.grew += 1;
            c.last = v;
          } else if (v !== c.last) c.broken = true;
        }
        chains.set(key, c);
      }
    }
    const grown = [...chains.values()].filter((c) => !c.broken && c.grew >= MIN_GROWTH_FRAMES);
    if (grown.length === 0) return "";
    grown.sort((a, b) => b.last.length - a.last.length);
    if (grown.length > 1 && grown[1].last.length === grown[0].last.length && grown[1].last !== grown[0].last) return "";
    return grown[0].last;
  }
  function extraEndpoints(endpoints, methods = ["POST"]) {
    const res = endpoints.map((e) => {
      try {
        return new RegExp(e);
      } catch {
        return null;
      }
    }).filter(Boolean);
    return (url, method) => {
      if (!methods.includes(String(method || "GET").toUpperCase())) return false;
      const u = parseRequestUrl(url);
      return Boolean(u) && res.some((re) => re.test(u.path));
    };
  }
  function withFallback(adapter, override = null) {
    const o = override && typeof override === "object" ? override : {};
    const extra = Array.isArray(o.endpoints) && o.endpoints.length ? extraEndpoints(o.endpoints, o.methods) : null;
    const base = adapter.createParser;
    return {
      ...adapter,
      override: override || void 0,
      matchRequest: extra ? (url, method) => adapter.matchRequest(url, method) || extra(url, method) : adapter.matchRequest,
      createParser() {
        const parser = base();
        const decoder = new TextDecoder();
        let text = "";
        let answered = false;
        let finished = false;
        const pass = (events) => {
          const out = [];
          for (const ev of events || []) {
            if (finished) break;
            if (ev.type === "delta" && ev.text) answered = true;
            const terminal = ev.type === "done" || ev.type === "error" && ev.code === "incomplete";
            if (terminal && !answered) {
              const rescued = fallbackText(jsonFrames(text), o.text);
              if (rescued) {
                answered = true;
                finished = true;
                out.push({ type: "delta", text: rescued }, { type: "done" });
                break;
              }
            }
            if (ev.type === "done" || ev.type === "error") finished = true;
            out.push(ev);
          }
          return out;
        };
        return {
          push(bytes) {
            if (text.length < MAX_SCAN_CHARS) text += decoder.decode(bytes instanceof Uint8Array ? bytes : new TextEncoder().encode(String(bytes)), { stream: true });
            return pass(parser.push(bytes));
          },
          end() {
            text += decoder.decode();
            return pass(parser.end());
          }
        };
      }
    };
  }
  function overrideFor(stored, name) {
    let all2 = stored;
    if (typeof all2 === "string") {
      try {
        all2 = JSON.parse(all2);
      } catch {
        return null;
      }
    }
    const o = all2 && typeof all2 === "object" ? all2[name] : null;
    return o && typeof o === "object" ? o : null;
  }

  // src/core/input.js
  var GENERIC_INPUTS = 'textarea, [contenteditable="true"], [contenteditable=""], [contenteditable="plaintext-only"], [role="textbox"]';
  var SEND_LABEL = /send|submit|发送|提交|送出/i;
  var STOP_LABEL = /stop[ _-]?(generating|streaming|response|answer|button)|^stop$|停止(生成|输出|回答|响应)?$|中止|取消生成/i;
  function isVisible(el) {
    if (!el || !el.isConnected) return false;
    const rect = el.getBoundingClientRect();
    if (rect.width < 2 || rect.height < 2) return false;
    const style = el.ownerDocument.defaultView.getComputedStyle(el);
    return style.visibility !== "hidden" && style.display !== "none" && Number(style.opacity) > 0.05;
  }
  function firstVisible(doc, selectors = []) {
    for (const sel of selectors) {
      let nodes;
      try {
        nodes = doc.querySelectorAll(sel);
      } catch {
        continue;
      }
      for (const el of nodes) if (isVisible(el)) return el;
    }
    return null;
  }
  function findInput(doc, adapter) {
    const own = firstVisible(doc, adapter?.input?.selectors);
    if (own) return own;
    let best = null;
    let bestBottom = -Infinity;
    for (const el of doc.querySelectorAll(GENERIC_INPUTS)) {
      if (!isVisible(el) || el.closest("[data-aicard-panel]") || el.readOnly || el.disabled) continue;
      if (el.parentElement?.closest('[contenteditable="true"], [contenteditable=""]')) continue;
      const bottom = el.getBoundingClientRect().bottom;
      if (bottom > bestBottom) {
        best = el;
        bestBottom = bottom;
      }
    }
    return best;
  }
  function isTextField(el) {
    return el.tagName === "TEXTAREA" || el.tagName === "INPUT";
  }
  var BLOCK_TAGS = /^(P|DIV|LI|H[1-6]|PRE|BLOCKQUOTE|UL|OL)$/;
  function editorText(el) {
    const lines = [];
    let inline2 = null;
    const flush2 = () => {
      if (inline2 !== null) {
        lines.push(inline2);
        inline2 = null;
      }
    };
    for (const node of el.childNodes) {
      if (node.nodeType === 1 && BLOCK_TAGS.test(node.tagName)) {
        flush2();
        lines.push(editorText(node));
      } else if (node.nodeType === 1 && node.tagName === "BR") {
        const last = node === el.lastChild;
        if (!last) inline2 = `${inline2 ?? ""}
`;
        else if (inline2 === null && lines.length === 0) inline2 = "";
      } else if (node.nodeType === 3 || node.nodeType === 1) {
        inline2 = (inline2 ?? "") + (node.nodeType === 3 ? node.data : editorText(node));
      }
    }
    flush2();
    return lines.join("\n");
  }
  function readInput(el) {
    if (isTextField(el)) return el.value;
    return editorText(el);
  }
  function setNativeValue(el, value) {
    const win = el.ownerDocument.defaultView;
    const proto = el.tagName === "TEXTAREA" ? win.HTMLTextAreaElement.prototype : win.HTMLInputElement.prototype;
    const setter = Object.getOwnPropertyDescriptor(proto, "value").set;
    setter.call(el, value);
  }
  function fireInput(el, data, inputType = "insertText") {
    const win = el.ownerDocument.defaultView;
    el.dispatchEvent(new win.InputEvent("input", { bubbles: true, composed: true, inputType, data }));
  }
  function replaceTextField(el, value) {
    el.focus();
    setNativeValue(el, value);
    fireInput(el, value);
    el.dispatchEvent(new el.ownerDocument.defaultView.Event("change", { bubbles: true }));
  }
  function selectContents(el) {
    const doc = el.ownerDocument;
    const range = doc.createRange();
    const walker = doc.createTreeWalker(
      el,
      4
      /* NodeFilter.SHOW_TEXT */
    );
    let first = null;
    let last = null;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      first = first || n;
      last = n;
    }
    if (first) {
      range.setStart(first, 0);
      range.setEnd(last, last.data.length);
    } else {
      range.selectNodeContents(el);
    }
    const sel = doc.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  function replaceEditable(el, value) {
    const doc = el.ownerDocument;
    const win = doc.defaultView;
    el.focus();
    selectContents(el);
    if (value === "") {
      doc.execCommand("delete", false);
      if (readInput(el) !== "") {
        el.textContent = "";
        fireInput(el, null, "deleteContentBackward");
      }
      return;
    }
    const before = new win.InputEvent("beforeinput", {
      bubbles: true,
      cancelable: true,
      composed: true,
      inputType: "insertText",
      data: value
    });
    const handled = !el.dispatchEvent(before);
    if (handled && readInput(el) === value) return;
    if (handled) selectContents(el);
    if (doc.execCommand("insertText", false, value) && readInput(el) === value) return;
    el.replaceChildren(...value.split("\n").map((line) => {
      const p = doc.createElement("p");
      p.textContent = line;
      if (!line) p.appendChild(doc.createElement("br"));
      return p;
    }));
    fireInput(el, value);
  }
  function setInput(el, value) {
    if (isTextField(el)) replaceTextField(el, value);
    else replaceEditable(el, value);
  }
  function composeWithDraft(draft, block, caret = draft.length) {
    const before = draft.slice(0, caret);
    const after = draft.slice(caret);
    const sepBefore = before && !before.endsWith("\n") ? "\n" : "";
    const sepAfter = after && !after.startsWith("\n") ? "\n" : "";
    return `${before}${sepBefore}${block}${sepAfter}${after}`;
  }
  function caretIn(el) {
    if (isTextField(el)) return el.ownerDocument.activeElement === el ? el.selectionStart : void 0;
    return void 0;
  }
  function insertBlock(el, block) {
    const draft = readInput(el);
    setInput(el, composeWithDraft(draft, block, caretIn(el)));
  }
  function isEnabled(btn) {
    return !btn.disabled && btn.getAttribute("aria-disabled") !== "true";
  }
  function findSendButton(doc, adapter, input) {
    const own = firstVisible(doc, adapter?.send?.selectors);
    if (own) return own;
    const buttons = [...doc.querySelectorAll('button, [role="button"]')].filter((b) => isVisible(b) && !b.closest("[data-aicard-panel]"));
    const label = (b) => `${b.getAttribute("aria-label") || ""} ${b.getAttribute("title") || ""} ${b.getAttribute("data-testid") || ""} ${b.textContent || ""}`;
    const byLabel = buttons.find((b) => SEND_LABEL.test(label(b)) && !STOP_LABEL.test(label(b).trim()));
    if (byLabel) return byLabel;
    const form = input?.closest("form");
    const submit = form && [...form.querySelectorAll('button[type="submit"], input[type="submit"]')].find(isVisible);
    if (submit) return submit;
    if (!input) return null;
    const box = input.getBoundingClientRect();
    let best = null;
    let bestDist = Infinity;
    for (const b of buttons) {
      if (!b.querySelector("svg, img")) continue;
      const r = b.getBoundingClientRect();
      if (r.left < box.left || r.top < box.top - 80) continue;
      const dist = Math.hypot(r.right - box.right, r.bottom - box.bottom);
      if (dist < bestDist && dist < 200) {
        best = b;
        bestDist = dist;
      }
    }
    return best;
  }
  function siteShowsStop(doc) {
    return Boolean(findStopButton(doc));
  }
  function findStopButton(doc) {
    for (const b of doc.querySelectorAll('button, [role="button"]')) {
      const labels = [b.getAttribute("aria-label"), b.getAttribute("data-testid"), b.getAttribute("title")].filter(Boolean);
      if (labels.some((l) => STOP_LABEL.test(l.trim())) && isVisible(b) && !b.closest("[data-aicard-panel]")) return b;
    }
    return null;
  }
  function pressEnter(el, key = "Enter") {
    const win = el.ownerDocument.defaultView;
    const init3 = { key, code: key, keyCode: 13, which: 13, bubbles: true, cancelable: true, composed: true };
    el.focus();
    el.dispatchEvent(new win.KeyboardEvent("keydown", init3));
    el.dispatchEvent(new win.KeyboardEvent("keypress", init3));
    el.dispatchEvent(new win.KeyboardEvent("keyup", init3));
  }
  function waitFor(check, { timeoutMs = 3e3, everyMs = 50, timers = globalThis } = {}) {
    return new Promise((resolve) => {
      const started = Date.now();
      const tick = () => {
        let value;
        try {
          value = check();
        } catch {
          value = null;
        }
        if (value) {
          resolve(value);
          return;
        }
        if (Date.now() - started >= timeoutMs) {
          resolve(null);
          return;
        }
        timers.setTimeout(tick, everyMs);
      };
      tick();
    });
  }
  async function pressSend(doc, adapter, input, timers) {
    const button = await waitFor(() => {
      const b = findSendButton(doc, adapter, input);
      return b && isEnabled(b) ? b : null;
    }, { timeoutMs: 3e3, timers });
    if (button) {
      button.click();
      return "button";
    }
    pressEnter(input, adapter?.send?.key || "Enter");
    return "key";
  }

  // src/adapters/lib/images.js
  var DATA_URL_MAX = 65536;
  var DATA_IMAGE = /^data:image\/(png|jpe?g|gif|webp);base64,[A-Za-z0-9+/=\s]+$/i;
  function usableUrl(raw, base) {
    if (typeof raw !== "string") return null;
    const s = raw.trim();
    if (s === "") return null;
    if (/^data:/i.test(s)) return s.length <= DATA_URL_MAX && DATA_IMAGE.test(s) ? s.replace(/\s+/g, "") : null;
    let url;
    try {
      url = base ? new URL(s, base) : new URL(s);
    } catch {
      return null;
    }
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  }
  function altText(alt) {
    const one = String(alt ?? "").replace(/\s+/g, " ").trim().slice(0, 200);
    return one.replace(/\\/g, "\\\\").replace(/([[\]])/g, "\\$1");
  }
  function imageMarkdown({ url, alt }) {
    const safe = String(url).replace(/[\s()<>]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`);
    return `![${altText(alt)}](${safe})`;
  }
  function imageNote(alt) {
    const a = altText(alt);
    return `[图片 image${a ? `: ${a}` : ""}]`;
  }
  function uniqueImages(list, base) {
    const out = [];
    const seen = /* @__PURE__ */ new Set();
    for (const img of list || []) {
      if (!img || img.pending) continue;
      const url = usableUrl(img.url, base);
      const key = url || `note:${img.url || ""}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(url ? { url, alt: String(img.alt ?? "") } : { url: null, alt: String(img.alt ?? ""), note: true });
    }
    return out;
  }
  function imagesSuffix(text, images) {
    const lines = [];
    for (const img of images) {
      if (img.url && String(text).includes(img.url)) continue;
      lines.push(img.url ? imageMarkdown(img) : imageNote(img.alt));
    }
    if (lines.length === 0) return "";
    const sep = text === "" ? "" : text.endsWith("\n\n") ? "" : text.endsWith("\n") ? "\n" : "\n\n";
    return sep + lines.join("\n");
  }
  function markdownImages(text) {
    const out = [];
    const re = /!\[((?:\\.|[^\]\\])*)\]\(([^)\s]+)\)/g;
    for (let m = re.exec(String(text ?? "")); m; m = re.exec(String(text ?? ""))) {
      out.push({ alt: m[1].replace(/\\(.)/g, "$1"), url: m[2] });
    }
    return out;
  }

  // src/core/dom-fallback.js
  var REPLY_SELECTORS = [
    '[data-message-author-role="assistant"]',
    // ChatGPT
    ".ds-markdown",
    // DeepSeek
    '[data-testid="receive_message"]',
    // Doubao
    ".font-claude-response",
    ".font-claude-message",
    "[data-is-streaming]",
    // Claude
    "model-response message-content",
    // Gemini
    ".hyc-content-md",
    // Yuanbao
    ".markdown-body",
    ".markdown",
    // Kimi, Qwen, ChatGLM, many others
    '[data-role="assistant"]',
    ".assistant",
    '[class*="assistant-message"]'
  ];
  function candidates(doc, selectors) {
    const seen = /* @__PURE__ */ new Set();
    for (const sel of selectors) {
      let nodes;
      try {
        nodes = doc.querySelectorAll(sel);
      } catch {
        continue;
      }
      for (const el of nodes) if (!el.closest("[data-aicard-panel]")) seen.add(el);
    }
    return [...seen].filter((el) => ![...seen].some((o) => o !== el && o.contains(el))).sort((a, b) => a.compareDocumentPosition(b) & 4 ? -1 : 1);
  }
  var MIN_IMAGE_PX = 48;
  var NOT_ANSWER_IMAGE = /avatar|icon|logo|favicon|emoji|sprite|spinner|loading|badge/i;
  function px(v) {
    const n = Number.parseFloat(v);
    return Number.isFinite(n) ? n : 0;
  }
  function answerImage(img) {
    if (!img || img.tagName !== "IMG") return null;
    if (img.closest('button, [role="button"], [data-aicard-panel]')) return null;
    if (img.getAttribute("aria-hidden") === "true" || img.getAttribute("role") === "presentation") return null;
    const cls = typeof img.className === "string" ? img.className : img.getAttribute("class") || "";
    const lazy = img.getAttribute("data-src");
    const shown2 = img.currentSrc || img.getAttribute("src") || "";
    const placeholder = Boolean(lazy) && (!shown2 || /^data:/i.test(shown2));
    const raw = placeholder ? lazy : shown2;
    const alt = img.getAttribute("alt") || "";
    if (!raw || NOT_ANSWER_IMAGE.test(cls) || NOT_ANSWER_IMAGE.test(alt) || /favicon|\/icons?\//i.test(raw)) return null;
    const small = (w, h) => w > 0 && h > 0 && w < MIN_IMAGE_PX && h < MIN_IMAGE_PX;
    if (small(px(img.getAttribute("width")), px(img.getAttribute("height")))) return null;
    if (!placeholder && img.complete && small(img.naturalWidth, img.naturalHeight)) return null;
    const box = img.getBoundingClientRect?.();
    if (box && small(box.width, box.height)) return null;
    if (hidden(img)) return null;
    let url = raw;
    try {
      url = new URL(raw, img.ownerDocument?.baseURI).href;
    } catch {
    }
    return { url, alt };
  }
  function imageText(found) {
    const url = usableUrl(found.url);
    return url ? imageMarkdown({ url, alt: found.alt }) : imageNote(found.alt);
  }
  function imagesIn(el) {
    const out = [];
    for (const img of el.querySelectorAll("img")) {
      const found = answerImage(img);
      if (found) out.push(found);
    }
    return out;
  }
  function pageImageUrls(doc, adapter) {
    const selectors = [...adapter?.reply?.selectors || [], ...REPLY_SELECTORS];
    const urls = /* @__PURE__ */ new Set();
    for (const reply of candidates(doc, selectors)) for (const img of imagesIn(reply)) urls.add(img.url);
    return urls;
  }
  function replyImages(doc, adapter) {
    const selectors = [...adapter?.reply?.selectors || [], ...REPLY_SELECTORS];
    const replies = candidates(doc, selectors);
    const last = replies[replies.length - 1];
    return last ? imagesIn(last) : [];
  }
  var SKIP_TAGS = /* @__PURE__ */ new Set(["BUTTON", "SVG", "svg", "STYLE", "SCRIPT", "NOSCRIPT", "TEMPLATE", "TEXTAREA", "INPUT", "SELECT", "IMG", "CANVAS", "VIDEO", "AUDIO", "IFRAME"]);
  var BLOCK_TAGS2 = /* @__PURE__ */ new Set([
    "P",
    "DIV",
    "SECTION",
    "ARTICLE",
    "MAIN",
    "HEADER",
    "FOOTER",
    "FIGURE",
    "FIGCAPTION",
    "DETAILS",
    "SUMMARY",
    "UL",
    "OL",
    "LI",
    "PRE",
    "BLOCKQUOTE",
    "TABLE",
    "HR",
    "H1",
    "H2",
    "H3",
    "H4",
    "H5",
    "H6",
    "DL",
    "DT",
    "DD",
    "CODE-BLOCK",
    "MESSAGE-CONTENT",
    "MODEL-RESPONSE"
  ]);
  var CHROME_CLASS = /(^|[\s_-])(copy|toolbar|code-?block-?(banner|header|decoration|title|toolbar|actions?)|code-header|header-wrapper|segment-code-header|highlighter-header|actions?|sr-only|visually-hidden)([\s_-]|$)/i;
  var LANG_WORD = /^[A-Za-z][\w+#.-]{0,19}$/;
  var NOT_LANG = /^(copy|copied|copy code|content_copy|复制|复制代码|下载|download|run|运行|edit|编辑|code)$/i;
  function hidden(el) {
    if (el.hidden || el.getAttribute("aria-hidden") === "true") return true;
    const view = el.ownerDocument?.defaultView;
    if (!view?.getComputedStyle) return false;
    const style = view.getComputedStyle(el);
    return style.display === "none" || style.visibility === "hidden";
  }
  function skipped(el) {
    if (SKIP_TAGS.has(el.tagName)) return true;
    if (el.getAttribute("role") === "button" || el.hasAttribute("data-aicard-panel")) return true;
    const cls = typeof el.className === "string" ? el.className : el.getAttribute("class") || "";
    if (cls && CHROME_CLASS.test(cls) && !el.querySelector("pre")) return true;
    return hidden(el);
  }
  function codeLanguage(pre) {
    for (const el of [pre.querySelector("code"), pre]) {
      if (!el) continue;
      const m = /(?:^|\s)(?:language|lang)-([\w+#.-]+)/.exec(el.getAttribute("class") || "");
      if (m) return m[1];
      const data = el.getAttribute("data-language") || el.getAttribute("data-lang");
      if (data) return data;
    }
    let wrap = pre.parentElement;
    for (let depth = 0; wrap && depth < 4; depth += 1, wrap = wrap.parentElement) {
      if (wrap.querySelectorAll("pre").length > 1) break;
      for (const el of wrap.querySelectorAll("span, div, p")) {
        if (el.contains(pre) || pre.contains(el) || el.children.length) continue;
        const t = (el.textContent || "").trim();
        if (LANG_WORD.test(t) && !NOT_LANG.test(t)) return t.toLowerCase();
      }
    }
    return "";
  }
  function codeText(pre) {
    const code = pre.querySelector("code") || pre;
    return (code.textContent || "").replace(/\n$/, "");
  }
  function inline(node, out) {
    for (const child of node.childNodes) inlineChild(child, out);
    return out;
  }
  function inlineChild(child, out) {
    if (child.nodeType === 3) {
      out.push(child.data.replace(/[ \t\r\n]+/g, " "));
      return;
    }
    if (child.nodeType === 1 && child.tagName === "IMG") {
      const found = answerImage(child);
      if (found) out.push(imageText(found));
      return;
    }
    if (child.nodeType !== 1 || skipped(child)) return;
    const tag = child.tagName;
    if (tag === "BR") out.push("\n");
    else if (BLOCK_TAGS2.has(tag)) out.push(`
${blockText(child)}
`);
    else if (tag === "CODE") out.push(`\`${child.textContent}\``);
    else if (tag === "STRONG" || tag === "B") out.push(`**${inlineText(child)}**`);
    else inline(child, out);
  }
  function inlineText(node) {
    return inline(node, []).join("").split("\n").map((l) => l.trim()).join("\n").replace(/\n{3,}/g, "\n\n").trim();
  }
  function listText(list) {
    const ordered = list.tagName === "OL";
    let n = Number(list.getAttribute("start")) || 1;
    const items = [];
    for (const li of list.children) {
      if (li.tagName !== "LI" || skipped(li)) continue;
      const marker = ordered ? `${n}. ` : "- ";
      n += 1;
      const body = blockText(li);
      items.push(marker + body.split("\n").map((l, i) => i === 0 || l === "" ? l : " ".repeat(marker.length) + l).join("\n"));
    }
    return items.join("\n");
  }
  function tableText(table) {
    const rows = [...table.querySelectorAll("tr")].map((tr) => [...tr.children].map((c) => inlineText(c).replace(/\n/g, " ")));
    if (!rows.length) return "";
    const line = (cells) => `| ${cells.join(" | ")} |`;
    return [line(rows[0]), line(rows[0].map(() => "---")), ...rows.slice(1).map(line)].join("\n");
  }
  function codeWrapperPre(el) {
    if (/^(LI|P|BLOCKQUOTE|TD|TH|H[1-6])$/.test(el.tagName)) return null;
    const pres = [...el.querySelectorAll("pre")].filter((p) => !hidden(p));
    if (pres.length !== 1) return null;
    const pre = pres[0];
    let depth = 0;
    for (let p = pre.parentElement; p && p !== el; p = p.parentElement) depth += 1;
    if (depth > 3) return null;
    const walker = el.ownerDocument.createTreeWalker(el, 4);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (pre.contains(n)) continue;
      const t = n.data.trim();
      if (!t) continue;
      if (n.parentElement?.closest("p, li, h1, h2, h3, h4, h5, h6, blockquote") && el.contains(n.parentElement.closest("p, li, h1, h2, h3, h4, h5, h6, blockquote"))) return null;
      if (!LANG_WORD.test(t) && !NOT_LANG.test(t) && !/copy|复制|下载/i.test(t)) return null;
    }
    return pre;
  }
  function blockText(el) {
    const wrapped = el.tagName === "PRE" ? null : codeWrapperPre(el);
    if (wrapped) return blockText(wrapped);
    switch (el.tagName) {
      case "PRE": {
        const lang = codeLanguage(el);
        return `\`\`\`${lang}
${codeText(el)}
\`\`\``;
      }
      case "UL":
      case "OL":
        return listText(el);
      case "TABLE":
        return tableText(el);
      case "HR":
        return "---";
      case "BLOCKQUOTE":
        return blocksOf(el).split("\n").map((l) => l ? `> ${l}` : ">").join("\n");
      case "H1":
      case "H2":
      case "H3":
      case "H4":
      case "H5":
      case "H6":
        return `${"#".repeat(Number(el.tagName[1]))} ${inlineText(el)}`;
      default:
        return blocksOf(el);
    }
  }
  function blocksOf(el) {
    const parts = [];
    let run = [];
    const endRun = () => {
      const t = run.join("").split("\n").map((l) => l.trim()).join("\n").replace(/\n{3,}/g, "\n\n").trim();
      if (t) parts.push(t);
      run = [];
    };
    for (const child of el.childNodes) {
      if (child.nodeType !== 1 || !BLOCK_TAGS2.has(child.tagName) && !child.querySelector("pre, p, ul, ol, table, blockquote, h1, h2, h3, h4, h5, h6")) {
        inlineChild(child, run);
        continue;
      }
      if (skipped(child)) continue;
      endRun();
      const t = blockText(child);
      if (t) parts.push(t);
    }
    endRun();
    return parts.join(el.tagName === "LI" ? "\n" : "\n\n");
  }
  function replyText(el) {
    return blockText(el).replace(/[ \t]+\n/g, "\n").replace(/\n{3,}/g, "\n\n").trim();
  }
  var DomReplyWatcher = class {
    /**
     * Takes the baseline (the reply elements on the page and their text) at construction: call it
     * just before sending. An element counts as the reply when it is new or its text changed.
     */
    constructor({ doc, adapter, timers, stableChecks = 3, everyMs = 350 }) {
      Object.assign(this, { doc, timers, stableChecks, everyMs });
      this.selectors = [...adapter?.reply?.selectors || [], ...REPLY_SELECTORS];
      this.baseline = new Map(candidates(doc, this.selectors).map((el) => [el, safeText(el)]));
      this.timer = null;
      this.running = false;
    }
    /** The newest reply element that is new or changed since the baseline, and its text. */
    read() {
      const fresh = candidates(this.doc, this.selectors).filter((el) => isVisible(el));
      for (let i = fresh.length - 1; i >= 0; i -= 1) {
        const el = fresh[i];
        const text = safeText(el);
        if (!text) continue;
        if (this.baseline.has(el) && this.baseline.get(el) === text) return "";
        return text;
      }
      return "";
    }
    /** Starts watching; `onReply(text)` is called once with the settled reply text. */
    start(onReply) {
      if (this.running) return;
      this.running = true;
      let last = null;
      let stable = 0;
      const tick = () => {
        if (!this.running) return;
        const text = this.read();
        if (text) this.sawSomething = true;
        if (text && text === last && !siteShowsStop(this.doc)) stable += 1;
        else stable = 0;
        last = text;
        if (stable >= this.stableChecks) {
          this.running = false;
          onReply(text);
          return;
        }
        this.timer = this.timers.setTimeout(tick, this.everyMs);
      };
      tick();
    }
    stop() {
      this.running = false;
      if (this.timer) this.timers.clearTimeout(this.timer);
    }
  };
  function safeText(el) {
    try {
      return replyText(el);
    } catch {
      return (el.innerText || el.textContent || "").trim();
    }
  }
  var PAGE_READ_AFTER_MISS_MS = 6e3;
  var PERSON_NO_STREAM_MS = 1500;
  var PersonTurnFallback = class {
    constructor({ doc, adapter, capture, timers, log }) {
      Object.assign(this, { doc, adapter, capture, timers, log });
      this.pending = null;
      capture.on((kind, turn) => this.onCapture(kind, turn));
    }
    /** The person pressed send: take the baseline, wait briefly for the stream. */
    sent() {
      this.cancel();
      this.capture.noteSend();
      const watcher = new DomReplyWatcher({ doc: this.doc, adapter: this.adapter, timers: this.timers });
      const p = { watcher, started: false };
      p.timer = this.timers.setTimeout(() => {
        if (this.pending !== p || p.started) return;
        this.log("warn", "no stream after the person sent, reading the page / 未捕获到网络流，改读页面");
        this.read(p, PERSON_NO_STREAM_MS * 20);
      }, PERSON_NO_STREAM_MS);
      this.pending = p;
    }
    onCapture(kind, turn) {
      const p = this.pending;
      if (!p || turn?.taskId) return;
      if (kind === "turn_start") p.started = true;
      if (kind === "turn_end") this.cancel();
      if (kind === "parser_miss") this.read(p, PAGE_READ_AFTER_MISS_MS);
    }
    read(p, giveUpMs) {
      const giveUp = this.timers.setTimeout(() => {
        if (this.pending !== p) return;
        this.log("warn", `${this.adapter.name}: the page showed no reply either / 页面上也没有回复`);
        this.cancel();
      }, giveUpMs);
      p.watcher.start((text) => {
        this.timers.clearTimeout(giveUp);
        if (this.pending !== p) return;
        this.pending = null;
        this.capture.domTurn(text, void 0);
      });
      p.giveUp = giveUp;
    }
    cancel() {
      const p = this.pending;
      if (!p) return;
      this.pending = null;
      p.watcher.stop();
      this.timers.clearTimeout(p.timer);
      if (p.giveUp) this.timers.clearTimeout(p.giveUp);
    }
  };

  // src/core/protocol.js
  var TASK_STATES = Object.freeze(["accepted", "attaching", "sent", "streaming", "done", "failed", "held"]);
  var HUB_FRAME_TYPES = Object.freeze([
    "welcome",
    "cmd_result",
    "cmd_output",
    "task",
    "cancel",
    "deliver",
    "flow_control",
    "flow_event",
    "ack",
    "error",
    "heartbeat"
  ]);
  function withOptional(frame, optional) {
    for (const [key, value] of Object.entries(optional)) {
      if (value !== void 0 && value !== null && value !== "") frame[key] = value;
    }
    return frame;
  }
  function hello({ token, clientId, site, url, title, label, role, version }) {
    if (!token) throw new Error("hello needs the hub token / 缺少令牌");
    if (!site) throw new Error("hello needs the site name / 缺少站点名");
    return withOptional({ type: "hello", token, site }, {
      client_id: clientId,
      url,
      title,
      label,
      role,
      version
    });
  }
  function chunk(turnId, seq, text, reasoning) {
    return withOptional({ type: "chunk", turn_id: turnId, seq, text }, { reasoning });
  }
  function turnEnd(turnId, text, taskId, extra = {}) {
    return withOptional({ type: "turn_end", turn_id: turnId, text }, { task_id: taskId, ...extra });
  }
  function flowReport(turnId, event, { status, fragmentCount } = {}) {
    if (!["flow_start", "status_update", "flow_end"].includes(event)) {
      throw new Error(`unknown flow_report event: ${event}`);
    }
    return withOptional({ type: "flow_report", turn_id: turnId, event }, {
      status,
      fragment_count: fragmentCount
    });
  }
  function userInput(text) {
    return { type: "user_input", text };
  }
  var TROUBLES = Object.freeze(["rate_limited", "captcha", "login", "network", "site_error", "parser_miss", "content_filter", "attachment_refused"]);
  function taskUpdate(taskId, state, error, trouble12) {
    if (!TASK_STATES.includes(state)) throw new Error(`unknown task state: ${state}`);
    if (trouble12 !== void 0 && !TROUBLES.includes(trouble12)) throw new Error(`unknown trouble: ${trouble12}`);
    return withOptional({ type: "task_update", task_id: taskId, state }, { error, trouble: trouble12 });
  }
  function attaching(taskId, done, of) {
    if (!taskId) throw new Error("attaching needs the task_id");
    return { type: "task_update", task_id: taskId, state: "attaching", done, of };
  }
  function deliveryHeld(deliverId) {
    if (!deliverId) throw new Error("held needs the deliver_id");
    return { type: "task_update", deliver_id: deliverId, state: "held" };
  }
  function deliveryAttaching(deliverId, done, of) {
    if (!deliverId) throw new Error("attaching needs the deliver_id");
    return { type: "task_update", deliver_id: deliverId, state: "attaching", done, of };
  }
  function deliveryFailed(deliverId, error, trouble12) {
    if (!deliverId) throw new Error("failed needs the deliver_id");
    if (trouble12 !== void 0 && !TROUBLES.includes(trouble12)) throw new Error(`unknown trouble: ${trouble12}`);
    return withOptional({ type: "task_update", deliver_id: deliverId, state: "failed" }, { error, trouble: trouble12 });
  }
  function ack(received) {
    return { type: "ack", received };
  }
  function heartbeat({ time = Date.now(), flowId, flowRole, step, cmdCount, resultCount, pending, trouble: trouble12 } = {}) {
    return withOptional({ type: "heartbeat", time }, {
      flow_id: flowId,
      flow_role: flowRole,
      step,
      cmd_count: cmdCount,
      result_count: resultCount,
      pending,
      trouble: trouble12
    });
  }
  function readHubFrame(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch (err) {
      return { error: `malformed JSON from hub: ${err.message}` };
    }
    if (!frame || typeof frame !== "object" || Array.isArray(frame) || typeof frame.type !== "string") {
      return { error: "hub frame is not an object with a type" };
    }
    if (!HUB_FRAME_TYPES.includes(frame.type)) return { ignored: frame.type };
    return { frame };
  }

  // src/core/capture.js
  var SAMPLE_BYTES = 4096;
  var RECORD_LIMIT_BYTES = 8 * 1024 * 1024;
  var BODY_END_WAIT_MS = 800;
  var IMAGE_SETTLE_MS = 60;
  var PENDING_IMAGE_WAIT_MS = 3e4;
  var IMAGE_POLL_MS = 200;
  function genericTrouble(status, sample = "", contentType = "") {
    if (status === 429) return "rate limited (HTTP 429) / 请求过于频繁";
    if (status === 401) return "login required (HTTP 401) / 需要登录";
    if (/captcha|challenge|cf-please-wait|verify you are human|人机验证|验证码|滑块/i.test(sample)) {
      return `captcha or challenge page (HTTP ${status}) / 需要人机验证`;
    }
    if (status === 403) return "forbidden: login expired or blocked (HTTP 403) / 登录失效或被拒绝";
    if (status >= 400) return `site error (HTTP ${status}) / 站点返回错误`;
    if (status >= 200 && status < 300 && /text\/html/i.test(contentType) && /<form|login|sign in|登录/i.test(sample)) {
      return "login page instead of a reply / 返回了登录页";
    }
    return null;
  }
  function parserMissReason(adapterName) {
    return `parser_miss: ${adapterName} adapter found no answer / ${adapterName} 适配器没有解析到回复`;
  }
  var UNMATCHED_WINDOW_MS = 15e3;
  var UNMATCHED_KEEP = 20;
  var turnCounter = 0;
  function newTurnId() {
    turnCounter += 1;
    const rand = Math.random().toString(36).slice(2, 8);
    return `t-${Date.now().toString(36)}-${turnCounter}-${rand}`;
  }
  var Turn = class {
    constructor(capture, meta) {
      this.capture = capture;
      this.meta = meta;
      this.id = newTurnId();
      this.text = "";
      this.pending = "";
      this.pendingReasoning = "";
      this.seq = 0;
      this.reasoningChars = 0;
      this.parser = null;
      this.closed = false;
      this.decoder = new TextDecoder();
      this.sample = "";
      this.held = [];
      this.troubleChecked = false;
      this.taskId = capture.claimTask();
      this.images = [];
      this.pendingImages = 0;
      this.bodyEnded = false;
    }
    /** Error statuses and HTML bodies are held back until a sample is judged for trouble. */
    get suspicious() {
      return this.meta.status >= 400 || /text\/html/i.test(this.meta.contentType || "");
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
        this.capture.log("warn", `adapter.trouble failed: ${err.message}`);
      }
      reason = reason || genericTrouble(this.meta.status, this.sample, this.meta.contentType);
      if (reason) this.fail(reason);
    }
    feed(call) {
      let events;
      try {
        events = call() || [];
      } catch (err) {
        this.capture.log("error", `${this.capture.adapter.name} parser failed: ${err.message}`);
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
      if (verdict === "wait") return false;
      if (verdict === "same") {
        this.id = this.resume.id;
        this.taskId = this.taskId || this.resume.task_id || void 0;
        this.hubTyped = this.hubTyped || this.resume.hub_typed;
        this.resumed = true;
        if (this.text.startsWith(String(this.resume.prefix || "").slice(0, this.text.length))) {
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
      this.pending = "";
      this.pendingReasoning = "";
      this.capture.hub.send(chunk(this.id, this.seq, text, reasoning || void 0));
      this.seq += 1;
      this.sentChars = (this.sentChars || 0) + text.length;
      this.capture.memory?.note(this);
      if (this.seq === 1) this.capture.emit("streaming", this);
    }
    event(ev) {
      switch (ev.type) {
        case "delta":
          if (!ev.text) return;
          this.text += ev.text;
          this.pending += ev.text;
          return;
        case "reasoning":
          this.reasoningChars += (ev.text || "").length;
          this.pendingReasoning += ev.text || "";
          this.capture.emit("reasoning", this);
          return;
        case "image":
          if (ev.pending) this.pendingImages += 1;
          else if (ev.url) this.images.push({ url: ev.url, alt: ev.alt || "" });
          return;
        case "done":
          this.finish();
          return;
        case "error":
          if (ev.code === "incomplete" && this.text === "") this.miss();
          else this.fail(ev.reason || `site error${ev.code ? ` ${ev.code}` : ""}`, ev.code);
          return;
        default:
          this.capture.log("warn", `unknown parser event ${ev.type}`);
      }
    }
    end() {
      this.bodyEnded = true;
      if (this.closed) return;
      if (this.suspicious && !this.troubleChecked && !this.releaseHeld()) return;
      this.feed(() => this.parser.end());
      if (!this.closed && this.text === "" && !this.troubleChecked) this.checkTrouble();
      if (!this.closed) this.finish();
    }
    /** The stream carried no answer the adapter could read: the page is read instead. */
    miss() {
      if (this.closed) return;
      if (this.resume) this.settle(true);
      this.flush();
      this.closed = true;
      const reason = parserMissReason(this.capture.adapter.name);
      this.capture.log("warn", `${reason} (${this.meta.contentType || "no content type"})`);
      this.capture.hub.send(flowReport(this.id, "flow_end", { status: "failed", fragmentCount: this.seq }));
      this.capture.emit("parser_miss", this, { reason });
      this.capture.closeTurn(this);
    }
    fail(reason, code) {
      if (this.closed) return;
      if (this.resume) this.settle(true);
      this.flush();
      this.closed = true;
      this.capture.hub.send(flowReport(this.id, "flow_end", { status: "failed", fragmentCount: this.seq }));
      this.capture.emit("trouble", this, { reason, code });
      this.capture.closeTurn(this);
    }
    finish() {
      if (this.closed) return;
      if (this.resume) this.settle(true);
      if (this.text === "" && this.images.length === 0 && this.pendingImages === 0) {
        this.miss();
        return;
      }
      this.flush();
      const fromPage = this.capture.doc && (this.images.length === 0 || this.pendingImages > 0);
      if (!fromPage) {
        this.complete(this.images);
        return;
      }
      this.closed = true;
      this.capture.pageImages(this).then((found) => this.complete(found), (err) => {
        this.capture.log("warn", `reading the reply's images failed: ${err.message}`);
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
      if (this.text === "") {
        this.closed = false;
        this.miss();
        return;
      }
      this.capture.memory?.note(this, { ended: true });
      this.capture.hub.send(flowReport(this.id, "flow_end", { status: "finished", fragmentCount: this.seq }));
      this.capture.hub.send(turnEnd(this.id, this.text, this.taskId, { source: "network" }));
      this.capture.emit("turn_end", this);
      this.capture.closeTurn(this);
    }
  };
  var TurnCapture = class {
    constructor({ adapter, hub, log, claimTask, memory = null, record = false, doc = null, timers = null }) {
      this.record = record;
      this.doc = doc;
      this.timers = timers || { setTimeout: (fn, ms) => setTimeout(fn, ms) };
      this.memory = memory;
      this.adapter = adapter;
      this.hub = hub;
      this.log = log;
      this.claimTask = claimTask || (() => void 0);
      this.active = /* @__PURE__ */ new Set();
      this.listeners = /* @__PURE__ */ new Set();
      this.lastTurn = null;
      this.sentAt = 0;
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
        try {
          fn(kind, turn, detail);
        } catch (err) {
          this.log("error", `capture listener: ${err.message}`);
        }
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
        this.log("warn", `${this.adapter.name}.matchRequest failed: ${err.message}`);
      }
      if (!matched && this.sentAt && Date.now() - this.sentAt < UNMATCHED_WINDOW_MS) this.noteUnmatched(url, method);
      return matched;
    }
    noteUnmatched(url, method) {
      const raw = url && typeof url === "object" && "url" in url ? url.url : String(url);
      const m = String(method || "GET").toUpperCase();
      this.unmatched.push({ method: m, url: raw, at: Date.now() });
      if (this.unmatched.length > UNMATCHED_KEEP) this.unmatched.shift();
      this.log("info", `after a send, no adapter matched ${m} ${raw} / 发送后的请求未被适配器识别`);
    }
    /** Called by the interceptor for each matching response; returns the byte sink. */
    begin(meta) {
      const turn = new Turn(this, meta);
      if (this.record) {
        turn.raw = [];
        turn.rawBytes = 0;
      }
      try {
        turn.parser = this.adapter.createParser();
      } catch (err) {
        this.log("error", `${this.adapter.name}.createParser failed: ${err.message}`);
        return null;
      }
      if (meta.requestBody && this.adapter.promptFromRequest) {
        try {
          turn.prompt = this.adapter.promptFromRequest(meta.requestBody);
        } catch {
          turn.prompt = null;
        }
      }
      if (this.doc) {
        try {
          turn.imagesBefore = pageImageUrls(this.doc, this.adapter);
        } catch {
          turn.imagesBefore = /* @__PURE__ */ new Set();
        }
      }
      this.active.add(turn);
      this.lastTurn = turn;
      turn.resume = meta.requestBody ? this.memory?.candidate(turn.prompt ?? null) || null : null;
      if (!turn.resume) this.announce(turn);
      return turn;
    }
    /** The turn's id is known: its `flow_start`, and `turn_start` to the listeners. */
    announce(turn) {
      this.hub.send(flowReport(turn.id, "flow_start", { status: "streaming" }));
      this.emit("turn_start", turn);
      this.memory?.note(turn);
    }
    /**
     * The images the newest reply shows on the page (not those the page showed when the turn began), read
     * once the stream's body closed (or
     * BODY_END_WAIT_MS passed) and the page had IMAGE_SETTLE_MS to render it; while the stream announced
     * more images than the page shows, read again until PENDING_IMAGE_WAIT_MS.
     */
    async pageImages(turn) {
      const sleep = (ms) => new Promise((resolve) => {
        this.timers.setTimeout(resolve, ms);
      });
      const started = Date.now();
      while (!turn.bodyEnded && Date.now() - started < BODY_END_WAIT_MS) await sleep(25);
      await sleep(IMAGE_SETTLE_MS);
      const before = turn.imagesBefore || /* @__PURE__ */ new Set();
      const read = () => replyImages(this.doc, this.adapter).filter((img) => !before.has(img.url));
      let found = read();
      const deadline = Date.now() + PENDING_IMAGE_WAIT_MS;
      while (turn.pendingImages > 0 && found.length < turn.pendingImages && Date.now() < deadline) {
        await sleep(IMAGE_POLL_MS);
        found = read();
      }
      if (found.length < turn.pendingImages) {
        this.log("warn", `${turn.pendingImages - found.length} announced image(s) never showed on the page / 有图片未在页面上显示`);
      }
      return found;
    }
    /** A reply read from the page by the fallback: reported as one chunk and a turn_end. */
    domTurn(text, taskId) {
      const turnId = newTurnId();
      this.hub.send(chunk(turnId, 0, text));
      this.hub.send(turnEnd(turnId, text, taskId, { source: "dom" }));
      this.emit("dom_turn_end", { id: turnId, taskId, text });
    }
    closeTurn(turn) {
      this.active.delete(turn);
      this.emit("idle_check", turn);
    }
  };

  // src/core/debug.js
  var NEEDS_TEXT = {
    mcpAutoSend: "要发送的文字 / text to type and send",
    mcpSendCmd: "发给 hub 的命令 / command for the hub",
    mcpSimulateInput: "要填入输入框的文字（不发送）/ text to put in the box (not sent)"
  };
  function describeElement(el) {
    if (!el) return null;
    const r = el.getBoundingClientRect();
    return {
      tag: el.tagName.toLowerCase(),
      label: (el.getAttribute("aria-label") || el.getAttribute("title") || el.textContent || "").trim().slice(0, 60),
      disabled: Boolean(el.disabled) || el.getAttribute("aria-disabled") === "true",
      rect: { x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width), height: Math.round(r.height) }
    };
  }
  function debugHelpers({ doc, hub, runner, capture, adapter, panel }) {
    const input = () => findInput(doc, adapter);
    return {
      /** Types `text` into the box and sends it, as a `deliver` with auto_send would. */
      mcpAutoSend: (text) => runner.handle({ type: "deliver", text: String(text), auto_send: true }),
      /** Sends a command to the hub as if the person had typed it. */
      mcpSendCmd: (cmd) => hub.send(userInput(String(cmd))),
      /** Puts `text` into the box without sending it (what a task's typing does first). */
      mcpSimulateInput: (text) => {
        const box = input();
        if (!box) return { ok: false, why: "no input box found" };
        setInput(box, String(text));
        return { ok: readInput(box) === String(text), text: readInput(box) };
      },
      /** The send button this site's adapter (or the fallback) finds. */
      mcpFindButton: () => describeElement(findSendButton(doc, adapter, input())),
      /** One self-check: adapter, hub connection, input box and send button. */
      mcpTest: () => {
        const box = input();
        const send = findSendButton(doc, adapter, box);
        const checks = {
          adapter: adapter.name,
          hub: hub.status.state,
          transport: hub.status.transport || null,
          input: Boolean(box),
          sendButton: Boolean(send)
        };
        return { ok: checks.hub === "open" && checks.input && checks.sendButton, ...checks };
      },
      /** Connection, queue and capture state. */
      mcpStatus: () => ({
        site: adapter.name,
        hub: { ...hub.status },
        queued: runner.queue.length,
        current: runner.current ? { kind: runner.current.kind, task_id: runner.current.task_id } : null,
        streaming: capture.busy,
        lastTurn: capture.lastTurn ? { id: capture.lastTurn.id, chars: capture.lastTurn.text.length } : null
      }),
      /**
       * The last captured stream exactly as the site sent it, for recording an adapter fixture
       * (saved as test/adapters/fixtures/<site>-<date>.sse).
       */
      mcpLastStream: () => {
        const turn = capture.lastTurn;
        if (!turn || !turn.raw) return null;
        const bytes = new Uint8Array(turn.rawBytes);
        let offset = 0;
        for (const part of turn.raw) {
          bytes.set(part, offset);
          offset += part.length;
        }
        let binary = "";
        for (const b of bytes) binary += String.fromCharCode(b);
        return {
          site: adapter.name,
          url: turn.meta.url,
          method: turn.meta.method,
          status: turn.meta.status,
          contentType: turn.meta.contentType,
          requestBody: turn.meta.requestBody,
          answer: turn.text,
          text: new TextDecoder().decode(bytes),
          base64: btoa(binary),
          reads: turn.raw.map((r) => r.length)
        };
      },
      /** Requests seen after a send that no adapter matched: where a moved endpoint went. */
      mcpUnmatched: () => capture.unmatched.map((u) => ({ ...u })),
      /** The panel's text, position and buttons. */
      mcpPanel: () => panel.describe()
    };
  }
  function debugRunner(helpers, { ask, show }) {
    return (name, arg) => {
      const fn = helpers[name];
      if (!fn) throw new Error(`no debug helper ${name}`);
      let value = arg;
      if (NEEDS_TEXT[name] && typeof value !== "string") {
        value = ask(NEEDS_TEXT[name]);
        if (value === null || value === void 0) return void 0;
      }
      const result = fn(value);
      if (result && typeof result.then === "function") {
        return result.then((r) => {
          show(name, r);
          return r;
        }, (e) => {
          show(name, { error: String(e) });
          throw e;
        });
      }
      show(name, result);
      return result;
    };
  }
  function installDebugMenu(register, run, names) {
    if (typeof register !== "function") return [];
    return names.map((name) => register(`AIcard 调试 debug: ${name}`, (ev) => run(name, typeof ev === "string" ? ev : void 0)));
  }
  function resultText(name, result) {
    let text;
    try {
      text = JSON.stringify(result);
    } catch {
      text = String(result);
    }
    return `${name}: ${text === void 0 ? "ok" : text}`.slice(0, 300);
  }

  // src/core/backoff.js
  var DEFAULT_POLICY = Object.freeze({
    baseMs: 500,
    // first retry waits about this long
    factor: 2,
    // each failed attempt multiplies the wait
    maxMs: 3e4,
    // never wait longer than this
    jitter: 0.5
    // fraction of the delay that is randomised (0 = none, 1 = full jitter)
  });
  function backoffDelay(attempt, policy = DEFAULT_POLICY, random = Math.random) {
    const { baseMs, factor, maxMs, jitter } = { ...DEFAULT_POLICY, ...policy };
    const exp = Math.max(0, attempt);
    const capped = Math.min(maxMs, baseMs * Math.pow(factor, exp));
    const j = Math.min(1, Math.max(0, jitter));
    return Math.round(capped * (1 - j) + capped * j * random());
  }
  var ReconnectMachine = class {
    constructor(policy = DEFAULT_POLICY, random = Math.random, transports = ["ws", "sse"]) {
      this.policy = { ...DEFAULT_POLICY, ...policy };
      this.random = random;
      this.state = "idle";
      this.order = transports.length ? [...transports] : ["ws"];
      this.blocked = /* @__PURE__ */ new Set();
      this.transport = this.order[0];
      this.attempt = 0;
      this.tried = /* @__PURE__ */ new Set();
      this.opened = Object.fromEntries(this.order.map((t) => [t, false]));
    }
    /** Transports still allowed, in order. */
    get usable() {
      return this.order.filter((t) => !this.blocked.has(t));
    }
    /** Begin (or retry) a connection. Returns the transport to use. */
    connect() {
      if (this.state === "stopped") return null;
      this.state = "connecting";
      return this.transport;
    }
    /** The current transport proved it receives (its welcome arrived). */
    open() {
      if (this.state === "stopped") return;
      this.state = "open";
      this.attempt = 0;
      this.tried.clear();
      this.opened[this.transport] = true;
    }
    /** Never use `kind` again on this page (unless it is the only one left). */
    block(kind) {
      if (this.usable.length > 1 || !this.usable.includes(kind)) this.blocked.add(kind);
      if (this.blocked.has(this.transport)) this.transport = this.usable[0];
    }
    /**
     * The connection failed or was lost. Returns `{delayMs, transport}` for the next try,
     * or null when stopped.
     */
    lost() {
      if (this.state === "stopped") return null;
      const wasOpen = this.state === "open";
      this.state = "waiting";
      if (!wasOpen && !this.opened[this.transport]) {
        this.tried.add(this.transport);
        const next = this.usable.find((t) => !this.tried.has(t));
        if (next) {
          this.transport = next;
          return { delayMs: 0, transport: next };
        }
        this.tried.clear();
        this.transport = this.usable[0];
      }
      const delayMs = backoffDelay(this.attempt, this.policy, this.random);
      this.attempt += 1;
      return { delayMs, transport: this.transport };
    }
    stop() {
      this.state = "stopped";
    }
  };

  // src/core/event-stream.js
  var EventStreamReader = class {
    constructor() {
      this.buffer = "";
      this.data = [];
    }
    /** Feeds more text; returns the data strings of the events completed by it. */
    push(text) {
      this.buffer += text;
      const events = [];
      let newline;
      while ((newline = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
        const line = this.buffer.slice(0, newline);
        const sepLen = this.buffer.startsWith("\r\n", newline) ? 2 : 1;
        if (sepLen === 1 && this.buffer[newline] === "\r" && newline === this.buffer.length - 1) break;
        this.buffer = this.buffer.slice(newline + sepLen);
        this.line(line, events);
      }
      return events;
    }
    line(line, events) {
      if (line === "") {
        if (this.data.length) events.push(this.data.join("\n"));
        this.data = [];
        return;
      }
      if (line.startsWith(":")) return;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
    }
  };

  // src/core/transports.js
  var WELCOME_TIMEOUT_MS = 8e3;
  var STREAM_SILENCE_MS = 45e3;
  function wsUrl(hubUrl, path) {
    return hubUrl.replace(/^http/, "ws") + path;
  }
  function refusal(message) {
    const err = new Error(message);
    err.refused = true;
    return err;
  }
  var WebSocketTransport = class {
    constructor({ hubUrl, WebSocketImpl, timers, onFrame, onClose, log, doc, openWithinMs }) {
      Object.assign(this, { hubUrl, WebSocketImpl, timers, onFrame, onClose, log, doc, openWithinMs });
      this.name = "ws";
      this.realtime = null;
      this.heart = null;
      this.closed = false;
      this.wsSend = WebSocketImpl.prototype.send;
    }
    /** Opens `/realtime`, says hello; resolves with the welcome frame. */
    open(helloFields) {
      return new Promise((resolve, reject) => {
        const url = wsUrl(this.hubUrl, "/realtime");
        let welcomed = false;
        let timer = null;
        let ws;
        const fail = (err) => {
          if (welcomed) return;
          this.timers.clearTimeout(timer);
          this.doc?.removeEventListener("securitypolicyviolation", onViolation);
          reject(err);
          this.close();
        };
        const onViolation = (ev) => {
          if (String(ev.blockedURI || "").startsWith(url.replace(/\/realtime$/, ""))) {
            fail(refusal(`the page's Content-Security-Policy refuses ${url} (${ev.violatedDirective})`));
          }
        };
        this.doc?.addEventListener("securitypolicyviolation", onViolation);
        try {
          ws = new this.WebSocketImpl(url);
        } catch (err) {
          fail(refusal(`WebSocket refused: ${err.message}`));
          return;
        }
        this.realtime = ws;
        let opened = false;
        timer = this.timers.setTimeout(() => fail(new Error("no welcome from hub")), WELCOME_TIMEOUT_MS);
        const openTimer = this.openWithinMs ? this.timers.setTimeout(() => {
          if (!opened) fail(new Error(`WebSocket did not open within ${this.openWithinMs} ms (Local Network Access?)`));
        }, this.openWithinMs) : null;
        ws.onopen = () => {
          opened = true;
          this.timers.clearTimeout(openTimer);
          this.wsSend.call(ws, JSON.stringify(hello(helloFields)));
        };
        ws.onmessage = (ev) => {
          const { frame, error } = readHubFrame(String(ev.data));
          if (error) {
            this.log("warn", error);
            return;
          }
          if (!frame) return;
          if (!welcomed && frame.type === "welcome") {
            welcomed = true;
            this.timers.clearTimeout(timer);
            this.doc?.removeEventListener("securitypolicyviolation", onViolation);
            this.openHeartbeat({ ...helloFields, clientId: frame.client_id }, frame.heartbeat_ms);
            resolve(frame);
            return;
          }
          if (!welcomed && frame.type === "error") {
            fail(new Error(`hub refused hello: ${frame.message || frame.code}`));
            return;
          }
          this.onFrame(frame);
        };
        ws.onerror = () => {
          if (!opened) fail(new Error("WebSocket to hub could not open (hub down, CSP or Local Network Access)"));
        };
        ws.onclose = () => {
          if (!welcomed) {
            fail(opened ? new Error("WebSocket to hub closed before welcome") : new Error("WebSocket to hub could not open (hub down, CSP or Local Network Access)"));
          } else this.lost();
        };
      });
    }
    /** `/heartbeat` socket: hello, then an app heartbeat every `intervalMs`; lost answers close both. */
    openHeartbeat(helloFields, intervalMs) {
      const every = Math.max(1e3, Number(intervalMs) || 15e3);
      let lastAnswer = Date.now();
      const ws = new this.WebSocketImpl(wsUrl(this.hubUrl, "/heartbeat"));
      this.heart = ws;
      ws.onopen = () => this.wsSend.call(ws, JSON.stringify(hello(helloFields)));
      ws.onmessage = () => {
        lastAnswer = Date.now();
      };
      ws.onerror = () => {
      };
      this.heartTimer = this.timers.setInterval(() => {
        if (Date.now() - lastAnswer > every * 3) {
          this.log("warn", "hub heartbeat lost");
          this.lost();
          return;
        }
        if (ws.readyState === 1) this.wsSend.call(ws, JSON.stringify(heartbeat(this.heartbeatState?.() || {})));
      }, every);
    }
    send(frame) {
      if (!this.realtime || this.realtime.readyState !== 1) return false;
      this.wsSend.call(this.realtime, JSON.stringify(frame));
      return true;
    }
    lost() {
      if (this.closed) return;
      this.close();
      this.onClose();
    }
    close() {
      this.closed = true;
      if (this.heartTimer) this.timers.clearInterval(this.heartTimer);
      for (const ws of [this.realtime, this.heart]) {
        if (ws) {
          ws.onclose = null;
          ws.onmessage = null;
          try {
            ws.close();
          } catch {
          }
        }
      }
    }
  };
  function spreadHubUrl(hubUrl, random = Math.random) {
    let url;
    try {
      url = new URL(hubUrl);
    } catch {
      return hubUrl;
    }
    if (!LOOPBACK_NAMES.includes(url.hostname)) return hubUrl;
    url.hostname = `aicard-${Math.floor(random() * 4294967295).toString(16).padStart(8, "0")}.localhost`;
    return url.href.replace(/\/+$/, "");
  }
  var LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]"];
  var SPREAD_BROKEN_MS = 10 * 6e4;
  function plainHubUrls(hubUrl, slot = 0) {
    let url;
    try {
      url = new URL(hubUrl);
    } catch {
      return [hubUrl];
    }
    if (!LOOPBACK_NAMES.includes(url.hostname) && !url.hostname.endsWith(".localhost")) return [hubUrl];
    const names = ["127.0.0.1", "localhost"];
    if (slot % 2 === 1) names.reverse();
    return names.map((name) => {
      url.hostname = name;
      return url.href.replace(/\/+$/, "");
    });
  }
  function streamPlan(info) {
    let name = "";
    let version = "";
    try {
      name = String(info && info.scriptHandler || "").toLowerCase();
      version = String(info && info.version || "");
    } catch {
    }
    const major = Number.parseInt(version, 10);
    if (name === "violentmonkey") return "text";
    if (name === "tampermonkey") return "stream";
    if (name === "scriptcat") return major >= 1 ? "stream" : "probe";
    return "probe";
  }
  var probedBuffered = false;
  function isStream(value) {
    return Boolean(value && typeof value === "object" && typeof value.getReader === "function");
  }
  var SseTransport = class {
    /**
     * `manager`: GM_info (picks `streamPlan`). `memo`: `{get(key, fallback), set(key, value)}`,
     * the manager's storage shared by the tabs (remembers that *.localhost failed, and deals the
     * plain addresses out in turn); in memory when absent.
     */
    constructor({ hubUrl, gmRequest, onFrame, onClose, log, timers, manager = null, memo = null, random = Math.random }) {
      Object.assign(this, { baseUrl: hubUrl, gmRequest, onFrame, onClose, log, timers, memo: memo || memoryMemo() });
      const brokenAt = Number(this.memo.get("sse_spread_broken", 0)) || 0;
      this.spread = Date.now() - brokenAt > SPREAD_BROKEN_MS;
      this.hubUrl = this.spread ? spreadHubUrl(hubUrl, random) : this.plainUrls()[0];
      this.plan = streamPlan(manager);
      if (this.plan === "probe") this.plan = probedBuffered ? "stream" : "text";
      this.name = "sse";
      this.closed = false;
      this.clientId = null;
      this.token = null;
      this.events = null;
      this.how = null;
    }
    /** The plain loopback addresses, this tab's turn first (a counter in the shared memo). */
    plainUrls() {
      if (!this.slot) {
        const n = Number(this.memo.get("sse_plain_slot", 0)) || 0;
        this.memo.set("sse_plain_slot", (n + 1) % 1024);
        this.slot = { n };
      }
      return plainHubUrls(this.baseUrl, this.slot.n);
    }
    headers() {
      const h = { "Content-Type": "application/json", Authorization: `Bearer ${this.token}` };
      if (this.clientId) h["X-AIcard-Client"] = this.clientId;
      return h;
    }
    post(frame) {
      return new Promise((resolve, reject) => {
        this.gmRequest({
          method: "POST",
          url: `${this.hubUrl}/send`,
          headers: this.headers(),
          data: JSON.stringify(frame),
          timeout: WELCOME_TIMEOUT_MS,
          onload: (res) => {
            const { frame: reply, error } = readHubFrame(res.responseText || "");
            if (res.status >= 400 || error) reject(new Error(`hub answered ${res.status}: ${error || reply?.message || ""}`));
            else resolve(reply);
          },
          onerror: () => reject(Object.assign(new Error(`hub unreachable (POST ${this.hubUrl}/send)`), { unreachable: true })),
          ontimeout: () => reject(Object.assign(new Error(`hub timed out (POST ${this.hubUrl}/send)`), { unreachable: true }))
        });
      });
    }
    async open(helloFields) {
      this.token = helloFields.token;
      const welcome = await this.hello(helloFields);
      if (!welcome || welcome.type !== "welcome") {
        throw new Error(`hub refused hello: ${welcome?.message || welcome?.type}`);
      }
      this.clientId = welcome.client_id;
      await this.listen();
      await this.post(ack("welcome"));
      return welcome;
    }
    /**
     * `hello` over `POST /send`. When the per-tab name cannot be reached (no answer at all, not an
     * HTTP error), the hub's plain addresses are tried in turn, and every tab is told (memo) to
     * start there for a while.
     */
    async hello(helloFields) {
      const urls = [...new Set(this.spread ? [this.hubUrl, ...this.plainUrls()] : this.plainUrls())];
      let last = null;
      for (const [i, url] of urls.entries()) {
        this.hubUrl = url;
        try {
          const welcome = await this.post(hello(helloFields));
          if (i > 0 && this.spread) {
            this.spread = false;
            this.memo.set("sse_spread_broken", Date.now());
          }
          return welcome;
        } catch (err) {
          if (!err.unreachable) throw err;
          if (i === 0 && this.spread) this.log("warn", `${err.message}: trying the plain loopback addresses (is *.localhost sent elsewhere by DNS or a proxy?) / 改用 127.0.0.1 / localhost 连接 hub`);
          last = err;
        }
      }
      this.hubUrl = urls[0];
      throw last;
    }
    /**
     * `GET /events`, read as it arrives. Resolves when the stream's first event (the welcome)
     * came through; rejects when none does in time, which is what a manager that buffers the
     * whole response looks like.
     */
    listen() {
      return new Promise((resolve, reject) => {
        const reader = new EventStreamReader();
        const decoder = new TextDecoder();
        let seen = 0;
        let first = true;
        let lastByte = Date.now();
        const timer = this.timers.setTimeout(() => {
          first = false;
          if (this.plan === "text" && seen === 0) probedBuffered = true;
          this.timers.setTimeout(() => this.closeStream(), 0);
          reject(new Error(`no event from GET /events in ${WELCOME_TIMEOUT_MS / 1e3} s: this userscript manager does not stream responses (it needs responseType 'stream' or a growing responseText) / 用户脚本管理器不支持流式响应`));
        }, WELCOME_TIMEOUT_MS);
        const text = (fresh) => {
          lastByte = Date.now();
          for (const data of reader.push(fresh)) {
            const { frame, error } = readHubFrame(data);
            if (error) {
              this.log("warn", error);
              continue;
            }
            if (!frame) continue;
            if (first) {
              first = false;
              this.timers.clearTimeout(timer);
              if (frame.type === "welcome") resolve(frame);
              else reject(new Error(`the event stream began with ${frame.type}, not welcome`));
              continue;
            }
            this.onFrame(frame);
          }
        };
        const readStream = async (stream) => {
          const r = stream.getReader();
          try {
            for (; ; ) {
              const { done, value } = await r.read();
              if (done || this.closed) break;
              text(decoder.decode(value, { stream: true }));
            }
          } catch (err) {
            if (!this.closed) this.log("warn", `event stream broke: ${err && err.message}`);
          }
          ended();
        };
        const seeResponse = (res) => {
          if (!res) return;
          if (this.plan === "stream" && this.how === null && isStream(res.response)) {
            this.how = "stream";
            readStream(res.response);
            return;
          }
          if (this.how === "stream") return;
          const t = typeof res.responseText === "string" ? res.responseText : "";
          if (t.length > seen) {
            this.how = "text";
            const fresh = t.slice(seen);
            seen = t.length;
            text(fresh);
          }
        };
        const ended = () => {
          this.timers.clearTimeout(timer);
          if (first) {
            first = false;
            reject(new Error("GET /events ended before its first event"));
            return;
          }
          if (!this.closed) {
            this.close();
            this.onClose();
          }
        };
        this.events = this.gmRequest({
          method: "GET",
          url: `${this.hubUrl}/events`,
          headers: { ...this.headers(), Accept: "text/event-stream" },
          ...this.plan === "stream" ? { responseType: "stream" } : {},
          onloadstart: seeResponse,
          onreadystatechange: (res) => {
            if (res.readyState >= 2) seeResponse(res);
          },
          onprogress: seeResponse,
          onload: (res) => {
            if (this.how !== "stream") {
              seeResponse(res);
              ended();
            }
          },
          onerror: ended,
          onabort: ended,
          ontimeout: ended
        });
        this.watchdog = this.timers.setInterval(() => {
          if (!first && Date.now() - lastByte > STREAM_SILENCE_MS) {
            this.log("warn", "event stream silent: reconnecting");
            this.closeStream();
            ended();
          }
        }, 5e3);
      });
    }
    send(frame) {
      if (this.closed || !this.clientId) return false;
      this.chain = (this.chain || Promise.resolve()).then(() => this.post(frame)).then((reply) => {
        if (reply && reply.type === "error") this.log("warn", `hub error: ${reply.message}`);
      }, (err) => this.log("warn", err.message));
      return true;
    }
    closeStream() {
      const events = this.events;
      this.events = null;
      try {
        events?.abort?.();
      } catch {
      }
    }
    close() {
      this.closed = true;
      if (this.watchdog) this.timers.clearInterval(this.watchdog);
      this.closeStream();
    }
  };
  function memoryMemo() {
    const m = /* @__PURE__ */ new Map();
    return { get: (k, d) => m.has(k) ? m.get(k) : d, set: (k, v) => {
      m.set(k, v);
    } };
  }

  // src/core/hub-client.js
  var MAX_QUEUED_FRAMES = 2e3;
  var HubClient = class {
    /**
     * @param {object} o
     * @param {string} o.hubUrl           e.g. http://127.0.0.1:8027
     * @param {() => object} o.helloFields token, site, url, title, label, role, version
     * @param {TabIdentity} o.identity    keeps client_id across reloads
     * @param {Function} o.WebSocketImpl  captured at document-start
     * @param {Function} o.gmRequest      GM_xmlhttpRequest, for the SSE fallback
     * @param {object} [o.manager]        GM_info: how the manager streams (transports.js streamPlan)
     * @param {object} [o.memo]           `{get, set}` in the manager's storage, shared by the tabs
     * @param {string[]} [o.transports]   what this world can use, in order (default ws, sse)
     * @param {() => Promise<object|null>} [o.wsCheck] null when nothing stands in a WebSocket's way;
     *   else `{notice, openWithinMs}` (Local Network Access not granted): the WebSocket gets only
     *   that long to open, since a pending permission prompt would hold it, and the notice is
     *   shown when it fails
     */
    constructor(o) {
      this.o = o;
      const kinds = o.transports || ["ws", ...o.gmRequest ? ["sse"] : []];
      this.machine = new ReconnectMachine(o.policy, o.random, kinds);
      this.transport = null;
      this.queue = [];
      this.welcome = null;
      this.listeners = { frame: /* @__PURE__ */ new Set(), state: /* @__PURE__ */ new Set() };
      this.status = { state: "idle", transport: null, error: null };
      this.timers = o.timers;
    }
    on(kind, fn) {
      this.listeners[kind].add(fn);
      return () => this.listeners[kind].delete(fn);
    }
    emitState(patch) {
      this.status = { ...this.status, ...patch };
      for (const fn of this.listeners.state) fn(this.status);
    }
    start() {
      this.attempt();
    }
    stop() {
      this.machine.stop();
      this.transport?.close();
      this.emitState({ state: "stopped" });
    }
    async attempt() {
      const kind = this.machine.connect();
      if (!kind) return;
      const caution = kind === "ws" && this.o.wsCheck && this.machine.usable.length > 1 ? await this.o.wsCheck() : null;
      this.emitState({ state: "connecting", transport: kind });
      const common = {
        hubUrl: this.o.hubUrl,
        timers: this.timers,
        log: this.o.log,
        onFrame: (frame) => this.dispatch(frame),
        onClose: () => this.lost(transport, "connection closed")
      };
      const transport = kind === "ws" ? new WebSocketTransport({ ...common, WebSocketImpl: this.o.WebSocketImpl, doc: this.o.doc, openWithinMs: caution?.openWithinMs }) : new SseTransport({ ...common, gmRequest: this.o.gmRequest, manager: this.o.manager, memo: this.o.memo });
      transport.heartbeatState = this.o.heartbeatState;
      this.transport = transport;
      try {
        const fields = { ...this.o.helloFields(), clientId: this.o.identity.clientId };
        const welcome = await transport.open(fields);
        if (this.transport !== transport) {
          transport.close();
          return;
        }
        this.welcome = welcome;
        this.o.identity.clientId = welcome.client_id;
        this.machine.open();
        this.emitState({ state: "open", transport: kind, error: null, clientId: welcome.client_id, role: welcome.role });
        this.dispatch(welcome);
        this.flush();
      } catch (err) {
        if (err.refused) this.machine.block(kind);
        if (caution?.notice) this.emitState({ notice: caution.notice });
        this.lost(transport, err.message);
      }
    }
    lost(transport, reason) {
      if (transport !== this.transport) return;
      transport.close();
      this.transport = null;
      const next = this.machine.lost();
      if (!next) return;
      this.emitState({ state: "waiting", error: reason, retryInMs: next.delayMs, transport: next.transport });
      this.timers.setTimeout(() => this.attempt(), next.delayMs);
    }
    dispatch(frame) {
      for (const fn of this.listeners.frame) {
        try {
          fn(frame);
        } catch (err) {
          this.o.log("error", `frame handler failed: ${err.message}`);
        }
      }
    }
    get connected() {
      return this.status.state === "open";
    }
    /** Sends now when connected, else queues (bounded: the oldest `chunk` frames go first). */
    send(frame) {
      if (this.connected && this.queue.length === 0 && this.transport?.send(frame)) return;
      this.queue.push(frame);
      if (this.queue.length > MAX_QUEUED_FRAMES) {
        const i = this.queue.findIndex((f) => f.type === "chunk");
        this.queue.splice(i === -1 ? 0 : i, 1);
      }
      if (this.connected) this.flush();
    }
    /**
     * One of this tab's task attachments from the hub (`GET /files/ID`), through the manager's own
     * request function as bytes (`responseType: 'arraybuffer'`): the token and the client id go in
     * its headers, never into the page. Resolves with what the manager gave as the response
     * (ArrayBuffer, Blob, …; attach.js `bytesOf`); rejects on anything but 200.
     */
    fetchFile(id, { timeoutMs = 12e4 } = {}) {
      const request = this.o.gmRequest;
      if (!request) return Promise.reject(new Error("the userscript manager gives no GM_xmlhttpRequest / 脚本管理器未提供 GM_xmlhttpRequest"));
      const base = this.transport?.hubUrl || this.o.hubUrl;
      const clientId = this.status.clientId || this.o.identity?.clientId;
      const headers = { Authorization: `Bearer ${this.o.helloFields().token}` };
      if (clientId) headers["X-AIcard-Client"] = clientId;
      return new Promise((resolve, reject) => {
        const fail = (why) => reject(new Error(`GET /files/${id}: ${why}`));
        try {
          request({
            method: "GET",
            url: `${base}/files/${encodeURIComponent(id)}`,
            headers,
            responseType: "arraybuffer",
            timeout: timeoutMs,
            onload: (res) => {
              if (res.status !== 200) fail(`HTTP ${res.status}${res.status === 404 ? " (unknown to the hub or not this tab's task)" : ""}`);
              else resolve(res.response ?? null);
            },
            onerror: () => fail("hub unreachable"),
            ontimeout: () => fail("timed out")
          });
        } catch (err) {
          fail(err.message);
        }
      });
    }
    flush() {
      while (this.queue.length && this.connected) {
        if (!this.transport.send(this.queue[0])) return;
        this.queue.shift();
      }
    }
  };

  // src/core/page-hooks.js
  function pageHooks(win, bridge, wrap, give) {
    "use strict";
    const absolute = (url) => {
      try {
        return new URL(String(url), win.location.href).href;
      } catch (e) {
        return String(url);
      }
    };
    const describe = (input, init3) => {
      const isRequest = Boolean(input && typeof input === "object" && "url" in input && typeof input.clone === "function");
      const method = String(init3 && init3.method || isRequest && input.method || "GET").toUpperCase();
      return { url: absolute(isRequest ? input.url : input), method, isRequest };
    };
    const offer = give || ((obj) => obj);
    const bodyText = async (input, init3, isRequest) => {
      try {
        return await bodyTextOf(input, init3, isRequest);
      } catch (e) {
        return null;
      }
    };
    const bodyTextOf = async (input, init3, isRequest) => {
      const body = init3 && init3.body;
      if (typeof body === "string") return body;
      if (body && typeof body === "object" && typeof body.entries === "function" && typeof body.get === "function") {
        const pairs = [];
        for (const [k, v] of body.entries()) if (typeof v === "string") pairs.push(`${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
        return pairs.join("&");
      }
      if (body && typeof body === "object" && typeof body.toString === "function" && String(body).includes("=")) return String(body);
      if (isRequest && !body) {
        try {
          return await input.clone().text();
        } catch (e) {
          return null;
        }
      }
      return null;
    };
    const origFetch = win.fetch;
    if (typeof origFetch === "function") {
      const readCopy = (res, copy, info) => {
        const sink = bridge.open({ ...info, status: res.status, contentType: res.headers.get("content-type") || "" });
        if (!sink) return;
        if (!copy.body) {
          sink.end();
          return;
        }
        let over = false;
        const writer = offer({
          write: (chunk2) => {
            sink.push(chunk2);
          },
          close: () => {
            if (!over) {
              over = true;
              sink.end();
            }
          },
          abort: (err) => {
            if (!over) {
              over = true;
              sink.fail(`stream interrupted: ${err && err.message}`);
            }
          }
        });
        try {
          copy.body.pipeTo(new win.WritableStream(writer)).then(void 0, wrap((err) => {
            if (!over) {
              over = true;
              sink.fail(`stream interrupted: ${err && err.message}`);
            }
          }));
        } catch (err) {
          over = true;
          sink.fail(`cannot read the stream: ${err && err.message}`);
        }
      };
      const hooked = function fetch(...args) {
        const [input, init3] = args;
        let info = null;
        try {
          info = describe(input, init3);
          if (!bridge.matches(info.url, info.method)) info = null;
        } catch (e) {
          info = null;
        }
        const promise = origFetch.call(this === void 0 || this === null ? win : this, ...args);
        if (!info) return promise;
        const body = bodyText(input, init3, info.isRequest);
        promise.then(wrap((res) => {
          let copy = null;
          try {
            copy = res.clone();
          } catch (e) {
            return;
          }
          body.then((requestBody) => readCopy(res, copy, { url: info.url, method: info.method, requestBody }), () => {
          });
        }), wrap((err) => {
          body.then((requestBody) => {
            const sink = bridge.open({ url: info.url, method: info.method, requestBody, status: 0, contentType: "" });
            if (sink) sink.fail(`network error: ${err && err.message}`);
          }, () => {
          });
        }));
        return promise;
      };
      win.fetch = wrap(hooked);
    }
    const XHR = win.XMLHttpRequest;
    if (XHR && XHR.prototype) {
      const proto = XHR.prototype;
      const origOpen = proto.open;
      const origSend = proto.send;
      const pending = /* @__PURE__ */ new WeakMap();
      const watch = (xhr, info) => {
        let sink = null;
        let offset = 0;
        let finished = false;
        const encoder = new TextEncoder();
        const textual = () => xhr.responseType === "" || xhr.responseType === "text";
        const open = () => {
          if (!sink) sink = bridge.open({ ...info, status: xhr.status, contentType: xhr.getResponseHeader("content-type") || "" });
          return sink;
        };
        const drain = () => {
          if (!textual()) return;
          const text = xhr.responseText;
          if (text.length > offset) {
            const fresh = text.slice(offset);
            offset = text.length;
            const s = open();
            if (s) s.push(encoder.encode(fresh));
          }
        };
        const finish2 = () => {
          if (finished) return;
          finished = true;
          if (xhr.status === 0) {
            const s2 = open();
            if (s2) s2.fail("network error");
            return;
          }
          if (textual()) drain();
          else {
            const s2 = open();
            const r = xhr.response;
            if (s2 && r && typeof r.byteLength === "number") s2.push(new Uint8Array(r));
            else if (s2 && xhr.responseType === "json" && r != null) s2.push(encoder.encode(JSON.stringify(r)));
          }
          const s = open();
          if (s) s.end();
        };
        xhr.addEventListener("readystatechange", wrap(() => {
          if (xhr.readyState === 2) open();
          else if (xhr.readyState === 3) drain();
          else if (xhr.readyState === 4) finish2();
        }));
        xhr.addEventListener("progress", wrap(drain));
        xhr.addEventListener("abort", wrap(() => {
          finished = true;
          const s = open();
          if (s) s.fail("request aborted");
        }));
      };
      proto.open = wrap(function open(...args) {
        const [method, url] = args;
        try {
          const info = { url: absolute(url), method: String(method).toUpperCase() };
          if (bridge.matches(info.url, info.method)) pending.set(this, info);
          else pending.delete(this);
        } catch (e) {
        }
        return origOpen.call(this, ...args);
      });
      proto.send = wrap(function send(...args) {
        const body = args[0];
        const info = pending.get(this);
        if (info) {
          try {
            watch(this, { ...info, requestBody: typeof body === "string" ? body : null });
          } catch (e) {
          }
        }
        return origSend.call(this, ...args);
      });
    }
  }
  function eventBridge(win, name) {
    "use strict";
    const doc = win.document;
    const Custom = win.CustomEvent;
    const dispatch = doc.dispatchEvent.bind(doc);
    const stringify = JSON.stringify;
    const fromCharCode = String.fromCharCode;
    let next = 0;
    const send = (msg, cancelable) => dispatch(new Custom(name, { detail: stringify(msg), cancelable: Boolean(cancelable) }));
    const binary = (u8) => {
      let s = "";
      for (let i = 0; i < u8.length; i += 32768) s += fromCharCode.apply(null, u8.subarray(i, i + 32768));
      return s;
    };
    return {
      matches: (url, method) => !send({ op: "match", url, method }, true),
      open(info) {
        next += 1;
        const id = next;
        send({ op: "open", id, info });
        return {
          push: (u8) => send({ op: "data", id, bytes: binary(u8) }),
          end: () => send({ op: "end", id }),
          fail: (reason) => send({ op: "fail", id, reason: String(reason) })
        };
      },
      ready: () => send({ op: "ready" })
    };
  }

  // src/core/realm.js
  function randomName() {
    const bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);
    return `aicard-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
  }
  function toBytes2(binary) {
    const out = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) out[i] = binary.charCodeAt(i) & 255;
    return out;
  }
  function managerName(info) {
    try {
      return String(info && info.scriptHandler || "").toLowerCase();
    } catch {
      return "";
    }
  }
  function managerWorld(info) {
    const i = info || {};
    const handler = managerName(i);
    let said = "";
    try {
      said = String(i.injectInto || (handler === "scriptcat" ? "" : i.sandboxMode) || i.script?.options?.inject_into || "").toLowerCase();
    } catch {
      said = "";
    }
    if (["page", "raw"].includes(said)) return "page";
    if (["js", "javascript"].includes(said)) return "sandbox";
    if (["content", "dom", "isolated", "user_script"].includes(said)) return "isolated";
    return null;
  }
  function isNativeExport(exportFn) {
    if (typeof exportFn !== "function") return false;
    try {
      return /\{\s*\[native code\]\s*\}\s*$/.test(Function.prototype.toString.call(exportFn));
    } catch {
      return false;
    }
  }
  function chooseMode({ win, ownWindow, exportFn, info, hasRuntime }) {
    const sandbox = isNativeExport(exportFn);
    const said = managerWorld(info);
    if (said === "page") return "page";
    if (said === "sandbox") return sandbox ? "xray" : "page";
    if (said === "isolated") return sandbox ? "xray" : "inject";
    if (sandbox && win !== ownWindow) return "xray";
    if (hasRuntime) return "inject";
    return "page";
  }
  function pageWindowOf(win) {
    try {
      const page = win && win.wrappedJSObject;
      if (page && typeof page === "object") return page;
    } catch {
    }
    return win;
  }
  function installNetworkHooks({ win, bridge, log, env = {} }) {
    const doc = win.document;
    const late = doc.readyState !== "loading" || doc.scripts && doc.scripts.length > 0;
    const exportFn = env.exportFunction ?? (typeof exportFunction === "function" ? exportFunction : void 0);
    let info = env.info;
    if (info === void 0) {
      try {
        info = typeof GM_info === "object" ? GM_info : null;
      } catch {
        info = null;
      }
    }
    const hasRuntime = env.hasRuntime ?? Boolean(globalThis.chrome?.runtime?.id);
    let mode = chooseMode({ win, ownWindow: env.ownWindow ?? globalThis.window, exportFn, info, hasRuntime });
    if (mode === "inject" && !injectHooks(doc, bridge, log)) {
      log("warn", "page script injection refused; hooking from this world / 页面脚本注入被拒绝");
      mode = "page";
    }
    if (mode === "xray") {
      const page = pageWindowOf(win);
      const wrap = (fn) => exportFn(fn, page);
      const ours = {
        matches: (url, method) => bridge.matches(String(url), String(method)),
        open(meta) {
          const sink = bridge.open(meta);
          return sink && { push: (u8) => sink.push(new Uint8Array(u8)), end: () => sink.end(), fail: (r) => sink.fail(String(r)) };
        }
      };
      const give = (obj) => typeof cloneInto === "function" ? cloneInto(obj, page, { cloneFunctions: true }) : obj;
      pageHooks(page, ours, wrap, give);
    } else if (mode === "page") {
      pageHooks(win, bridge, (fn) => fn, (obj) => obj);
    }
    return { mode, late };
  }
  function injectHooks(doc, bridge, log) {
    const name = randomName();
    const sinks = /* @__PURE__ */ new Map();
    let ready = false;
    doc.addEventListener(name, (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.detail);
      } catch {
        return;
      }
      if (!msg || typeof msg !== "object") return;
      switch (msg.op) {
        case "ready":
          ready = true;
          break;
        case "match":
          if (bridge.matches(String(msg.url), String(msg.method))) ev.preventDefault();
          break;
        case "open": {
          const sink = bridge.open(msg.info || {});
          if (sink) sinks.set(msg.id, sink);
          break;
        }
        case "data":
          sinks.get(msg.id)?.push(toBytes2(String(msg.bytes || "")));
          break;
        case "end":
          sinks.get(msg.id)?.end();
          sinks.delete(msg.id);
          break;
        case "fail":
          sinks.get(msg.id)?.fail(String(msg.reason));
          sinks.delete(msg.id);
          break;
        default:
          break;
      }
      ev.stopImmediatePropagation();
    }, true);
    const code = `(${pageHooks.toString()})(window, (function () { var b = (${eventBridge.toString()})(window, ${JSON.stringify(name)}); b.ready(); return b; })(), function (f) { return f; }, function (o) { return o; });`;
    try {
      const script = doc.createElement("script");
      script.textContent = code;
      (doc.head || doc.documentElement).appendChild(script);
      script.remove();
    } catch (err) {
      log("warn", `script injection failed: ${err.message}`);
      return false;
    }
    return ready;
  }

  // src/core/panel.js
  var CSS = `
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
  var HOOK_NAMES = { page: "页面 page", inject: "注入 injected", xray: "沙箱 sandbox" };
  function captureText({ mode, late, path }) {
    const via = path === "dom" ? "页面文字 DOM (网络钩子没捕获到)" : path === "network" ? "网络 network" : "等待回复 waiting";
    return `${via} · ${HOOK_NAMES[mode] || mode}${late ? " · 钩子较晚 late hooks" : ""}`;
  }
  var ROLE_NAMES = { master: "总指挥 Master", foreman: "包工头 Foreman", worker: "工人 Worker" };
  var STATE_NAMES = {
    open: "已连接 connected",
    connecting: "连接中 connecting",
    waiting: "重连等待 retrying",
    stopped: "已停止 stopped",
    idle: "未连接 idle",
    unpaired: "未配对 not paired"
  };
  var DONE_STATES = /* @__PURE__ */ new Set(["completed", "failed", "skipped", "cancelled"]);
  var FILE_STATES = {
    waiting: "等待 waiting",
    attaching: "附加中 attaching",
    attached: "已附加 attached",
    refused: "被拒绝 refused",
    dropped: "未附加 not attached"
  };
  var AGENT_STATES = {
    running: "运行命令 running",
    sent: "已发回结果 results sent",
    paused: "已暂停 paused",
    ended: "已结束 ended"
  };
  var AGENT_CONTROLS = Object.freeze({
    "agent-stop": "?<agent stop>!",
    "agent-pause": "?<agent pause>!",
    "agent-resume": "?<agent resume>!"
  });
  var ENDED_KEPT = 2;
  var Panel = class {
    constructor({ doc, hub, findInput: findInput2, version, debug = false }) {
      Object.assign(this, { doc, hub, findInput: findInput2, version, debug });
      this.state = { hub: { state: "idle" }, role: null, label: null, task: null, result: null, capture: null, parked: null };
      this.runs = /* @__PURE__ */ new Map();
      this.agents = /* @__PURE__ */ new Map();
      this.output = /* @__PURE__ */ new Map();
      this.files = null;
      this.images = [];
      this.watch(hub);
    }
    /**
     * Follows the task's files and the reply's images from the frames themselves: a `task` (or an agent
     * loop's `deliver`) with `attachments` from the hub, and what the tab sends — `task_update` (`attaching`
     * done/of, `sent`, `failed` with `attachment_refused`) and `turn_end` (its Markdown images). The panel
     * only reads them.
     */
    watch(hub) {
      if (!hub || typeof hub.send !== "function") return;
      hub.on?.("frame", (frame) => this.hubFrame(frame));
      const send = hub.send.bind(hub);
      hub.send = (frame) => {
        try {
          this.sentFrame(frame);
        } catch {
        }
        return send(frame);
      };
    }
    hubFrame(frame) {
      if (frame?.type !== "task" && frame?.type !== "deliver") return;
      if (!Array.isArray(frame.attachments) || frame.attachments.length === 0) {
        if (this.files) {
          this.files = null;
          this.render();
        }
        return;
      }
      const key = frame.type === "task" ? "task_id" : "deliver_id";
      this.files = {
        key,
        id: frame[key],
        done: 0,
        of: frame.attachments.length,
        list: frame.attachments.map((a) => ({ name: String(a?.name ?? "?"), size: Number(a?.size) || 0, state: "waiting" }))
      };
      this.render();
    }
    sentFrame(frame) {
      if (frame?.type === "turn_end") {
        this.images = markdownImages(frame.text);
        this.render();
        return;
      }
      const files = this.files;
      if (frame?.type !== "task_update" || !files || frame[files.key] !== files.id) return;
      if (frame.state === "attaching") {
        files.done = Number(frame.done) || 0;
        files.list.forEach((f, i) => {
          if (f.state === "refused") return;
          f.state = i < files.done ? "attached" : i === files.done ? "attaching" : "waiting";
        });
      } else if (["sent", "streaming", "done"].includes(frame.state)) {
        files.done = files.of;
        for (const f of files.list) if (f.state !== "refused") f.state = "attached";
      } else if (frame.state === "failed") {
        const reason = String(frame.error || frame.trouble || "");
        if (frame.trouble === "attachment_refused") {
          const named = files.list.find((f) => f.state !== "attached" && reason.includes(f.name)) || files.list.find((f) => f.state === "attaching") || files.list.find((f) => f.state === "waiting");
          if (named) Object.assign(named, { state: "refused", reason });
        }
        for (const f of files.list) if (f.state === "waiting" || f.state === "attaching") f.state = "dropped";
      } else {
        return;
      }
      this.render();
    }
    el(tag, className, text) {
      const e = this.doc.createElement(tag);
      if (className) e.className = className;
      if (text !== void 0) e.textContent = text;
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
      } catch {
      }
      root.append(this.el("style", null, CSS));
    }
    mount() {
      const host = this.doc.createElement("aicard-panel");
      host.setAttribute("data-aicard-panel", "");
      this.root = host.attachShadow({ mode: "closed" });
      this.style(this.root);
      this.box = this.el("div", "box");
      this.box.setAttribute("part", "box");
      const head = this.el("div", "head");
      const fold = this.el("button", "fold", "–");
      fold.title = "收起/展开 collapse";
      this.dot = this.el("span", "dot");
      head.append(this.dot, this.el("b", null, "AIcard"), fold);
      this.body = this.el("div", "body");
      this.box.append(head, this.body);
      this.root.append(this.box);
      for (const [k, v] of Object.entries({ position: "fixed", "z-index": "2147483646", display: "block", width: "260px", margin: "0", padding: "0" })) {
        host.style.setProperty(k, v, "important");
      }
      this.host = host;
      this.doc.documentElement.appendChild(host);
      fold.addEventListener("click", () => this.box.classList.toggle("collapsed"));
      this.body.addEventListener("click", (ev) => this.onClick(ev));
      this.enableDrag(head);
      this.place(this.doc.defaultView.innerWidth - 272, 12);
      this.doc.defaultView.addEventListener("resize", () => this.place(this.pos.x, this.pos.y));
      this.doc.defaultView.setInterval(() => {
        if (!host.isConnected) this.doc.documentElement.appendChild(host);
      }, 2e3);
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
      this.host.style.setProperty("left", `${x}px`, "important");
      this.host.style.setProperty("top", `${y}px`, "important");
      this.publish();
    }
    /** Debug only: `describe()` on the host as `data-describe`, readable from any world. */
    publish() {
      if (!this.debug || !this.box) return;
      try {
        this.host.setAttribute("data-describe", JSON.stringify(this.describe()));
      } catch {
      }
    }
    enableDrag(handle) {
      handle.addEventListener("pointerdown", (down) => {
        if (down.target.closest("button")) return;
        const start2 = { ...this.pos, px: down.clientX, py: down.clientY };
        const move = (ev) => {
          this.moveTo(start2.x + ev.clientX - start2.px, start2.y + ev.clientY - start2.py);
        };
        const up = () => {
          handle.removeEventListener("pointermove", move);
          handle.removeEventListener("pointerup", up);
          this.place(this.pos.x, this.pos.y);
        };
        handle.setPointerCapture?.(down.pointerId);
        handle.addEventListener("pointermove", move);
        handle.addEventListener("pointerup", up);
      });
    }
    onClick(ev) {
      const button = ev.target.closest("button[data-act]");
      if (!button) return;
      const { act, flow } = button.dataset;
      if (act === "debug" && this.debugRun) {
        Promise.resolve().then(() => this.debugRun(button.dataset.helper)).catch(() => {
        });
        return;
      }
      if (AGENT_CONTROLS[act]) {
        this.hub.send(userInput(AGENT_CONTROLS[act]));
        return;
      }
      if (["pause", "resume", "stop"].includes(act) && flow) {
        this.hub.send(userInput(`?<manager ${act} ${flow}>!`));
      }
    }
    /** What the panel shows, with its buttons' positions (debug helper and tests). */
    describe() {
      const rect = (el) => {
        const r = el.getBoundingClientRect();
        return { x: r.x, y: r.y, width: r.width, height: r.height };
      };
      return {
        rect: rect(this.host),
        collapsed: this.box.classList.contains("collapsed"),
        text: this.box.innerText,
        buttons: [...this.root.querySelectorAll("button")].map((b) => ({ act: b.dataset.act || "fold", flow: b.dataset.flow, rect: rect(b) }))
      };
    }
    update(patch) {
      Object.assign(this.state, patch);
      this.render();
    }
    /** `cmd_output`: live output of a running command, shown until its `cmd_result`. */
    commandOutput(frame) {
      const id = frame.cmd_id || "";
      const text = `${this.output.get(id)?.text || ""}${frame.chunk || ""}`;
      this.output.set(id, { command: frame.command || "", text: text.slice(-400) });
      this.render();
    }
    commandDone(id) {
      if (this.output.delete(id || "")) this.render();
    }
    /** Folds a `flow_event` into the run table (an agent session's into the agent table). */
    flowEvent(ev) {
      if (ev.detail?.kind === "agent") {
        this.agentEvent(ev);
        return;
      }
      const run = this.runs.get(ev.run_id) || { flow: ev.flow, state: "running", nodes: /* @__PURE__ */ new Map() };
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
      const id = String(ev.run_id || [...this.agents.keys()].pop() || "");
      const prev = this.agents.get(id) || {};
      const name = typeof ev.flow === "string" && ev.flow.startsWith("agent:") ? ev.flow.slice(6) : prev.name;
      this.agents.delete(id);
      const note = ev.state === "note";
      const more = { notRun: texts(d.not_run), cancelled: texts(d.cancelled), jobs: texts(d.jobs) };
      const listed = more.notRun.length + more.cancelled.length + more.jobs.length > 0;
      let lists = {};
      if (ev.state === "ended") lists = { ...more, notRun: [...prev.notRun || [], ...more.notRun] };
      else if (note) lists = { notRun: [...prev.notRun || [], ...more.notRun], cancelled: [...prev.cancelled || [], ...more.cancelled], jobs: [...prev.jobs || [], ...more.jobs] };
      this.agents.set(id, {
        ...lists,
        name,
        state: (note ? prev.state : ev.state) || prev.state || (ev.run_id ? "running" : "ended"),
        round: d.round ?? prev.round,
        of: d.of ?? prev.of,
        command: ev.state === "running" ? d.command : note ? prev.command : void 0,
        // A note that only lists what did not run keeps the reason the session ended.
        why: note && listed && prev.why || whyText(d.why) || (ev.state === "running" || ev.state === "sent" ? void 0 : prev.why)
      });
      const ended = [...this.agents].filter(([, a]) => a.state === "ended");
      for (const [old] of ended.slice(0, Math.max(0, ended.length - ENDED_KEPT))) this.agents.delete(old);
      this.render();
    }
    renderAgents() {
      const wrap = this.el("div", "agent");
      for (const [session, a] of this.agents) {
        const el = this.el("div");
        el.dataset.session = session;
        const round = a.round !== void 0 ? ` · round ${a.round}/${a.of ?? "?"}` : "";
        el.append(this.el("div", null, `代理 agent${a.name ? ` ${a.name}` : ""}${round} · ${AGENT_STATES[a.state] || a.state}`));
        if (a.command) el.append(this.el("div", "cmd", `⋯ ${a.command}`.slice(0, 160)));
        if (a.why) el.append(this.note(a.why));
        if (a.notRun?.length) el.append(this.list("not-run", "未运行 / not run", a.notRun));
        if (a.cancelled?.length) el.append(this.list("cancelled", "已取消 / cancelled", a.cancelled));
        if (a.jobs?.length) el.append(this.list("jobs muted", "作业 / jobs", a.jobs));
        if (a.state !== "ended") {
          const paused = a.state === "paused";
          el.append(
            this.button(paused ? "agent-resume" : "agent-pause", paused ? "继续 Resume" : "暂停 Pause"),
            " ",
            this.button("agent-stop", "停止 Stop")
          );
        }
        wrap.append(el);
      }
      return wrap;
    }
    /** `LABEL: a · b · c` as text (commands are never HTML), cut to a few lines. */
    list(className, label, items) {
      const shown2 = items.map((c) => c.length > 120 ? `${c.slice(0, 119)}…` : c);
      return this.el("div", `cmd ${className}`, `${label}: ${shown2.join(" · ")}`.slice(0, 480));
    }
    row(label, value) {
      const v = this.doc.createElement("span");
      v.textContent = value ?? "—";
      const l = this.doc.createElement("span");
      l.textContent = label;
      const row = this.doc.createElement("div");
      row.className = "row";
      row.append(l, v);
      return row;
    }
    render() {
      if (!this.body) return;
      const { hub, role, label, task, result, capture, parked } = this.state;
      this.dot.className = `dot ${hub.state}`;
      const agent = [...this.agents.values()].pop();
      this.mark({
        files: this.files ? this.files.list.map((f) => `${f.name}:${f.state}`).join("|") : void 0,
        images: this.images.length ? String(this.images.length) : void 0,
        state: hub.state,
        transport: hub.transport,
        capture: capture?.path,
        hooks: capture?.mode,
        role,
        agent: agent?.state,
        "agent-round": agent?.round !== void 0 ? `${agent.round}/${agent.of ?? "?"}` : void 0
      });
      const hubText = `${STATE_NAMES[hub.state] || hub.state}${hub.transport ? ` (${hub.transport})` : ""}`;
      const rows = [
        this.row("连接 Hub", hubText + (hub.state === "waiting" && hub.error ? ` — ${hub.error}` : "")),
        this.row("角色 Role", ROLE_NAMES[role] || role),
        this.row("标签 Label", label),
        this.row("任务 Task", task)
      ];
      if (capture) rows.push(this.row("捕获 Capture", captureText(capture)));
      if (hub.notice) rows.push(this.note(hub.notice));
      if (parked) rows.push(this.note(parkedText(parked)));
      for (const [, out] of this.output) rows.push(this.row(`⋯ ${out.command}`.slice(0, 30), out.text.slice(-120)));
      if (result) rows.push(this.row("结果 Result", result));
      if (this.debugNames) rows.push(this.renderDebug());
      this.body.replaceChildren(...rows);
      if (this.runs.size) this.body.append(this.renderFlows());
      if (this.agents.size) this.body.append(this.renderAgents());
      if (this.files) this.body.append(this.renderFiles());
      if (this.images.length) this.body.append(this.renderImages());
      this.publish();
    }
    /** The current task's files: a progress bar (done of all) and one line per file, each with its name. */
    renderFiles() {
      const { done, of, list } = this.files;
      const wrap = this.el("div", "files");
      wrap.append(this.row("附件 Files", `${Math.min(done, of)}/${of}`));
      const bar = this.el("progress");
      bar.max = of;
      bar.value = Math.min(done, of);
      bar.setAttribute("aria-label", `附件进度 attachment progress ${Math.min(done, of)}/${of}`);
      const ul = this.el("ul");
      ul.setAttribute("aria-label", "本任务的附件 / files of this task");
      for (const f of list) {
        const text = `${f.name} · ${fileSize(f.size)} · ${FILE_STATES[f.state] || f.state}${f.reason ? ` — ${f.reason}` : ""}`;
        const li = this.el("li", f.state, text.length > 240 ? `${text.slice(0, 239)}…` : text);
        li.setAttribute("aria-label", text);
        li.dataset.state = f.state;
        ul.append(li);
      }
      wrap.append(bar, ul);
      return wrap;
    }
    /** The images of the last reply, each a link to its address (a `data:` image is named, not linked). */
    renderImages() {
      const wrap = this.el("div", "images");
      wrap.append(this.row("图片 Images", `${this.images.length}`));
      const ul = this.el("ul");
      ul.setAttribute("aria-label", "上一条回复中的图片 / images in the last reply");
      for (const img of this.images) {
        const name = img.alt || imageName(img.url);
        const li = this.el("li");
        if (/^https?:/i.test(img.url)) {
          const a = this.el("a", null, `🖼 ${name}`);
          a.href = img.url;
          a.target = "_blank";
          a.rel = "noopener noreferrer";
          a.setAttribute("aria-label", `图片 image: ${name}`);
          li.append(a);
        } else {
          li.textContent = `🖼 ${name} (内嵌 inline)`;
          li.setAttribute("aria-label", `内嵌图片 inline image: ${name}`);
        }
        ul.append(li);
      }
      wrap.append(ul);
      return wrap;
    }
    renderFlows() {
      const wrap = this.doc.createElement("div");
      wrap.className = "flows";
      wrap.append(this.row("流程 Flows", `${this.runs.size}`));
      for (const [runId, run] of this.runs) {
        const total = run.nodes.size;
        const done = [...run.nodes.values()].filter((s) => DONE_STATES.has(s)).length;
        const el = this.doc.createElement("div");
        el.className = "flow";
        el.dataset.run = runId;
        const title = this.doc.createElement("div");
        title.textContent = `${run.flow} · ${run.state} · ${done}/${total}`;
        const bar = this.doc.createElement("div");
        bar.className = "bar";
        const fill = this.doc.createElement("i");
        fill.style.width = `${total ? Math.round(100 * done / total) : 0}%`;
        bar.append(fill);
        el.append(title, bar);
        if (!DONE_STATES.has(run.state)) {
          const paused = run.state === "paused";
          el.append(
            this.button(paused ? "resume" : "pause", paused ? "继续 Resume" : "暂停 Pause", run.flow),
            " ",
            this.button("stop", "停止 Stop", run.flow)
          );
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
      const wrap = this.doc.createElement("div");
      wrap.className = "debug";
      wrap.append(this.row("调试 Debug", this.state.debugOut || ""));
      for (const name of this.debugNames) {
        const b = this.button("debug", name.replace(/^mcp/, ""));
        b.dataset.helper = name;
        wrap.append(b, " ");
      }
      return wrap;
    }
    note(text) {
      return this.el("div", "note", text);
    }
    /** The panel's state as attributes of its host, which every world (and a test) can read. */
    mark(attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === void 0 || v === null) this.host.removeAttribute(`data-${k}`);
        else this.host.setAttribute(`data-${k}`, String(v));
      }
    }
    button(act, text, flow) {
      const b = this.doc.createElement("button");
      b.dataset.act = act;
      if (flow !== void 0) b.dataset.flow = flow;
      b.textContent = text;
      return b;
    }
  };
  function fileSize(bytes) {
    const n = Number(bytes) || 0;
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
    return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  }
  function imageName(url) {
    if (/^data:/i.test(url)) return "data:";
    try {
      const last = new URL(url).pathname.split("/").filter(Boolean).pop();
      return decodeURIComponent(last || url).slice(0, 60);
    } catch {
      return String(url).slice(0, 60);
    }
  }
  function texts(list) {
    return Array.isArray(list) ? list.filter((x) => x !== null && x !== void 0 && x !== "").map(String) : [];
  }
  function whyText(why) {
    if (!why) return void 0;
    if (typeof why === "string") return why;
    return why.text || why.message || why.code || JSON.stringify(why);
  }
  function parkedText(trouble12) {
    const what = trouble12 === "login" ? "站点要求登录 / the site wants you to log in" : "站点要求人机验证 / the site asks for a captcha or human check";
    return `⏸ 已暂停接收任务：${what}。完成后在此标签页发一句话即可恢复 / parked, no tasks until you act: ${what}. When done, send any message in this tab to resume.`;
  }

  // src/core/storage.js
  var PLACEHOLDER_PREFIX = "__AICARD_";
  var CLIENT_ID_KEY = "aicard.client_id";
  var DEFAULT_HUB_URL = "http://127.0.0.1:8027";
  function isPlaceholder(value) {
    return typeof value !== "string" || value === "" || value.startsWith(PLACEHOLDER_PREFIX);
  }
  var Settings = class {
    constructor(gm) {
      this.gm = gm;
    }
    get(key, fallback) {
      try {
        const value = this.gm.getValue(key, fallback);
        return value === void 0 ? fallback : value;
      } catch {
        return fallback;
      }
    }
    set(key, value) {
      this.gm.setValue(key, value);
    }
    /**
     * Moves the token the hub embedded into GM storage (first run, or the hub's token changed)
     * and returns the stored one. The token is never written to the page.
     */
    adoptToken(embedded) {
      if (!isPlaceholder(embedded) && this.get("token", "") !== embedded) this.set("token", embedded);
      return this.get("token", "");
    }
    /** Hub URL: the embedded one wins (the hub served this script), else the stored or default. */
    adoptHubUrl(embedded) {
      if (!isPlaceholder(embedded)) {
        const url = String(embedded).replace(/\/+$/, "");
        if (this.get("hub_url", "") !== url) this.set("hub_url", url);
        return url;
      }
      return this.get("hub_url", DEFAULT_HUB_URL);
    }
  };
  var TabIdentity = class {
    constructor(sessionStorage) {
      this.store = sessionStorage;
    }
    get clientId() {
      try {
        return this.store.getItem(CLIENT_ID_KEY) || void 0;
      } catch {
        return void 0;
      }
    }
    set clientId(id) {
      try {
        this.store.setItem(CLIENT_ID_KEY, id);
      } catch {
      }
    }
  };

  // src/core/sha256.js
  var K = new Uint32Array([
    1116352408,
    1899447441,
    3049323471,
    3921009573,
    961987163,
    1508970993,
    2453635748,
    2870763221,
    3624381080,
    310598401,
    607225278,
    1426881987,
    1925078388,
    2162078206,
    2614888103,
    3248222580,
    3835390401,
    4022224774,
    264347078,
    604807628,
    770255983,
    1249150122,
    1555081692,
    1996064986,
    2554220882,
    2821834349,
    2952996808,
    3210313671,
    3336571891,
    3584528711,
    113926993,
    338241895,
    666307205,
    773529912,
    1294757372,
    1396182291,
    1695183700,
    1986661051,
    2177026350,
    2456956037,
    2730485921,
    2820302411,
    3259730800,
    3345764771,
    3516065817,
    3600352804,
    4094571909,
    275423344,
    430227734,
    506948616,
    659060556,
    883997877,
    958139571,
    1322822218,
    1537002063,
    1747873779,
    1955562222,
    2024104815,
    2227730452,
    2361852424,
    2428436474,
    2756734187,
    3204031479,
    3329325298
  ]);
  var hex = (words) => Array.from(words, (w) => (w >>> 0).toString(16).padStart(8, "0")).join("");
  var rotr = (x, n) => x >>> n | x << 32 - n;
  function sha256Plain(bytes) {
    const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const bitLength = data.length * 8;
    const padded = new Uint8Array(data.length + 9 + 63 >> 6 << 6);
    padded.set(data);
    padded[data.length] = 128;
    const view = new DataView(padded.buffer);
    view.setUint32(padded.length - 8, Math.floor(bitLength / 2 ** 32));
    view.setUint32(padded.length - 4, bitLength >>> 0);
    const h = new Uint32Array([1779033703, 3144134277, 1013904242, 2773480762, 1359893119, 2600822924, 528734635, 1541459225]);
    const w = new Uint32Array(64);
    for (let off = 0; off < padded.length; off += 64) {
      for (let i = 0; i < 16; i += 1) w[i] = view.getUint32(off + i * 4);
      for (let i = 16; i < 64; i += 1) {
        const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ w[i - 15] >>> 3;
        const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ w[i - 2] >>> 10;
        w[i] = w[i - 16] + s0 + w[i - 7] + s1 >>> 0;
      }
      let [a, b, c, d, e, f, g, k] = h;
      for (let i = 0; i < 64; i += 1) {
        const t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + (e & f ^ ~e & g) + K[i] + w[i] >>> 0;
        const t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + (a & b ^ a & c ^ b & c) >>> 0;
        k = g;
        g = f;
        f = e;
        e = d + t1 >>> 0;
        d = c;
        c = b;
        b = a;
        a = t1 + t2 >>> 0;
      }
      h[0] += a;
      h[1] += b;
      h[2] += c;
      h[3] += d;
      h[4] += e;
      h[5] += f;
      h[6] += g;
      h[7] += k;
    }
    return hex(h);
  }
  async function sha256Hex(bytes, subtle = globalThis.crypto?.subtle) {
    const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    if (subtle && typeof subtle.digest === "function") {
      try {
        const digest = await subtle.digest("SHA-256", data);
        return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
      } catch {
      }
    }
    return sha256Plain(data);
  }

  // src/core/attach.js
  var ATTACHMENT_REFUSED = "attachment_refused";
  var UPLOAD_WAIT_MS = 9e4;
  var CHIP_APPEAR_MS = 1e4;
  var AttachmentRefused = class extends Error {
    constructor(name, reason) {
      super(`${name}: ${reason}`);
      this.trouble = ATTACHMENT_REFUSED;
      this.fileName = name;
      this.reason = reason;
    }
  };
  var MB2 = 1024 * 1024;
  var sizeText = (n) => n >= MB2 ? `${Math.round(n / MB2 * 10) / 10} MB` : `${Math.ceil(n / 1024)} KB`;
  function extensionOf(name) {
    const m = /\.[^./\\]+$/.exec(String(name || ""));
    return m ? m[0].toLowerCase() : "";
  }
  function acceptMatches(patterns, file) {
    const list = (Array.isArray(patterns) ? patterns : String(patterns || "").split(",")).map((p) => String(p).trim().toLowerCase()).filter(Boolean);
    if (list.length === 0) return true;
    const mime = String(file.mime || file.type || "").toLowerCase();
    const ext = extensionOf(file.name);
    return list.some((p) => {
      if (p.startsWith(".")) return p === ext;
      if (p === "*/*" || p === "*") return true;
      if (p.endsWith("/*")) return mime.startsWith(p.slice(0, -1));
      return p === mime;
    });
  }
  function refusalOf(upload, files, { already = 0, liveAccept = null } = {}) {
    if (!upload) return { name: files[0]?.name ?? "?", reason: "this site takes no files in AIcard yet / 此站点尚不支持附件" };
    const max = Number(upload.maxFiles) || Infinity;
    for (const [i, f] of files.entries()) {
      const accept = liveAccept || upload.accept;
      if (!acceptMatches(accept, f)) {
        return { name: f.name, reason: `the site does not take this type (${f.mime || extensionOf(f.name) || "unknown"}) / 站点不支持此文件类型` };
      }
      if (upload.maxBytes && f.size > upload.maxBytes) {
        return { name: f.name, reason: `${sizeText(f.size)} is over the site's limit of ${sizeText(upload.maxBytes)} / 超过站点的大小上限` };
      }
      if (already + i + 1 > max) {
        return { name: f.name, reason: `more than ${max} files at once / 超过站点的文件数上限 (${max})` };
      }
    }
    return null;
  }
  function all(doc, selectors = []) {
    const out = [];
    for (const sel of selectors || []) {
      let nodes;
      try {
        nodes = doc.querySelectorAll(sel);
      } catch {
        continue;
      }
      for (const el of nodes) if (!out.includes(el)) out.push(el);
    }
    return out;
  }
  var shown = (doc, selectors) => all(doc, selectors).filter(isVisible);
  function uploadState(doc, upload) {
    const errors = shown(doc, upload.error);
    const chips = shown(doc, upload.chip).filter((c) => !errors.some((e) => e === c || c.contains(e) || e.contains(c)));
    return { chips: chips.length, busy: shown(doc, upload.busy).length, errors };
  }
  function errorText(el, name = "") {
    let text = String(el.textContent || "").replace(/\s+/g, " ").trim();
    if (name && text.startsWith(name)) text = text.slice(name.length).replace(/^[\s:：—-]+/, "");
    return text || el.getAttribute?.("title") || el.getAttribute?.("aria-label") || "the site refused the upload / 站点拒绝了上传";
  }
  function findFileInput(doc, upload, composer) {
    const own = all(doc, upload?.input).find((el) => el.tagName === "INPUT" && String(el.type).toLowerCase() === "file" && !el.disabled);
    if (own) return own;
    const inputs = [...doc.querySelectorAll('input[type="file"]')].filter((el) => !el.disabled && !el.closest?.("[data-aicard-panel]"));
    if (inputs.length <= 1 || !composer) return inputs[0] || null;
    let best = inputs[0];
    let bestDepth = -1;
    for (const el of inputs) {
      let depth = 0;
      for (let p = el.parentElement; p; p = p.parentElement) {
        if (p.contains(composer)) {
          depth = depthOf(p);
          break;
        }
      }
      if (depth > bestDepth) {
        best = el;
        bestDepth = depth;
      }
    }
    return best;
  }
  function depthOf(el) {
    let n = 0;
    for (let p = el; p; p = p.parentElement) n += 1;
    return n;
  }
  function transferOf(win, file) {
    const DT = win.DataTransfer || globalThis.DataTransfer;
    const dt = new DT();
    dt.items.add(file);
    return dt;
  }
  function viaInput(doc, input, file) {
    const win = doc.defaultView || globalThis;
    input.files = transferOf(win, file).files;
    const Ev = win.Event || globalThis.Event;
    input.dispatchEvent(new Ev("input", { bubbles: true, composed: true }));
    input.dispatchEvent(new Ev("change", { bubbles: true }));
  }
  function eventRealm(win) {
    const page = win.wrappedJSObject;
    const clone = globalThis.cloneInto;
    if (page && typeof clone === "function") {
      return { win: page, init: (o) => clone(o, page, { wrapReflectors: true }) };
    }
    return { win, init: (o) => o };
  }
  function viaDrop(doc, target, file) {
    const realm = eventRealm(doc.defaultView || globalThis);
    const dt = transferOf(realm.win, file);
    const Drag = realm.win.DragEvent || globalThis.DragEvent;
    for (const type of ["dragenter", "dragover", "drop"]) {
      target.dispatchEvent(new Drag(type, realm.init({ bubbles: true, cancelable: true, composed: true, dataTransfer: dt })));
    }
  }
  function viaPaste(doc, target, file) {
    const realm = eventRealm(doc.defaultView || globalThis);
    const dt = transferOf(realm.win, file);
    target.focus?.();
    const Clip = realm.win.ClipboardEvent || globalThis.ClipboardEvent;
    const ev = new Clip("paste", realm.init({ bubbles: true, cancelable: true, composed: true, clipboardData: dt }));
    if (!ev.clipboardData) Object.defineProperty(ev, "clipboardData", { value: dt });
    target.dispatchEvent(ev);
  }
  function targetOf(doc, adapter, upload) {
    return all(doc, upload.target).find(isVisible) || findInput(doc, adapter);
  }
  function handOver(doc, adapter, file) {
    const upload = adapter.upload;
    const ways = Array.isArray(upload.how) ? upload.how : [upload.how || "input"];
    for (const how of ways) {
      if (how === "input") {
        const input = findFileInput(doc, upload, findInput(doc, adapter));
        if (!input) continue;
        viaInput(doc, input, file);
        return "input";
      }
      const target = how === "drop" ? targetOf(doc, adapter, upload) : findInput(doc, adapter);
      if (!target) continue;
      if (how === "drop") viaDrop(doc, target, file);
      else if (how === "paste") viaPaste(doc, target, file);
      else continue;
      return how;
    }
    throw new Error("the page shows no way to attach a file (no file input, no composer) / 页面上找不到上传入口");
  }
  async function attachFiles({ doc, adapter, files, timers = globalThis, onDone, uploadWaitMs = UPLOAD_WAIT_MS, chipWaitMs = CHIP_APPEAR_MS }) {
    const upload = adapter?.upload;
    const meta = files.map((f) => ({ name: f.name, mime: f.type, size: f.size }));
    const before = upload ? uploadState(doc, upload) : { chips: 0, errors: [] };
    const input = upload && (!upload.how || [].concat(upload.how).includes("input")) ? findFileInput(doc, upload, findInput(doc, adapter)) : null;
    const liveAccept = input?.getAttribute?.("accept") || null;
    const refused = refusalOf(upload, meta, { already: before.chips, liveAccept });
    if (refused) throw new AttachmentRefused(refused.name, refused.reason);
    const errorsBefore = new Set(before.errors);
    for (const [i, file] of files.entries()) {
      handOver(doc, adapter, file);
      const want = before.chips + i + 1;
      let seenChip = false;
      const handed = Date.now();
      const outcome = await waitFor(() => {
        const now = uploadState(doc, upload);
        const fresh = now.errors.find((e) => !errorsBefore.has(e));
        if (fresh) return { error: errorText(fresh, file.name) };
        if (now.chips >= want) seenChip = true;
        if (seenChip && now.chips >= want && now.busy === 0) return { ok: true };
        if (!seenChip && Date.now() - handed > chipWaitMs) return { noChip: true };
        return null;
      }, { timeoutMs: uploadWaitMs, everyMs: 100, timers });
      if (!outcome) throw new Error(`${file.name}: the upload did not finish within ${Math.round(uploadWaitMs / 1e3)} s / 上传未在时限内完成`);
      if (outcome.noChip) throw new Error(`${file.name}: the page showed no attachment after it was handed over / 页面没有显示附件`);
      if (outcome.error) throw new AttachmentRefused(file.name, outcome.error);
      onDone?.(i + 1);
    }
  }
  async function bytesOf(response) {
    if (response == null) return null;
    if (response instanceof ArrayBuffer || Object.prototype.toString.call(response) === "[object ArrayBuffer]") return new Uint8Array(response);
    if (ArrayBuffer.isView(response)) return new Uint8Array(response.buffer, response.byteOffset, response.byteLength);
    if (typeof response.arrayBuffer === "function") return new Uint8Array(await response.arrayBuffer());
    if (typeof response === "string") {
      const out = new Uint8Array(response.length);
      for (let i = 0; i < response.length; i += 1) out[i] = response.charCodeAt(i) & 255;
      return out;
    }
    return null;
  }
  async function fetchAttachments(attachments, fetchFile, { FileImpl = globalThis.File, subtle } = {}) {
    const files = [];
    for (const att of attachments) {
      const name = String(att.name || att.id);
      let bytes;
      try {
        bytes = await bytesOf(await fetchFile(att.id));
      } catch (err) {
        throw new Error(`${name}: could not fetch it from the hub (${err.message}) / 无法从 hub 取得附件`);
      }
      if (!bytes) throw new Error(`${name}: the hub sent no bytes / hub 没有发来内容`);
      if (typeof att.size === "number" && bytes.length !== att.size) {
        throw new Error(`${name}: ${bytes.length} bytes arrived, the task said ${att.size} / 附件大小不符`);
      }
      if (att.sha256) {
        const got = await sha256Hex(bytes, subtle);
        if (got !== String(att.sha256).toLowerCase()) {
          throw new Error(`${name}: SHA-256 ${got.slice(0, 12)}… does not match the task's ${String(att.sha256).slice(0, 12)}… / 附件校验不符`);
        }
      }
      files.push(new FileImpl([bytes], name, { type: att.mime || "application/octet-stream", lastModified: Date.now() }));
    }
    return files;
  }

  // src/core/tasks.js
  var DEFAULT_TIMEOUT_MS = 12e4;
  var FIND_INPUT_MS = 1e4;
  var TURN_START_MS = 2e4;
  var DOM_FALLBACK_AFTER_MS = 1500;
  var HUB_TURN_MS = 2e4;
  var DEFAULT_HOLD_MS = 3e3;
  var HELD_EVERY_MS = 2e3;
  function holdMsOf(welcome) {
    const ms = welcome?.hold_ms;
    return typeof ms === "number" && Number.isFinite(ms) && ms >= 0 ? ms : DEFAULT_HOLD_MS;
  }
  var squash = (s) => String(s ?? "").replace(/\s+/g, "");
  var TaskRunner = class {
    constructor({ doc, adapter, hub, capture, timers, log, onChange, seen }) {
      Object.assign(this, { doc, adapter, hub, capture, timers, log, onChange, seen });
      this.queue = [];
      this.current = null;
      this.awaitingTurn = null;
      this.waiters = /* @__PURE__ */ new Set();
      this.parked = null;
      this.lastPersonEdit = -Infinity;
      this.holdMs = DEFAULT_HOLD_MS;
      this.typing = 0;
      this.hubTurn = null;
      capture.on((kind, turn, detail) => this.onCapture(kind, turn, detail));
    }
    /** Handles `task` and `deliver` frames from the hub. */
    handle(frame) {
      if (frame.type === "task") {
        if (!frame.task_id || typeof frame.prompt !== "string") {
          this.log("warn", "task without task_id or prompt ignored");
          return;
        }
        if (this.current?.task_id === frame.task_id || this.queue.some((t) => t.task_id === frame.task_id)) return;
        this.queue.push({ kind: "task", ...frame });
      } else if (frame.type === "deliver") {
        const id = frame.deliver_id;
        if (id && (this.seen?.has(id) || this.current?.deliver_id === id || this.queue.some((j) => j.deliver_id === id))) {
          this.log("info", `delivery ${id} already typed`);
          return;
        }
        const sameRound = (j) => j?.kind === "deliver" && frame.agent && j.agent && String(j.agent.session) === String(frame.agent.session) && j.agent.round === frame.agent.round;
        if (sameRound(this.current) || this.queue.some(sameRound)) {
          this.log("info", `delivery ${id || ""}: round ${frame.agent.round} already waits to be typed`);
          if (id) this.seen?.add(id);
          return;
        }
        this.queue.push({ kind: "deliver", ...frame });
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
      if (queued !== -1) {
        this.queue.splice(queued, 1);
        this.onChange?.();
        return;
      }
      if (this.current?.task_id !== taskId) return;
      for (const wait of this.waiters) if (wait.id === taskId) wait.finish({ ok: false, error: "cancelled", cancelled: true });
      findStopButton(this.doc)?.click();
    }
    /** The task id the next captured turn answers (handed out once). */
    claimTask() {
      const id = this.awaitingTurn || void 0;
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
      if (frame.action === "pause") this.paused = true;
      if (frame.action === "resume") {
        this.paused = false;
        this.pump();
      }
    }
    async pump() {
      if (this.current || this.paused) return;
      const job = this.queue.shift();
      if (!job) return;
      this.current = job;
      this.onChange?.();
      try {
        if (job.kind === "task") await this.runTask(job);
        else await this.runDelivery(job);
      } catch (err) {
        this.log("error", `job failed: ${err.message}`);
        if (job.kind === "task") this.hub.send(taskUpdate(job.task_id, "failed", err.message, err.trouble));
      } finally {
        this.current = null;
        this.awaitingTurn = null;
        this.onChange?.();
        this.pump();
      }
    }
    async waitIdle(timeoutMs) {
      const idle = await waitFor(() => this.idle, { timeoutMs, everyMs: 100, timers: this.timers });
      if (!idle) throw new Error("tab stayed busy (still streaming) / 标签页一直在输出");
    }
    async locateInput() {
      const input = await waitFor(() => findInput(this.doc, this.adapter), { timeoutMs: FIND_INPUT_MS, timers: this.timers });
      if (!input) throw new Error("input box not found / 找不到输入框");
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
        if (readInput(input) !== text) throw new Error("the site rejected the typed text / 输入框未接受文本");
        this.awaitingTurn = taskId || null;
        await pressSend(this.doc, this.adapter, input, this.timers);
      } finally {
        this.sending = false;
        this.typing -= 1;
      }
      if (draft) {
        await waitFor(() => readInput(input) !== text, { timeoutMs: 3e3, timers: this.timers });
        const box = input.isConnected ? input : await this.locateInput();
        this.typing += 1;
        try {
          setInput(box, draft);
        } finally {
          this.typing -= 1;
        }
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
      if (Date.now() > want.until) {
        this.hubTurn = null;
        return false;
      }
      if (turn.prompt !== null && turn.prompt !== void 0) {
        const got = squash(turn.prompt);
        const same = got === want.text || got.length >= 32 && want.text.startsWith(got.slice(0, 64)) || want.text.length >= 32 && got.startsWith(want.text.slice(0, 64));
        if (!same) return false;
      }
      this.hubTurn = null;
      return true;
    }
    async runTask(task) {
      const { task_id: id } = task;
      const timeoutMs = Number(task.timeout_ms) > 0 ? Number(task.timeout_ms) : DEFAULT_TIMEOUT_MS;
      const deadline = Date.now() + timeoutMs;
      this.hub.send(taskUpdate(id, "accepted"));
      await this.waitIdle(timeoutMs);
      const wait = new TaskWait(this, id, timeoutMs);
      try {
        await this.attachTaskFiles(task);
        await this.typeAndSend(task.prompt, { taskId: id });
        this.hub.send(taskUpdate(id, "sent"));
        const result = await wait.arm(deadline);
        if (result.ok) this.hub.send(taskUpdate(id, "done"));
        else if (!result.cancelled) this.hub.send(taskUpdate(id, "failed", result.error, result.trouble));
      } finally {
        wait.finish({ ok: false, error: "abandoned" });
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
        doc: this.doc,
        adapter: this.adapter,
        files,
        timers: this.timers,
        onDone: (n) => this.hub.send(report(n, list.length))
      });
    }
    onCapture(kind, turn, detail) {
      if (kind === "turn_start" && !turn.taskId && !turn.hubTyped && !turn.resumed && !this.sending) {
        if (this.takeHubTurn(turn)) turn.hubTyped = true;
        else this.reportUserInput(turn);
      }
      if (!turn.taskId) return;
      for (const wait of this.waiters) {
        if (wait.id !== turn.taskId) continue;
        if (kind === "turn_start") wait.started = true;
        if (kind === "streaming") this.hub.send(taskUpdate(turn.taskId, "streaming"));
        if (kind === "turn_end") wait.finish({ ok: true });
        if (kind === "trouble") {
          const trouble12 = troubleKind(detail.reason);
          if (trouble12 === "captcha" || trouble12 === "login") this.park(trouble12);
          wait.finish({ ok: false, error: detail.code ? `${detail.reason} [${detail.code}]` : detail.reason, trouble: trouble12 });
        }
      }
    }
    /** The site wants the person (captcha / login): reported in heartbeats until they act. */
    park(trouble12) {
      this.parked = trouble12;
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
      }, 3e3);
      this.personSubmitted = { text, timer };
    }
    clearPersonSubmitted() {
      if (this.personSubmitted) this.timers.clearTimeout(this.personSubmitted.timer);
      this.personSubmitted = null;
    }
    async runDelivery(job) {
      const text = String(job.text ?? "");
      if (job.auto_send) {
        if (!await this.waitToType(job)) {
          this.log("info", `delivery ${job.deliver_id || ""} dropped: its agent session stopped`);
          if (job.deliver_id) this.seen?.add(job.deliver_id);
          return;
        }
        job.typing = true;
        if (!await this.attachDeliveryFiles(job)) return;
        this.expectHubTurn(text);
        try {
          await this.typeAndSend(text);
        } catch (err) {
          this.hubTurn = null;
          throw err;
        }
      } else {
        if (!await this.attachDeliveryFiles(job)) return;
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
        this.log("warn", `delivery ${job.deliver_id || ""} not sent: ${err.message}`);
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
      for (; ; ) {
        const idle = await waitFor(() => job.dropped || this.idle, { timeoutMs: DEFAULT_TIMEOUT_MS, everyMs: 100, timers });
        if (job.dropped) return false;
        if (!idle) throw new Error("tab stayed busy (still streaming) / 标签页一直在输出");
        if (this.personTyping && !await this.hold(job)) return false;
        if (this.idle && !this.personTyping) return true;
      }
    }
    /**
     * Holds `job` while the person types: reports `held` now and every HELD_EVERY_MS while it
     * lasts (the hub restarts its arrival window on each), and shows it in the panel. Resolves
     * when the person stopped (true) or the job was dropped (false).
     */
    async hold(job) {
      const report = () => {
        if (job.deliver_id) this.hub.send(deliveryHeld(job.deliver_id));
      };
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
      if (!["paused", "ended"].includes(ev.state) || !ev.run_id) return;
      const ofSession = (job) => job.kind === "deliver" && job.agent && String(job.agent.session) === String(ev.run_id);
      const kept = this.queue.filter((job) => !ofSession(job));
      for (const job of this.queue) if (ofSession(job) && job.deliver_id) this.seen?.add(job.deliver_id);
      const changed = kept.length !== this.queue.length;
      this.queue = kept;
      if (this.current && ofSession(this.current) && !this.current.typing) this.current.dropped = true;
      if (changed) this.onChange?.();
    }
  };
  var TaskWait = class {
    constructor(runner, id, timeoutMs) {
      this.runner = runner;
      this.id = id;
      this.timeoutMs = timeoutMs;
      this.started = false;
      this.done = false;
      this.missed = null;
      this.timers = [];
      this.dom = new DomReplyWatcher({ doc: runner.doc, adapter: runner.adapter, timers: runner.timers });
      this.promise = new Promise((resolve) => {
        this.resolve = resolve;
      });
      runner.waiters.add(this);
      this.off = runner.capture.on((kind, turn, detail) => {
        if (turn?.taskId !== this.id) return;
        if (kind === "turn_start") {
          this.started = true;
          if (!this.missed) this.dom.stop();
        }
        if (kind === "parser_miss") this.parserMiss(detail.reason);
      });
    }
    /** Starts the clocks (after sending); resolves with `{ok, error?, trouble?}`. */
    arm(deadline) {
      const { timers } = this.runner;
      const left = () => Math.max(0, deadline - Date.now());
      this.runner.capture.noteSend();
      this.timers.push(timers.setTimeout(() => this.finish({
        ok: false,
        error: `no complete reply before the task timeout / 任务超时 (${this.timeoutMs} ms)`
      }), left()));
      this.timers.push(timers.setTimeout(() => this.domFallback(), Math.min(DOM_FALLBACK_AFTER_MS, left())));
      this.timers.push(timers.setTimeout(() => {
        if (!this.started && !this.dom.sawSomething) this.finish({ ok: false, error: "no reply started after sending / 发送后没有回复" });
      }, Math.min(TURN_START_MS, left())));
      return this.promise;
    }
    /** Network capture saw no matching request: read the reply from the page instead. */
    domFallback() {
      if (this.started || this.done) return;
      this.runner.log("warn", "no stream captured, reading the reply from the page / 未捕获到网络流，改读页面");
      this.readPage();
    }
    /** The stream that answers this task carried no answer the adapter could read. */
    parserMiss(reason) {
      if (this.done || this.missed) return;
      this.missed = reason;
      this.runner.log("warn", `${reason}: reading the reply from the page / 网络解析失败，改读页面`);
      this.timers.push(this.runner.timers.setTimeout(() => {
        if (!this.done) this.finish({ ok: false, error: `${reason} (the page showed no reply either / 页面上也没有回复)`, trouble: "parser_miss" });
      }, PAGE_READ_AFTER_MISS_MS));
      this.readPage();
    }
    readPage() {
      this.dom.start((text) => {
        if (this.done || this.started && !this.missed) return;
        this.runner.claimTask();
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
  };

  // src/core/turn-memory.js
  var KEY = "aicard.turn";
  var RESUME_WINDOW_MS = 10 * 6e4;
  var PREFIX_CHARS = 200;
  var JUDGE_CHARS = 24;
  var squash2 = (s) => String(s ?? "").replace(/\s+/g, "");
  var TurnMemory = class {
    /**
     * @param {Storage} store      the page's sessionStorage (may throw: storage off)
     * @param {object} [o]
     * @param {() => number} [o.now]
     * @param {number} [o.windowMs]
     */
    constructor(store, { now = () => Date.now(), windowMs = RESUME_WINDOW_MS } = {}) {
      this.store = store;
      this.now = now;
      this.windowMs = windowMs;
      this.life = `${now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    }
    read() {
      try {
        const rec = JSON.parse(this.store.getItem(KEY) || "null");
        return rec && typeof rec.id === "string" ? rec : null;
      } catch {
        return null;
      }
    }
    write(rec) {
      try {
        this.store.setItem(KEY, JSON.stringify(rec));
      } catch {
      }
    }
    /**
     * A turn starts with `prompt` (null when the request carried none): the kept turn it may
     * continue, or null. A candidate still has to pass `judge` on its first text.
     */
    candidate(prompt) {
      const rec = this.read();
      if (!rec || rec.life === this.life || rec.id === this.consumed || this.now() - rec.at > this.windowMs) return null;
      if (prompt === null || prompt === void 0) return rec.ended ? null : rec;
      if (rec.prompt === null || rec.prompt === void 0) return null;
      return squash2(prompt) === squash2(rec.prompt) ? rec : null;
    }
    /**
     * Is a turn with this candidate and this text (so far) the kept reply? `same`, `new`, or `wait`
     * (too little text yet; `final` says no more will come).
     */
    judge(rec, prompt, text, final) {
      this.consumed = rec.id;
      if (prompt === null || prompt === void 0) return "same";
      const kept = rec.prefix || "";
      const need = Math.min(JUDGE_CHARS, kept.length);
      if (text.length < need && !final) return "wait";
      const n = Math.min(kept.length, text.length);
      if (n === 0) return kept.length === 0 && text.length === 0 ? "same" : "new";
      return kept.slice(0, n) === text.slice(0, n) ? "same" : "new";
    }
    /** Keeps `turn` as the turn in progress (called when it starts, while it grows, when it ends). */
    note(turn, { ended = false } = {}) {
      this.write({
        seq: turn.seq || 0,
        sent: turn.sentChars || 0,
        id: turn.id,
        life: this.life,
        at: this.now(),
        prompt: turn.prompt ?? null,
        prefix: String(turn.text || "").slice(0, PREFIX_CHARS),
        ended,
        task_id: turn.taskId || null,
        hub_typed: Boolean(turn.hubTyped)
      });
    }
  };

  // src/core/main.js
  var EMBEDDED_HUB_URL = "__AICARD_HUB_URL__";
  var EMBEDDED_TOKEN = "__AICARD_TOKEN__";
  var VERSION = "0.1.0";
  function start(env) {
    const { win, gm } = env;
    const own = env.ownWindow || win;
    const settings = new Settings(gm);
    const debug = Boolean(settings.get("debug", false));
    const log = (level, msg) => {
      if (debug || level === "error") (level === "error" ? console.error : console.debug)(`[AIcard] ${msg}`);
    };
    const picked = pickAdapter([...adapters, sim_adapter_default], own.location.hostname);
    if (!picked) return null;
    const adapter = withFallback(picked, overrideFor(settings.get("adapter_overrides", null), picked.name));
    if (own.top !== own) return null;
    const token = settings.adoptToken(EMBEDDED_TOKEN);
    const hubUrl = settings.adoptHubUrl(EMBEDDED_HUB_URL);
    const timers = {
      setTimeout: own.setTimeout.bind(own),
      clearTimeout: own.clearTimeout.bind(own),
      setInterval: own.setInterval.bind(own),
      clearInterval: own.clearInterval.bind(own)
    };
    const doc = own.document;
    let capture = null;
    const hooks = installNetworkHooks({
      win,
      log,
      env: { ownWindow: own, exportFunction: env.exportFunction, info: gm.info },
      bridge: {
        matches: (url, method) => Boolean(capture?.matches(url, method)),
        open: (meta) => capture?.begin(meta) ?? null
      }
    });
    const sandboxed = hooks.mode === "xray";
    const hub = new HubClient({
      hubUrl,
      identity: new TabIdentity(own.sessionStorage),
      WebSocketImpl: env.WebSocketImpl,
      gmRequest: gm.xmlhttpRequest,
      manager: gm.info,
      memo: { get: (k, d) => settings.get(k, d), set: (k, v) => settings.set(k, v) },
      // Firefox's sandbox WebSocket says `Origin: null`, which the hub rightly refuses.
      transports: [...env.WebSocketImpl && !sandboxed ? ["ws"] : [], ...gm.xmlhttpRequest ? ["sse"] : []],
      wsCheck: () => localNetworkAccess(own.navigator),
      doc,
      timers,
      log,
      helloFields: () => ({
        token,
        site: adapter.name,
        url: own.location.href,
        title: doc.title || void 0,
        label: settings.get("label", void 0),
        role: settings.get("role", void 0),
        version: VERSION
      }),
      heartbeatState: () => ({ pending: runner.queue.length + (runner.current ? 1 : 0), trouble: runner.parked || void 0 })
    });
    let runner = null;
    capture = new TurnCapture({
      adapter,
      hub,
      log,
      doc,
      timers,
      record: debug,
      claimTask: () => runner?.claimTask(),
      memory: new TurnMemory(own.sessionStorage)
    });
    const panel = new Panel({ doc, hub, version: VERSION, debug, findInput: () => findInput(doc, adapter) });
    panel.update({ capture: { mode: hooks.mode, late: hooks.late, path: null } });
    runner = new TaskRunner({
      doc,
      adapter,
      hub,
      capture,
      timers,
      log,
      seen: new DeliverySeen(own.sessionStorage),
      onChange: () => panel.update({ task: describeJob(runner.current, runner.queue.length), parked: runner.parked })
    });
    hub.on("state", (status) => panel.update({ hub: status, role: status.role || panel.state.role }));
    hub.on("frame", (frame) => {
      switch (frame.type) {
        case "welcome":
          runner.welcome(frame);
          panel.update({ role: frame.role, label: frame.label ?? settings.get("label", null) });
          break;
        case "task":
        case "deliver":
          runner.handle(frame);
          break;
        case "cancel":
          runner.cancel(frame.task_id);
          break;
        case "flow_event":
          if (frame.detail?.kind === "agent") runner.agentEvent(frame);
          panel.flowEvent(frame);
          break;
        case "flow_control":
          runner.control(frame);
          panel.update({ result: `${frame.action}${frame.reason ? `: ${frame.reason}` : ""}` });
          break;
        case "cmd_output":
          panel.commandOutput(frame);
          break;
        case "cmd_result":
          panel.commandDone(frame.cmd_id);
          panel.update({ result: summarize(frame) });
          break;
        case "error":
          log("warn", `hub error ${frame.code}: ${frame.message}`);
          break;
        default:
          break;
      }
    });
    capture.on((kind, turn, detail) => {
      if (kind === "trouble") panel.update({ result: `⚠ ${detail.reason}` });
      if (kind === "turn_start") panel.update({ capture: { ...panel.state.capture, path: "network" } });
      if (kind === "dom_turn_end") panel.update({ capture: { ...panel.state.capture, path: "dom" } });
      if (kind === "parser_miss") panel.update({ result: `⚠ ${PARSER_MISS_NOTICE}` });
    });
    const personFallback = new PersonTurnFallback({ doc, adapter, capture, timers, log });
    watchPersonSubmits(doc, adapter, runner, personFallback);
    if (token) hub.start();
    else panel.update({ hub: { state: "unpaired", notice: UNPAIRED_NOTICE } });
    const mount = () => panel.mount();
    if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", mount, { once: true });
    else mount();
    if (debug) {
      const helpers = debugHelpers({ doc, hub, runner, capture, adapter, panel });
      const run = debugRunner(helpers, {
        ask: (q) => own.prompt(q),
        show: (name, result) => {
          console.debug(`[AIcard] ${name}`, result);
          if (name !== "mcpPanel") panel.update({ debugOut: resultText(name, result) });
        }
      });
      installDebugMenu(gm.registerMenuCommand, run, Object.keys(helpers));
      panel.setDebug(Object.keys(helpers), run);
    }
    return { hub, capture, runner, panel, adapter, hooks };
  }
  async function localNetworkAccess(nav) {
    for (const name of ["local-network-access", "loopback-network", "local-network"]) {
      let state;
      try {
        state = (await nav.permissions.query({ name })).state;
      } catch {
        continue;
      }
      return state === "granted" ? null : { notice: LNA_NOTICE, openWithinMs: LNA_OPEN_MS };
    }
    return null;
  }
  var LNA_OPEN_MS = 1500;
  var UNPAIRED_NOTICE = "还没有 hub 令牌：打开 `aicard serve` 打印的安装链接，或运行 `aicard install`，再装一次脚本。 / No hub token yet: open the install link `aicard serve` printed (or run `aicard install`) and install the script from it.";
  var LNA_NOTICE = `本机网络访问未允许：改用脚本管理器的通道 (SSE)。点地址栏的"允许访问本地网络"可用更快的 WebSocket。 / Local Network Access not allowed: using the userscript manager's channel (SSE). Allow "local network access" for this site to use the faster WebSocket.`;
  var DeliverySeen = class {
    constructor(store) {
      this.store = store;
      this.key = "aicard.delivered";
    }
    ids() {
      try {
        return JSON.parse(this.store.getItem(this.key) || "[]");
      } catch {
        return [];
      }
    }
    has(id) {
      return this.ids().includes(id);
    }
    add(id) {
      const ids = this.ids().filter((x) => x !== id);
      ids.push(id);
      try {
        this.store.setItem(this.key, JSON.stringify(ids.slice(-200)));
      } catch {
      }
    }
  };
  function describeJob(job, queued) {
    if (!job) return queued ? `排队 queued ${queued}` : "空闲 idle";
    const what = job.kind === "task" ? `${job.task_id}: ${job.prompt}` : `deliver: ${job.text}`;
    const cut = what.length > 60 ? `${what.slice(0, 57)}…` : what;
    const short = job.held ? `${HELD_NOTICE} · ${cut}` : cut;
    return queued ? `${short} (+${queued})` : short;
  }
  function summarize(frame) {
    const r = frame.result || {};
    const out = String(r.output ?? "");
    return `${r.success === false ? "✗" : "✓"} ${frame.command || ""} ${out.length > 80 ? `${out.slice(0, 77)}…` : out}`.trim();
  }
  var HELD_NOTICE = "等你停手 waiting until you stop typing";
  function watchPersonSubmits(doc, adapter, runner, personFallback) {
    const current = () => {
      const input = findInput(doc, adapter);
      return input ? readInput(input) : "";
    };
    const inBox = (ev) => {
      const input = findInput(doc, adapter);
      return input && (ev.target === input || input.contains(ev.target)) ? input : null;
    };
    doc.addEventListener("input", (ev) => {
      if (ev.isTrusted && inBox(ev)) runner.notePersonEdit();
    }, true);
    doc.addEventListener("keydown", (ev) => {
      if (!ev.isTrusted) return;
      const input = inBox(ev);
      if (!input) return;
      if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing) {
        runner.notePersonEdit();
        return;
      }
      personSent(runner, personFallback, readInput(input));
    }, true);
    doc.addEventListener("click", (ev) => {
      if (!ev.isTrusted) return;
      const input = findInput(doc, adapter);
      const send = findSendButton(doc, adapter, input);
      if (send && (ev.target === send || send.contains(ev.target))) personSent(runner, personFallback, current());
    }, true);
  }
  function personSent(runner, personFallback, text) {
    runner.notePersonSubmit(text);
    if (!runner.sending && text && text.trim()) personFallback.sent();
  }
  var PARSER_MISS_NOTICE = "网络解析失败，改读页面 / parser found no answer, read the page";

  // src/userscript.js
  function grants() {
    const memory = /* @__PURE__ */ new Map();
    const asyncGm = typeof GM === "object" && GM ? GM : null;
    let request = null;
    if (typeof GM_xmlhttpRequest === "function") request = GM_xmlhttpRequest;
    else if (asyncGm && typeof asyncGm.xmlHttpRequest === "function") request = (d) => asyncGm.xmlHttpRequest(d);
    return {
      getValue: typeof GM_getValue === "function" ? GM_getValue : (k, d) => memory.has(k) ? memory.get(k) : d,
      setValue: typeof GM_setValue === "function" ? GM_setValue : (k, v) => memory.set(k, v),
      xmlhttpRequest: request,
      info: typeof GM_info === "object" ? GM_info : null,
      // The manager's own menu: the debug helpers live there (and in the panel), never on the page.
      registerMenuCommand: typeof GM_registerMenuCommand === "function" ? GM_registerMenuCommand : asyncGm && typeof asyncGm.registerMenuCommand === "function" ? (n, f) => asyncGm.registerMenuCommand(n, f) : null
    };
  }
  start({
    win: typeof unsafeWindow !== "undefined" ? unsafeWindow : window,
    ownWindow: window,
    // This world's WebSocket, captured before page code runs (the page's own in the page world).
    WebSocketImpl: window.WebSocket,
    exportFunction: typeof exportFunction === "function" ? exportFunction : void 0,
    gm: grants()
  });
})();
