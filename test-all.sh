#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine (Debian's
# chromium and firefox-esr, nats-server, the userscript's npm packages, the OpenAI Python SDK,
# mingw-w64 and Wine for the Windows build), then runs
# every check: formatting, clippy, the Rust unit and integration tests, flow validation, the
# OpenAI SDK against the hub, and the userscript's unit tests and browser matrix against the
# real hub.
set -euo pipefail
cd "$(dirname "$0")"

# Each step's wall time, printed as it ends and as a table at the end (docs/benchmarks.md,
# "The loop of minutes"), so a slow step shows where the half-hour goes.
timings=()
step_name=
step_started=$SECONDS
end_step() {
  if [ -n "$step_name" ]; then
    local secs=$((SECONDS - step_started))
    timings+=("$(printf '%5d s  %s' "$secs" "$step_name")")
    printf '    (%s: %d s)\n' "$step_name" "$secs"
  fi
}
step() {
  end_step
  step_name="$*"
  step_started=$SECONDS
  printf '\n==> %s\n' "$*"
}

step "install test dependencies (chromium, npm packages)"
bash userscript/install-test-deps.sh

step "install nats-server (Debian) for the cluster tests"
if ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; then
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y nats-server
fi
# The cluster tests start their own nats-server (core NATS, free port on 127.0.0.1);
# with this set they fail instead of skipping when it is missing.
export AICARD_REQUIRE_NATS=1

step "python on PATH (the seed manual's flows call \`python\`)"
if ! command -v python >/dev/null; then
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y python-is-python3
fi
# tests/seed_flows.rs runs the manual's 数据分析流程 with real Python scripts; with this set
# it fails instead of skipping when `python` is missing.
export AICARD_REQUIRE_PYTHON=1

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --all-targets -- -D warnings

step "install the Python test packages (OpenAI and MCP SDKs, mcp-server-time)"
bash tests/sdk/install.sh

step "cargo test"
# tests/it/api.rs checks a live /metrics scrape with `promtool check metrics` (installed by
# tests/sdk/install.sh); with this set it fails instead of skipping when promtool is missing.
export AICARD_REQUIRE_PROMTOOL=1
cargo test --lib --bins --tests

# The integration tests built `aicard` (they run it); every step below uses that binary. A
# `cargo run`/`cargo build` here would build it again without the dev-dependencies' features
# (about a minute on this machine, docs/benchmarks.md "The loop of minutes").
AICARD_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/aicard"
[ -x "$AICARD_BIN" ] || { echo "cargo test did not leave $AICARD_BIN" >&2; exit 1; }
export AICARD_BIN

step "aicard flow validate flows/*.yaml"
"$AICARD_BIN" flow validate flows/*.yaml

step "Windows: aicard.exe (mingw-w64) under Wine: demo, flow validate, serve + a tab (docs/windows.md)"
bash ci/windows/run.sh

step "OpenAI and MCP Python SDKs against the hub (tests/sdk)"
bash tests/sdk/run.sh

step "dashboard: build check and browser tests (real Chromium against the real hub)"
bash dashboard/test/run.sh

step "userscript tests (node unit tests + real Chromium against mock sites and the real hub)"
(cd userscript && npm test)

end_step
echo
echo "step times (wall):"
printf '  %s\n' "${timings[@]}"
printf '  %5d s  the whole run\n' "$SECONDS"
echo
echo "all checks passed"
