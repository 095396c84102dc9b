#!/usr/bin/env bash
# The OpenAI and MCP Python SDKs against the built hub: installs what tests/sdk needs (once,
# tests/sdk/install.sh), builds `aicard`, runs tests/sdk. Exits non-zero on any failure, and
# when no test ran.
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${PYTHON:-python3}
PYTHON="$PY" bash tests/sdk/install.sh

if [ -z "${AICARD_BIN:-}" ]; then
  cargo build --quiet --bin aicard
  target=${CARGO_TARGET_DIR:-target}
  AICARD_BIN="$(cd "$target" && pwd)/debug/aicard"
fi
export AICARD_BIN

set +e
"$PY" -m pytest -q -p no:cacheprovider tests/sdk "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "tests/sdk: no tests were collected" >&2
  exit 1
fi
exit "$rc"
