#!/usr/bin/env bash
# Installs, once, the Python packages the SDK tests and the MCP tests use: the OpenAI SDK,
# the official MCP SDK (`mcp`), websockets, pytest, and `mcp-server-time` (the third-party MCP
# server tests/it/mcp.rs drives offline); and promtool. Idempotent: does nothing when all are
# there.
set -euo pipefail
PY=${PYTHON:-python3}
if ! "$PY" -c 'import openai, websockets, pytest, mcp, mcp_server_time' 2>/dev/null \
  || ! command -v mcp-server-time >/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check \
    openai websockets pytest 'mcp>=2.3' mcp-server-time
fi

# promtool (Debian's `prometheus` package carries it), for the `promtool check metrics` of a
# live /metrics scrape in tests/it/api.rs (required there when AICARD_REQUIRE_PROMTOOL=1, which
# test-all.sh sets). Only promtool is wanted: without recommends, and the Prometheus server the
# package sets up is stopped and disabled where systemd started it.
# A failure here is a warning: the Python tests do not need promtool (tests/it/api.rs says so
# when it is required and missing).
if ! command -v promtool >/dev/null; then
  if command -v apt-get >/dev/null; then
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
    if $SUDO apt-get update \
      && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends prometheus
    then
      if command -v systemctl >/dev/null && systemctl is-enabled prometheus >/dev/null 2>&1; then
        $SUDO systemctl disable --now prometheus || true
      fi
    else
      echo "tests/sdk/install.sh: could not install promtool (Debian's prometheus)" >&2
    fi
  else
    echo "tests/sdk/install.sh: no apt-get; install promtool (Prometheus) by hand" >&2
  fi
fi
