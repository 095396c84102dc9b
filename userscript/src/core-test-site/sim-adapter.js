/**
 * Adapter for `sim`, AIcard's own simulated chat site (used by the harness tests and by anyone
 * building a new adapter). Its stream is SSE with `data: {"delta"|"reasoning": …}` lines, an
 * optional `data: {"error": …}` and `data: [DONE]`. Hosts end in `.aicard.test`, never a real site.
 */

function sseLines() {
  const decoder = new TextDecoder();
  let buffer = '';
  return {
    push(bytes, final = false) {
      buffer += decoder.decode(bytes, { stream: !final });
      const lines = buffer.split(/\r\n|\n|\r/);
      buffer = final ? '' : lines.pop();
      return lines;
    },
  };
}

export default {
  name: 'sim',
  hosts: ['sim.aicard.test'],
  matchRequest(url, method) {
    return method === 'POST' && new URL(url).pathname === '/api/sim/chat';
  },
  promptFromRequest(bodyText) {
    try { return JSON.parse(bodyText).prompt ?? null; } catch { return null; }
  },
  createParser() {
    const lines = sseLines();
    const read = (list) => {
      const events = [];
      for (const line of list) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') { events.push({ type: 'done' }); continue; }
        let obj;
        try { obj = JSON.parse(data); } catch { continue; }
        if (typeof obj.delta === 'string') events.push({ type: 'delta', text: obj.delta });
        if (typeof obj.reasoning === 'string') events.push({ type: 'reasoning', text: obj.reasoning });
        if (obj.error) events.push({ type: 'error', reason: String(obj.error), code: obj.code });
      }
      return events;
    };
    return {
      push: (bytes) => read(lines.push(bytes)),
      end: () => read(lines.push(new Uint8Array(0), true)),
    };
  },
  input: { selectors: ['textarea#sim-input'], kind: 'textarea' },
  send: { selectors: ['button#sim-send'], key: 'Enter' },
  trouble(status, sample) {
    if (status === 429) return 'rate limited (HTTP 429) / 请求过于频繁';
    if (/"code":\s*"?rate_limit/.test(sample)) return 'rate limited by the site / 站点限流';
    return null;
  },
};
