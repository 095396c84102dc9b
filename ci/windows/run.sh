#!/usr/bin/env bash
# The Windows build, proven under Wine (docs/windows.md): builds aicard.exe with Debian's
# mingw-w64 (a debug build of the binary only) and runs it under Debian's Wine in a prefix of
# its own: `aicard.exe demo`, `aicard.exe flow validate flows/*.yaml`, and `aicard.exe serve`
# with a tab's hello from the Linux side (ci/windows/tab.py): under `--exec on` commands through
# Windows' cmd and a background job whose cmd and ping.exe must die with `jobs kill`; under
# `--exec allowlist` programs found through PATHEXT, never in the workspace.
# Installs what it needs when missing (gcc-mingw-w64-x86-64, wine64, rustup's
# x86_64-pc-windows-gnu target) and fails, saying why, when it cannot.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
TARGET=x86_64-pc-windows-gnu
TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
say() { printf '  [windows] %s\n' "$*"; }
die() { printf '  [windows] FAILED: %s\n' "$*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
missing=()
command -v x86_64-w64-mingw32-gcc >/dev/null || missing+=(gcc-mingw-w64-x86-64)
WINE=$(command -v wine64 || { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; } || true)
[ -n "$WINE" ] || missing+=(wine64)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} (Debian)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  WINE=$(command -v wine64 || { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; } || true)
fi
command -v x86_64-w64-mingw32-gcc >/dev/null || die "no x86_64-w64-mingw32-gcc after installing gcc-mingw-w64-x86-64"
[ -n "$WINE" ] || die "no wine64 after installing wine64"
WINESERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver)

if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  say "rustup target add $TARGET"
  rustup target add "$TARGET" ||
    die "\`rustup target add $TARGET\` failed: this machine cannot fetch Rust's Windows standard library, so aicard.exe cannot be built here (not skipped: the Windows build is a check of its own)"
fi

build_started=$SECONDS
# The smoke runs under Wine need neither debug info nor optimised dependencies: without them
# the cold cross build is the shorter part of this step (docs/windows.md).
cargo build --quiet --target "$TARGET" --bin aicard \
  --config 'profile.dev.debug=0' --config 'profile.dev.package."*".opt-level=0'
EXE="$TARGET_DIR/$TARGET/debug/aicard.exe"
[ -f "$EXE" ] || die "no $EXE after the build"
build_secs=$((SECONDS - build_started))
say "built $EXE in ${build_secs} s"

# A prefix of this test's own (kept in the target dir between runs; made anew in ~10 s).
export WINEPREFIX="$TARGET_DIR/wine-prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree=;mshtml="
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  say "wineboot: a new prefix in $WINEPREFIX"
  "$WINE" wineboot --init >/dev/null 2>&1 || die "wineboot --init failed"
  "$WINESERVER" -w
fi
# Test tooling only: Rust's std needs ProcessPrng (bcryptprimitives.dll), which Wine 8.0 lacks;
# the stand-in goes into this prefix's system32, never next to the product (prng-shim.c).
SHIM="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
if [ ! -f "$SHIM" ] || [ ci/windows/prng-shim.c -nt "$SHIM" ]; then
  x86_64-w64-mingw32-gcc -shared -O2 -s -o "$SHIM" ci/windows/prng-shim.c -ladvapi32 ||
    die "could not build the stand-in bcryptprimitives.dll"
fi
cleanup() {
  [ -n "${hub:-}" ] && kill "$hub" 2>/dev/null || true
  "$WINESERVER" -k 2>/dev/null || true
  [ -n "${scratch:-}" ] && rm -rf "$scratch"
}
trap cleanup EXIT
scratch=$(mktemp -d)

run_started=$SECONDS
say "aicard.exe --version: $("$WINE" "$EXE" --version | tr -d '\r')"

say "aicard.exe demo"
timeout 180 "$WINE" "$EXE" demo --timeout 120 >"$scratch/demo.log" 2>&1 ||
  { cat "$scratch/demo.log" >&2; die "aicard.exe demo failed"; }
tr -d '\r' <"$scratch/demo.log" | tail -n 6 | sed 's/^/    /'

say "aicard.exe flow validate flows/*.yaml"
timeout 120 "$WINE" "$EXE" flow validate flows/*.yaml | tr -d '\r' | sed 's/^/    /' ||
  die "aicard.exe flow validate failed"

# Starts `aicard.exe serve ARGS…` on a free port with the data dir $data; sets $hub, $port.
serve() {
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  say "aicard.exe serve $* on port $port (data dir Z:$data)"
  "$WINE" "$EXE" serve --port "$port" --data-dir "Z:$data" "$@" >"$scratch/hub.log" 2>&1 &
  hub=$!
  for _ in $(seq 1 120); do
    if [ -s "$data/token" ] && python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/healthz', timeout=1)" 2>/dev/null; then
      return
    fi
    kill -0 "$hub" 2>/dev/null || { cat "$scratch/hub.log" >&2; die "aicard.exe serve exited"; }
    sleep 0.5
  done
  cat "$scratch/hub.log" >&2
  die "aicard.exe serve did not come up in 60 s"
}
# Runs a tab.py scenario against the hub, then stops the hub.
tab() {
  timeout 120 python3 ci/windows/tab.py "$port" "$(cat "$data/token")" "$1" ||
    { tail -n 30 "$scratch/hub.log" >&2; die "tab.py $1 against aicard.exe serve"; }
  kill "$hub"
  wait "$hub" 2>/dev/null || true
  hub=
}
data="$scratch/data"
serve --exec on
tab exec-on

# Allowlist: greet.cmd on the PATH (Wine adds WINEPATH to it), planted.cmd only in the
# workspace, which Windows would search first and the hub never does.
mkdir -p "$scratch/tools" "$data/workspace"
printf '@echo [%%1] [%%2]\r\n' >"$scratch/tools/greet.cmd"
printf '@echo PLANTED\r\n' >"$data/workspace/planted.cmd"
WINEPATH="Z:$scratch/tools" serve --exec allowlist --allow hostname --allow greet --allow planted
tab allowlist

say "passed: build ${build_secs} s, Wine runs $((SECONDS - run_started)) s, the whole step $((SECONDS - started)) s"
