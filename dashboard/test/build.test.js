// The committed dist/ is exactly what build.mjs makes of src/, within the size budget, with
// no inline script and no HTML string sinks in the sources.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildDashboard, gzipSize, DIST, BUDGET, FILES } from '../build.mjs';

test('committed dist equals a fresh build', async () => {
  const fresh = await buildDashboard();
  assert.deepEqual(Object.keys(fresh).sort(), [...FILES].sort());
  for (const [name, text] of Object.entries(fresh)) {
    assert.equal(readFileSync(join(DIST, name), 'utf8'), text, `dist/${name} is stale: run npm run build in dashboard/`);
  }
  const size = gzipSize(fresh);
  assert.ok(size <= BUDGET, `${size} B gzip > ${BUDGET}`);
  console.log(`assets: ${size} B gzip`);
});

test('no inline script and no HTML string sinks', () => {
  const html = readFileSync(join(DIST, 'index.html'), 'utf8');
  for (const m of html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)) {
    assert.match(m[1], /src="\/assets\//);
    assert.equal(m[2].trim(), '');
  }
  assert.doesNotMatch(html, /\son[a-z]+=/i, 'inline event handler');
  const src = join(DIST, '..', 'src');
  for (const f of readdirSync(src).filter((f) => f.endsWith('.js'))) {
    const text = readFileSync(join(src, f), 'utf8');
    assert.doesNotMatch(text, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/, f);
  }
});
