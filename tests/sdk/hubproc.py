"""Starts the built hub (`AICARD_BIN`) on a free port for the SDK tests, and stops it; and
fetches a task's attachments as the tab's manager does."""

import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager


def fetch_attachments(base: str, token: str, client_id: str, task) -> list:
    """Each attachment of `task` fetched from `GET /files/ID` with the token and the tab's
    client id, while the task is held: [(attachment, status, bytes)]."""
    got = []
    for a in task.get("attachments") or []:
        req = urllib.request.Request(
            f"{base}/files/{a['id']}",
            headers={"Authorization": f"Bearer {token}", "X-AIcard-Client": client_id},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                got.append((a, r.status, r.read()))
        except urllib.error.HTTPError as e:
            got.append((a, e.code, b""))
    return got


@contextmanager
def running_hub(token: str, prefix: str, wait: float):
    """Yields the hub's base URL once it says where it listens; stops it and removes its
    data dir afterwards."""
    binary = os.environ.get("AICARD_BIN", "target/debug/aicard")
    data = tempfile.mkdtemp(prefix=prefix)
    proc = subprocess.Popen(
        [binary, "serve", "--port", "0", "--data-dir", data, "--token", token],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout], daemon=True).start()
        url = None
        deadline = time.monotonic() + wait
        while url is None and time.monotonic() < deadline:
            try:
                m = re.search(r"listening on (http://\S+)", lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, "the hub exited"
                continue
            if m:
                url = m.group(1)
        assert url, "the hub did not say where it listens"
        yield url
    finally:
        proc.terminate()
        proc.wait(wait)
        shutil.rmtree(data, ignore_errors=True)
