"""Starts the built hub (`AICARD_BIN`) on a free port for the SDK tests, and stops it."""

import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager


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
