#!/usr/bin/env bash
# The OpenAI Python SDK against the built hub: installs openai, websockets and pytest (once),
# builds `aicard`, runs tests/sdk. Exits non-zero on any failure, and when no test ran.
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${PYTHON:-python3}
if ! "$PY" -c 'import openai, websockets, pytest' 2>/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check openai websockets pytest
fi

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
