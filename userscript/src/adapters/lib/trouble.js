// Site trouble detection shared by the adapters: HTTP status, trouble pages (captcha, login) and site error
// codes become one person-readable reason (English / 中文), so the hub can fail the task over and say why.

export const REASONS = {
  rateLimit: 'rate limited by the site (HTTP 429) / 站点限流（HTTP 429）',
  login: 'not logged in to the site, please log in in this tab / 站点未登录，请在此标签页登录',
  captcha: 'the site asks for a captcha or human check / 站点要求人机验证',
  forbidden: 'the site refused the request (HTTP 403) / 站点拒绝了请求（HTTP 403）',
  server: (status) => `the site failed (HTTP ${status}) / 站点出错（HTTP ${status}）`,
  client: (status) => `the site rejected the request (HTTP ${status}) / 站点拒绝了请求（HTTP ${status}）`,
  htmlPage:
    'the site returned a web page instead of a reply stream (login or check page?) / 站点返回了网页而不是回复流（登录页或验证页？）',
};

/**
 * The `task_update.trouble` kinds the hub acts on (docs/flows.md): cool down, or park until a person acts.
 * `attachment_refused`: the site refused one of the task's files (its type, size or count, or an upload
 * error it showed); nothing was sent (src/core/attach.js).
 */
export const TROUBLE_KINDS = Object.freeze(['rate_limited', 'captcha', 'login', 'network', 'site_error', 'parser_miss', 'content_filter', 'attachment_refused']);

/**
 * The site withdrew or blocked the reply (DeepSeek's CONTENT_FILTER, Qianwen's moderation): the task fails
 * and the withdrawn text is never the answer. Reported as this kind once the hub and the core's `TROUBLES`
 * (src/core/protocol.js) accept it; until then `troubleKind` answers `site_error` for it.
 */
export const CONTENT_FILTER = 'content_filter';

const RATE_LIMITED = /rate.?limit|too many requests|usage limit|HTTP 429|限流|频繁|使用上限|次数上限/i;
const LOGIN_REASON = /log ?in|sign in|session token is stale|登录|会话令牌已过期/i;
const CAPTCHA_REASON = /captcha|human check|人机验证|验证码/i;
const CONTENT_FILTER_REASON = /content filter|moderation|内容过滤|内容审核/i;

/**
 * The kind of a trouble reason (what `makeTrouble` returned, or a site code's reason): the hub
 * cools a `rate_limited` tab and parks a `captcha` or `login` one until a person acts. `kinds` are the
 * kinds the receiver accepts (default `TROUBLE_KINDS`); a withdrawn reply is `content_filter` when they
 * include it, else `site_error`.
 */
export function troubleKind(reason, kinds = TROUBLE_KINDS) {
  const r = typeof reason === 'string' ? reason : '';
  // A web page instead of a stream may be a login page or not: the site failed, nothing more.
  if (r === REASONS.htmlPage || r === REASONS.forbidden) return 'site_error';
  if (CONTENT_FILTER_REASON.test(r)) return kinds.includes(CONTENT_FILTER) ? CONTENT_FILTER : 'site_error';
  if (r === REASONS.rateLimit || RATE_LIMITED.test(r)) return 'rate_limited';
  if (r === REASONS.captcha || CAPTCHA_REASON.test(r)) return 'captcha';
  if (r === REASONS.login || LOGIN_REASON.test(r)) return 'login';
  return 'site_error';
}

const CAPTCHA = /captcha|challenge-platform|cf-chl|turnstile|verify you are human|are you a robot|人机验证|滑块验证|验证码|rgv587_flag|FAIL_SYS_USER_VALIDATE/i;
const LOGIN = /please log ?in|sign in to continue|login required|not logged in|unauthori[sz]ed|请登录|登录已过期|未登录|重新登录/i;

/**
 * Build a site's `trouble(status, bodySample)`. `codes` maps site error codes (as strings) to reasons;
 * they are looked up in JSON bodies under `code`, `error_code`, `error.code`, `status` and in SSE error frames,
 * and with `codePatterns` (RegExps whose first group is the code) for bodies that are not keyed JSON.
 */
export function makeTrouble({ codes = {}, codePatterns = [] } = {}) {
  return function trouble(status, bodySample) {
    const body = typeof bodySample === 'string' ? bodySample : '';
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
    // 2xx/3xx: only a body that is not a stream can be trouble (a reply may legitimately mention "captcha").
    const trimmed = head.replace(/^\uFEFF/, '').trimStart();
    if (/^<(!doctype|html|head|body)/i.test(trimmed)) {
      if (CAPTCHA.test(head)) return REASONS.captcha;
      if (LOGIN.test(head)) return REASONS.login;
      return REASONS.htmlPage;
    }
    if (trimmed.startsWith('{') && !/^\{\s*"(event_data|choices|communication|v|p|message|type)"/.test(trimmed)) {
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
    const m = pattern.exec(text);
    if (m && Object.prototype.hasOwnProperty.call(codes, m[1])) return m[1];
  }
  const re = /"(?:code|error_code|errorCode|status)"\s*:\s*"?(-?\d+)"?/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (Object.prototype.hasOwnProperty.call(codes, m[1])) return m[1];
  }
  return null;
}
