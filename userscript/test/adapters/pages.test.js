// Mock pages: their in-page script compiles, and the request each page sends (per host) is one the site's
// adapter recognises, with the typed prompt recoverable by promptFromRequest.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { adapters } from '../../src/adapters/index.js';
import { sites } from '../../mock/sites/index.js';

function inlineScript(html) {
  const m = /<script>([\s\S]*?)<\/script>/.exec(html);
  assert.ok(m, 'page has an inline script');
  return m[1];
}

function requestBuilder(html) {
  const m = /var buildRequest = (function[\s\S]*?);\n\s*var input = document/.exec(inlineScript(html));
  assert.ok(m, 'page defines buildRequest');
  // eslint-disable-next-line no-new-func
  return (host, search = '') => new Function('location', `return (${m[1]});`)({ hostname: host, search });
}

const PROMPT = '请把下面这句话翻译成英文："今天天气很好" & 1+1=2 😀\n第二行';

for (const site of sites) {
  const adapter = adapters.find((a) => a.name === site.name);
  test(`${site.name} mock page: valid HTML shell and a script that compiles`, () => {
    const html = site.page();
    assert.match(html, /^<!doctype html>/i);
    assert.doesNotThrow(() => new Function(inlineScript(html)));
  });
  test(`${site.name} mock page: the request it sends is matched by the adapter and carries the prompt`, async () => {
    const build = requestBuilder(site.page());
    const hosts = new Set(Object.values(site.variantMeta).flatMap((m) => m.hosts));
    const searches = site.name === 'doubao' ? ['', '?samantha'] : [''];
    for (const host of hosts) {
      for (const search of searches) {
        const req = build(host, search)(PROMPT, { uuid: randomUUID, turn: 1, now: 1764480000000, host });
        const label = `${site.name} on ${host}${search}`;
        assert.equal(adapter.matchRequest(req.url, req.method), true, `${label}: ${req.url}`);
        assert.equal(adapter.matchRequest(`https://${host}${req.url}`, req.method), true, `${label}: absolute`);
        if (req.body instanceof FormData) {
          // as sent on the wire (multipart), and as the page hooks report a FormData body (url-encoded pairs)
          const wire = await new Response(req.body).text();
          assert.equal(adapter.promptFromRequest(wire), PROMPT, `${label}: prompt from the multipart body`);
          const pairs = [...req.body.entries()].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
          assert.equal(adapter.promptFromRequest(pairs), PROMPT, `${label}: prompt from the hooked FormData`);
        } else {
          const body = typeof req.body === 'string' ? req.body : new TextDecoder().decode(req.body);
          assert.equal(adapter.promptFromRequest(body), PROMPT, `${label}: prompt`);
        }
        const path = req.url.split('?')[0];
        const served = Object.values(site.variantMeta).some((m) => m.hosts.includes(host) && (!m.path || (m.path instanceof RegExp ? m.path.test(path) : m.path === path)));
        assert.ok(served, `${label}: the mock serves ${path} on ${host}`);
      }
    }
  });
}
