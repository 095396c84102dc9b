#!/usr/bin/env bash
# Installs what the userscript tests need, idempotently: Debian's chromium and firefox-esr (never
# a downloaded browser build) and the npm devDependencies from package-lock.json (esbuild, playwright-core, ws).
# Usage: userscript/install-test-deps.sh   (then: cd userscript && npm test)
set -euo pipefail
cd "$(dirname "$0")"

if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/firefox-esr ] || missing+=(firefox-esr)
# A CJK font, so the panel's 中文 labels show in screenshots instead of empty boxes.
dpkg -s fonts-wqy-zenhei >/dev/null 2>&1 || missing+=(fonts-wqy-zenhei)
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${missing[@]}"
fi

if ! command -v npm >/dev/null; then
  echo "npm not found: install Node.js 20+ (Debian: apt-get install -y nodejs npm)" >&2
  exit 1
fi

# playwright-core must never fetch a browser of its own.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/esbuild ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

/usr/bin/chromium --version
/usr/bin/firefox-esr --version
node --version
