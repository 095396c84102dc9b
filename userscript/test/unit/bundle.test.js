// The committed dist/aicard.user.js must be exactly what the sources build to (cargo embeds it,
// so `cargo build` never needs npm), and its header must offer every supported site.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { buildUserscript, OUTPUT, REQUIRED_HOSTS } from '../../build.mjs';
import { validateAdapter } from '../../src/core/adapters.js';
import { adapters } from '../../src/adapters/index.js';

const committed = readFileSync(OUTPUT, 'utf8');

test('committed bundle equals a fresh build (run `npm run build` and commit)', async () => {
  const fresh = await buildUserscript();
  assert.ok(fresh === committed, 'dist/aicard.user.js is stale: run `npm run build` in userscript/ and commit it');
});

test('header: matches, run-at, grants, connect, update URLs', () => {
  const header = committed.slice(0, committed.indexOf('// ==/UserScript=='));
  for (const host of REQUIRED_HOSTS) assert.ok(header.includes(`// @match             https://${host}/*`), `@match ${host}`);
  for (const grant of ['GM_getValue', 'GM_setValue', 'GM_xmlhttpRequest', 'GM_registerMenuCommand', 'unsafeWindow']) assert.match(header, new RegExp(`@grant +${grant}\\n`));
  assert.match(header, /@run-at +document-start/);
  assert.match(header, /@connect +127\.0\.0\.1/);
  assert.match(header, /@connect +localhost/);
  assert.match(header, /@updateURL +__AICARD_HUB_URL__\/aicard\.user\.js/);
  assert.match(header, /@downloadURL +__AICARD_HUB_URL__\/aicard\.user\.js/);
  assert.match(header, /@description .*[\u4e00-\u9fff]/, 'bilingual description');
});

test('placeholders appear where the hub fills them in', () => {
  assert.ok(committed.includes('"__AICARD_TOKEN__"'));
  assert.ok(committed.includes('"__AICARD_HUB_URL__"'));
});

test('every site adapter fulfils the contract', () => {
  for (const a of adapters) assert.deepEqual(validateAdapter(a), [], a.name);
  for (const host of REQUIRED_HOSTS.filter(() => adapters.length >= 9)) {
    assert.ok(adapters.some((a) => a.hosts.includes(host)), `an adapter runs on ${host}`);
  }
});
