#!/usr/bin/env bash
# The dashboard's tests: the committed build matches its sources, then the browser tests in
# Chromium against the real hub. Installs what it needs (npm ci; never a browser).
set -euo pipefail
cd "$(dirname "$0")/.."
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  npm ci --no-audit --no-fund
fi
if [ -z "${AICARD_BIN:-}" ]; then
  (cd .. && cargo build --bin aicard)
fi
node --test --test-concurrency=1 --test-reporter=spec test/*.test.js
