#!/usr/bin/env bash
# Installs, once, the Python packages the SDK tests and the MCP tests use: the OpenAI SDK,
# the official MCP SDK (`mcp`), websockets, pytest, and `mcp-server-time` (the third-party MCP
# server tests/mcp.rs drives offline). Idempotent: does nothing when all are importable.
set -euo pipefail
PY=${PYTHON:-python3}
if ! "$PY" -c 'import openai, websockets, pytest, mcp, mcp_server_time' 2>/dev/null \
  || ! command -v mcp-server-time >/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check \
    openai websockets pytest 'mcp>=2.3' mcp-server-time
fi
