#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine (Debian's
# chromium and firefox-esr, the userscript's npm packages, the OpenAI Python SDK), then runs
# every check: formatting, clippy, the Rust unit and integration tests, flow validation, the
# OpenAI SDK against the hub, and the userscript's unit tests and browser matrix against the
# real hub.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n==> %s\n' "$*"; }

step "install test dependencies (chromium, npm packages)"
bash userscript/install-test-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --all-targets -- -D warnings

step "install the Python test packages (OpenAI and MCP SDKs, mcp-server-time)"
bash tests/sdk/install.sh

step "cargo test"
cargo test --all-targets

step "aicard flow validate flows/*.yaml"
cargo run --quiet -- flow validate flows/*.yaml

step "OpenAI and MCP Python SDKs against the hub (tests/sdk)"
bash tests/sdk/run.sh

step "dashboard: build check and browser tests (real Chromium against the real hub)"
bash dashboard/test/run.sh

step "userscript tests (node unit tests + real Chromium against mock sites and the real hub)"
cargo build --quiet
(cd userscript && AICARD_BIN="${CARGO_TARGET_DIR:-$PWD/../target}/debug/aicard" npm test)

echo
echo "all checks passed"
