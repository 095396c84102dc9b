/**
 * Mock definition of `sim.aicard.test`, AIcard's own simulated chat site, in the same shape as
 * the per-site mocks under mock/sites/: a React-style controlled textarea (the page only believes
 * what `input` events told it), a send button that is disabled while the box is empty, and a
 * stream the page renders itself — so a test sees both what the userscript captured and what the
 * page showed.
 */
const encoder = new TextEncoder();

/** Splits `text` into hostile reads: single bytes, cuts inside multi-byte characters, merged events. */
function hostile(text) {
  const bytes = encoder.encode(text);
  const chunks = [];
  let pos = 0;
  let i = 0;
  while (pos < bytes.length) {
    const size = [1, 3, 7, 2, 64, 5][i % 6];
    chunks.push(bytes.slice(pos, pos + size));
    pos += size;
    i += 1;
  }
  return chunks;
}

const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>Sim chat</title>
<style>body{font-family:sans-serif;margin:0;height:100vh;display:flex;flex-direction:column}
#log{flex:1;overflow:auto;padding:12px}.msg{white-space:pre-wrap;margin:6px 0}
#composer{display:flex;gap:8px;padding:12px;border-top:1px solid #ccc}
textarea{flex:1;height:60px}</style></head><body>
<div id="log"></div>
<form id="composer" onsubmit="return false"><textarea id="sim-input" placeholder="Message"></textarea>
<button id="sim-send" type="button" aria-label="Send" disabled>Send</button></form>
<script>
(() => {
  const box = document.getElementById('sim-input');
  const send = document.getElementById('sim-send');
  const log = document.getElementById('log');
  let state = '';           // what the "framework" believes is in the box
  let streaming = false;
  const render = () => { if (box.value !== state) box.value = state; send.disabled = !state.trim() || streaming; };
  box.addEventListener('input', () => { state = box.value; render(); });
  box.addEventListener('keydown', (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); submit(); } });
  send.addEventListener('click', submit);
  async function submit() {
    const prompt = state;
    if (!prompt.trim() || streaming) return;
    state = ''; streaming = true; render();
    const mine = document.createElement('div'); mine.className = 'msg user'; mine.textContent = prompt; log.append(mine);
    const reply = document.createElement('div'); reply.className = 'msg assistant'; log.append(reply);
    const stop = document.createElement('button'); stop.setAttribute('aria-label', 'Stop generating'); stop.textContent = '■';
    document.getElementById('composer').append(stop);
    try {
      const endpoint = new URLSearchParams(location.search).get('endpoint') || '/api/sim/chat';
      const res = await fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt }) });
      const reader = res.body.getReader(); const dec = new TextDecoder(); let buf = '';
      for (;;) {
        const { done, value } = await reader.read(); if (done) break;
        buf += dec.decode(value, { stream: true });
        const lines = buf.split(/\\r?\\n/); buf = lines.pop();
        for (const line of lines) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim(); if (data === '[DONE]') continue;
          try { const o = JSON.parse(data); if (o.delta) reply.textContent += o.delta; } catch {}
        }
      }
      reply.dataset.done = 'true';
    } finally { streaming = false; stop.remove(); render(); }
  }
  render();
})();
</script></body></html>`;

export default {
  name: 'sim',
  hosts: ['sim.aicard.test'],
  page: () => PAGE,
  // `/api/sim/unknown-stream` is the same stream at a path the adapter does not know (page opened
  // with `?endpoint=/api/sim/unknown-stream`), for the DOM fallback test.
  endpoint: { method: 'POST', path: /^\/api\/sim\/(chat|unknown-stream)$/ },
  variants: ['default', 'reasoning'],
  contentType: 'text/event-stream; charset=utf-8',
  stream({ answer, reasoning, variant = 'default' }) {
    let text = ': keep-alive\r\n\r\n';
    if (variant === 'reasoning' && reasoning) {
      for (const piece of Array.from(reasoning)) text += `data: ${JSON.stringify({ reasoning: piece })}\n\n`;
    }
    const cps = Array.from(answer);
    for (let i = 0; i < cps.length; i += 3) text += `data: ${JSON.stringify({ delta: cps.slice(i, i + 3).join('') })}\r\n\r\n`;
    text += 'data: [DONE]\n\n';
    return hostile(text);
  },
};
