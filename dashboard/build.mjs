// Builds dist/: index.html (copied), app.js (one esbuild IIFE bundle of src/app.js, minified)
// and app.css (minified). Run: `npm run build` — `buildDashboard()` returns the files for the
// test that checks the committed dist matches its sources.
import { build, transform } from 'esbuild';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const here = dirname(fileURLToPath(import.meta.url));
export const DIST = join(here, 'dist');
export const FILES = ['index.html', 'app.js', 'app.css'];
/** Budget of all assets, gzip -9 (issue 17: ≤ 150 KB). */
export const BUDGET = 150 * 1024;

export async function buildDashboard() {
  const js = await build({
    entryPoints: [join(here, 'src', 'app.js')],
    bundle: true,
    format: 'iife',
    minify: true,
    target: ['chrome100', 'firefox100', 'safari15'],
    legalComments: 'none',
    write: false,
    charset: 'utf8',
  });
  const css = await transform(readFileSync(join(here, 'src', 'app.css'), 'utf8'), { loader: 'css', minify: true, charset: 'utf8' });
  return {
    'index.html': readFileSync(join(here, 'src', 'index.html'), 'utf8'),
    'app.js': js.outputFiles[0].text,
    'app.css': css.code,
  };
}

export function gzipSize(files) {
  return Object.values(files).reduce((n, text) => n + gzipSync(Buffer.from(text), { level: 9 }).length, 0);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const files = await buildDashboard();
  mkdirSync(DIST, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(DIST, name), text);
  const size = gzipSize(files);
  console.log(`dist/: ${FILES.join(', ')} — ${size} B gzip (budget ${BUDGET} B)`);
  if (size > BUDGET) { console.error('over the size budget'); process.exit(1); }
}
