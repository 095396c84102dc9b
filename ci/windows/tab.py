#!/usr/bin/env python3
"""A chat tab in a few lines, for ci/windows/run.sh: talks to a hub (aicard.exe under Wine, or
any hub) over a WebSocket on /realtime, with Python's standard library only.

  tab.py PORT TOKEN hello      hello as a DeepSeek tab, expect `welcome`
  tab.py PORT TOKEN exec-on    also: commands through Windows' cmd (`--exec on`), see below
  tab.py PORT TOKEN allowlist  also: `--exec allowlist --allow hostname --allow greet
                               --allow planted`, greet.cmd on the PATH, planted.cmd only in
                               the workspace

Exit 0 when every expectation held; else a line saying which did not, exit 1."""

import base64
import json
import os
import socket
import struct
import subprocess
import sys
import time

WAIT = 30.0


class Tab:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                "GET /realtime HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                fail(f"the hub closed the handshake: {head!r}")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            fail(f"no WebSocket upgrade: {head.decode(errors='replace')}")

    def send(self, frame):
        data = json.dumps(frame).encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + body)

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                fail("the hub closed the socket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        """The next text frame as JSON (pings answered, other control frames skipped)."""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0F
            if op == 0x1:
                return json.loads(payload)
            if op == 0x8:
                fail(f"the hub closed the socket: {payload!r}")
            if op == 0x9:  # ping → pong, masked as a client must
                mask = os.urandom(4)
                body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask + body)

    def expect(self, what, pred, wait=WAIT):
        """Frames until one that `pred` accepts; fails after `wait` seconds."""
        deadline = time.monotonic() + wait
        seen = []
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                frame = self.recv()
            except socket.timeout:
                break
            if pred(frame):
                return frame
            seen.append(frame.get("type"))
        fail(f"no {what} within {wait:.0f} s (frames seen: {seen})")

    def command(self, text, wait=WAIT):
        """Types `?<text>!` as the person and returns the `cmd_result`'s result."""
        self.send({"type": "user_input", "text": f"?<{text}>!"})
        frame = self.expect(
            f"cmd_result for {text!r}",
            lambda f: f.get("type") == "cmd_result" and f.get("command") == text,
            wait,
        )
        return frame["result"]


def fail(why):
    print(f"tab.py: FAILED: {why}", file=sys.stderr)
    sys.exit(1)


def check(ok, why):
    if not ok:
        fail(why)


def processes(program, marker):
    """Linux pids of the Wine processes running `program` (`ping` matches `ping`, `ping.exe`
    and `C:\\windows\\system32\\ping.exe` as the first word: Wine shows a builtin program's
    command line as it was given) whose command line holds `marker`."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    pids = set()
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        first = args.split(" ", 1)[0].replace("\\", "/").rsplit("/", 1)[-1].lower()
        if first in (program, program + ".exe") and marker in args:
            pids.add(pid)
    return pids


def hello(port, token):
    tab = Tab(port)
    tab.send({"type": "hello", "token": token, "site": "deepseek", "label": "wine-tab"})
    welcome = tab.expect("welcome", lambda f: f.get("type") == "welcome")
    print(f"  hello → welcome: client_id {welcome['client_id']}, role {welcome['role']}")
    return tab


def exec_on(port, token):
    tab = hello(port, token)
    r = tab.command("echo hello from cmd")
    check(r["success"] and r["output"] == "hello from cmd", f"echo through cmd: {r}")
    print(f"  cmd echo → {r['output']!r} (no trailing \\r)")
    # A value with cmd syntax in it reaches the program as data (!AICARD_VAR_x!), never as
    # a second command: cmd's own echo prints it, quotes and all.
    evil = "50% & echo INJECTED"
    r = tab.command(f"set x = {evil}")
    check(r["success"], f"set x: {r}")
    r = tab.command("echo [$x]")
    check(
        r["success"] and r["output"] == f'["{evil}"]' and "\nINJECTED" not in r["output"],
        f"a variable's value ran as cmd syntax: {r}",
    )
    print(f"  variable with `& echo`: {r['output']!r} (data, not a command)")
    # A variable in a pipe is refused (a second cmd would parse it).
    r = tab.command("echo $x | more")
    check(not r["success"] and "pipeline" in r["output"], f"pipe with a variable: {r}")
    print("  variable in a pipe: refused")
    # PATHEXT: `hostname` is C:\windows\system32\hostname.exe.
    r = tab.command("hostname")
    check(r["success"] and r["output"], f"hostname: {r}")
    # The group is killed whole: a background job's cmd and its child ping.exe die with it.
    marker = "ping -n 97 127.0.0.1"
    r = tab.command(f"{marker} &")
    check(r["success"], f"background ping: {r}")
    job = r["output"].split()[1]
    deadline = time.monotonic() + 20
    while not processes("ping", marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    tree = processes("ping", marker) | processes("cmd", marker)
    check(processes("ping", marker), f"ping.exe never started (job {job}: {r['output']})")
    r = tab.command(f"jobs kill {job}")
    check(r["success"], f"jobs kill {job}: {r}")
    deadline = time.monotonic() + 10
    while tree & (processes("ping", marker) | processes("cmd", marker)):
        if time.monotonic() > deadline:
            fail(f"the job's processes outlived `jobs kill` (pids {sorted(tree)})")
        time.sleep(0.2)
    print(f"  `jobs kill {job}`: cmd.exe and its child ping.exe (pids {sorted(tree)}) gone")


def allowlist(port, token):
    tab = hello(port, token)
    # PATHEXT: `hostname` is C:\windows\system32\hostname.exe, run without a shell.
    r = tab.command("hostname")
    check(r["success"] and r["output"], f"hostname: {r}")
    print(f"  hostname → {r['output']!r} (hostname.exe through PATHEXT)")
    # A batch file through PATHEXT, its arguments quoted for cmd by Rust's std: `&` arrives as
    # data. (`%` is not checked: std writes it as `%%cd:~,%`, which Windows' cmd reads back as
    # `%`, while Wine 8's cmd, lacking that substring form, expands `%OS%` there; docs/windows.md.)
    r = tab.command("greet 'a & echo INJECTED' x")
    check(
        r["success"] and r["output"] == '["a & echo INJECTED"] [x]',
        f"greet.cmd's arguments: {r}",
    )
    print(f"  greet.cmd → {r['output']!r}")
    # Never from the working directory, though Windows would look there first.
    r = tab.command("planted")
    check(
        not r["success"] and "PLANTED" not in r["output"] and "on the PATH" in r["output"],
        f"planted.cmd ran from the workspace: {r}",
    )
    print("  planted.cmd in the workspace: not found (the workspace is never searched)")


if __name__ == "__main__":
    scenarios = {"hello": hello, "exec-on": exec_on, "allowlist": allowlist}
    if len(sys.argv) != 4 or sys.argv[3] not in scenarios:
        fail(__doc__)
    port, token, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    scenarios[scenario](port, token)
    print(f"tab.py: {scenario}: ok")
