"""The official OpenAI Python SDK as a real client of the hub's API.

Starts the built hub (`aicard serve --port 0`), connects a simulated tab over WebSocket that
streams its replies in chunks, then drives `/v1` with `openai.OpenAI`. Run with
tests/sdk/run.sh (it builds the binary and sets AICARD_BIN).
"""

import base64
import hashlib
import json
import queue
import threading
import time

import urllib.request

import openai
import pytest
from websockets.sync.client import connect

from hubproc import fetch_attachments, running_hub

TOKEN = "sdk-test-token"
WAIT = 10


def reply_for(prompt: str) -> str:
    return f"echo: {prompt} — 你好, 世界 🚀\nend."


def pieces(text: str, size: int = 3):
    return [text[i : i + size] for i in range(0, len(text), size)]


class Tab:
    """A simulated chat tab: answers each task by streaming `reply_for(prompt)` in chunks.

    A prompt containing HOLD streams one chunk, then waits for `release`; one containing
    ABORT streams one chunk and stops (its client is expected to leave)."""

    def __init__(self, base: str, label: str, site: str = "sim", role: str = "worker"):
        # Entered by hand: the tab lives as long as the module's tests.
        self.ws = connect(base.replace("http://", "ws://") + "/realtime").__enter__()
        self.ws.send(
            json.dumps({"type": "hello", "token": TOKEN, "site": site, "label": label, "role": role})
        )
        welcome = json.loads(self.ws.recv(timeout=WAIT))
        assert welcome["type"] == "welcome", welcome
        self.base = base
        self.id = welcome["client_id"]
        # (attachment, status, bytes) of each file a task carried, fetched while it was held.
        self.files = queue.Queue()
        self.lock = threading.Lock()
        self.tasks = queue.Queue()
        self.cancels = queue.Queue()
        self.results = queue.Queue()
        self.release = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, frame):
        with self.lock:
            self.ws.send(json.dumps(frame))

    def _read(self):
        try:
            for msg in self.ws:
                frame = json.loads(msg)
                if frame["type"] == "task":
                    self.tasks.put(frame)
                    threading.Thread(target=self._answer, args=(frame,), daemon=True).start()
                elif frame["type"] == "cancel":
                    self.cancels.put((time.monotonic(), frame))
                elif frame["type"] == "cmd_result":
                    self.results.put(frame)
        except Exception:
            pass

    def _answer(self, task):
        tid, prompt = task["task_id"], task["prompt"]
        turn = f"turn-{tid}"
        text = reply_for(prompt)
        for got in fetch_attachments(self.base, TOKEN, self.id, task):
            self.files.put(got)
        self.send({"type": "task_update", "task_id": tid, "state": "accepted"})
        parts = pieces(text)
        if "CAPTCHA" in prompt:
            self.send(
                {"type": "task_update", "task_id": tid, "state": "failed", "error": "captcha", "trouble": "captcha"}
            )
            return
        if "ABORT" in prompt:
            self.send({"type": "chunk", "turn_id": turn, "seq": 0, "text": parts[0]})
            return
        if "HOLD" in prompt:
            self.send({"type": "chunk", "turn_id": turn, "seq": 0, "text": parts[0]})
            self.release.wait(WAIT)
            parts = parts[1:]
        for i, p in enumerate(parts):
            self.send({"type": "chunk", "turn_id": turn, "seq": i + 1, "text": p})
        self.send({"type": "turn_end", "turn_id": turn, "text": text, "task_id": tid})

    def next_task(self):
        return self.tasks.get(timeout=WAIT)

    def command(self, text: str):
        """Types a command as the person would; returns its cmd_result."""
        self.send({"type": "user_input", "text": text})
        return self.results.get(timeout=WAIT)


@pytest.fixture(scope="module")
def hub():
    with running_hub(TOKEN, "aicard-sdk-", WAIT) as url:
        yield url


@pytest.fixture(scope="module")
def tab(hub):
    return Tab(hub, "py-1")


def client(hub, key=TOKEN):
    return openai.OpenAI(base_url=hub + "/v1", api_key=key, max_retries=0, timeout=WAIT)


def test_models_list_shows_the_online_tab(hub, tab):
    models = {m.id: m for m in client(hub).models.list()}
    assert {"site/sim", "tab/py-1", "auto"} <= set(models)
    assert models["site/sim"].owned_by == "aicard"
    aicard = models["site/sim"].model_extra["aicard"]
    assert {k: aicard[k] for k in ("tabs", "busy", "queue_depth")} == {
        "tabs": 1,
        "busy": 0,
        "queue_depth": 0,
    }
    # How the site's answers arrived (network, page text, empty) and whether its adapter
    # looks outdated (docs/api.md).
    assert set(aicard["answers"]["site"]) == {"network", "dom", "empty"}, aicard
    assert aicard["answers"]["flag"] is None, aicard


def test_a_completion_without_streaming(hub, tab):
    r = client(hub).chat.completions.create(
        model="site/sim", messages=[{"role": "user", "content": "hi"}]
    )
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == reply_for("hi")
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.total_tokens > 0
    assert tab.next_task()["prompt"] == "hi"


def test_a_stream_reassembles_the_tabs_text_with_one_finish_reason(hub, tab):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "stream please"},
    ]
    stream = client(hub).chat.completions.create(
        model="tab/py-1", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    prompt = tab.next_task()["prompt"]
    assert prompt.endswith("\n\nstream please") and "[system]\nBe brief." in prompt
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    text = "".join(d.content or "" for d in deltas)
    assert text == reply_for(prompt)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert len({c.id for c in chunks}) == 1


def test_a_wrong_key_is_an_authentication_error(hub, tab):
    with pytest.raises(openai.AuthenticationError) as e:
        client(hub, key="wrong").models.list()
    assert e.value.status_code == 401


def test_a_busy_tab_and_a_short_queue_timeout_is_a_rate_limit_error(hub, tab):
    tab.release.clear()
    c = client(hub)
    held = c.chat.completions.create(
        model="site/sim", messages=[{"role": "user", "content": "HOLD this"}], stream=True
    )
    first = next(iter(held))
    assert first.choices[0].delta.role == "assistant"
    tab.next_task()
    with pytest.raises(openai.RateLimitError) as e:
        c.chat.completions.create(
            model="site/sim",
            messages=[{"role": "user", "content": "impatient"}],
            extra_headers={"X-AIcard-Queue-Timeout": "0"},
        )
    assert e.value.status_code == 429
    assert int(e.value.response.headers["retry-after"]) >= 1
    assert e.value.code == "tabs_busy"
    tab.release.set()
    rest = "".join(ch.choices[0].delta.content or "" for ch in held if ch.choices)
    assert first.choices[0].delta.content + rest == reply_for("HOLD this")


def test_unsupported_parameters_and_absent_models(hub, tab):
    c = client(hub)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(
            model="site/sim",
            messages=[{"role": "user", "content": "x"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        )
    assert e.value.code == "unsupported_parameter" and e.value.param == "tools"
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="site/sim", messages=[{"role": "user", "content": "x"}], n=2)
    assert e.value.param == "n"
    # A site with no tab online now: 503, worth retrying.
    with pytest.raises(openai.APIStatusError) as e:
        c.chat.completions.create(model="site/kimi", messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 503
    # An id that can never be served: 404, which the SDK does not retry.
    with pytest.raises(openai.NotFoundError) as e:
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert e.value.code == "model_not_found" and e.value.param == "model"
    assert c.models.retrieve("site/sim").id == "site/sim"
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(
            model="site/sim", messages=[{"role": "user", "content": "x"}], response_format={"type": "json_object"}
        )
    assert e.value.param == "response_format"


def test_closing_a_stream_mid_way_frees_the_tab_within_2s(hub, tab):
    c = client(hub)
    stream = c.chat.completions.create(
        model="tab/py-1", messages=[{"role": "user", "content": "ABORT soon"}], stream=True
    )
    it = iter(stream)
    next(it)  # role
    assert next(it).choices[0].delta.content
    task = tab.next_task()
    closed = time.monotonic()
    stream.close()
    at, frame = tab.cancels.get(timeout=WAIT)
    assert frame["task_id"] == task["task_id"]
    assert at - closed < 2.0
    r = c.chat.completions.create(model="tab/py-1", messages=[{"role": "user", "content": "after"}])
    assert r.choices[0].message.content == reply_for("after")
    assert time.monotonic() - closed < 2.0 + 1.0


def refusals_503(hub) -> int:
    """How many /v1 requests the hub answered with 503 (its own counter, from /metrics)."""
    req = urllib.request.Request(hub + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    text = urllib.request.urlopen(req, timeout=WAIT).read().decode()
    for line in text.splitlines():
        if line.startswith('aicard_requests_total{') and 'door="v1"' in line and 'status="503"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_a_tab_parked_on_a_captcha_is_refused_at_once_and_the_sdk_does_not_retry(hub):
    parker = Tab(hub, "parker", site="chatglm")
    c = client(hub)
    with pytest.raises(openai.InternalServerError):
        c.chat.completions.create(model="tab/parker", messages=[{"role": "user", "content": "CAPTCHA"}])
    parker.next_task()
    # The SDK's own retries on (max_retries=2): a 503 would be retried, but this one says not to.
    patient = openai.OpenAI(base_url=hub + "/v1", api_key=TOKEN, max_retries=2, timeout=WAIT)
    before = refusals_503(hub)
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as e:
        patient.chat.completions.create(
            model="site/chatglm",
            messages=[{"role": "user", "content": "anyone?"}],
            extra_headers={"X-AIcard-Queue-Timeout": "120"},
        )
    assert time.monotonic() - started < 3.0
    assert e.value.status_code == 503
    assert e.value.code == "tabs_unavailable"
    assert "parker captcha" in e.value.message
    assert e.value.response.headers["x-should-retry"] == "false"
    assert refusals_503(hub) == before + 1, "the SDK sent the request once"
    entry = c.models.retrieve("site/chatglm").model_extra["aicard"]
    assert (entry["tabs"], entry["unavailable"]) == (1, 1), entry


def test_the_turns_of_one_conversation_go_to_one_tab(hub):
    tabs = {"k1": Tab(hub, "k1", site="kimi"), "k2": Tab(hub, "k2", site="kimi")}
    c = client(hub)

    def who_answered():
        for name, t in tabs.items():
            try:
                t.tasks.get(timeout=0.5)
                return name
            except queue.Empty:
                continue
        raise AssertionError("no tab got the task")

    history = [{"role": "user", "content": "讲个故事"}]
    r = c.chat.completions.create(model="site/kimi", messages=history)
    first = who_answered()
    # The other tab stays idle, so the least used tab is never the conversation's own.
    for turn in range(3):
        history += [
            {"role": "assistant", "content": r.choices[0].message.content},
            {"role": "user", "content": f"然后呢 {turn}"},
        ]
        r = c.chat.completions.create(model="site/kimi", messages=history)
        assert who_answered() == first, f"turn {turn}"
    named = {"X-AIcard-Conversation": "chat-42"}
    c.chat.completions.create(model="site/kimi", messages=[{"role": "user", "content": "one"}], extra_headers=named)
    tab1 = who_answered()
    # Past the point where its tab is the more used one.
    for text in ("two", "three", "four", "five", "six", "seven"):
        c.chat.completions.create(model="site/kimi", messages=[{"role": "user", "content": text}], extra_headers=named)
        assert who_answered() == tab1, text


def test_agents_are_models_the_sdk_lists_and_retrieves(hub, tab):
    boss = Tab(hub, "boss", role="master")
    made = boss.command("?<agent create scout on py-1>!")
    assert made["result"]["success"], made
    c = client(hub)
    ids = [m.id for m in c.models.list()]
    assert "agent/scout" in ids, ids
    scout = c.models.retrieve("agent/scout")
    assert scout.id == "agent/scout" and scout.object == "model" and scout.owned_by == "aicard"
    assert scout.model_extra["aicard"]["target"] == "py-1"
    # Every id chat accepts is retrievable, under its canonical id.
    assert c.models.retrieve("sim").id == "site/sim"
    assert c.models.retrieve("site/doubao").model_extra["aicard"]["tabs"] == 0
    for missing in ("agent/nobody", "gpt-4o"):
        with pytest.raises(openai.NotFoundError) as e:
            c.models.retrieve(missing)
        assert e.value.code == "model_not_found" and "agent/NAME" in e.value.message


def next_task_with_files(tab):
    while True:
        task = tab.next_task()
        if task.get("attachments"):
            return task


def test_an_image_data_url_and_a_pdf_reach_the_tab_as_attachments(hub, tab):
    """The SDK's own content parts: `image_url` with a data: URL, and `file` with
    `file_data`; the tab gets attachment ids and fetches the very bytes with its token."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    pdf = b"%PDF-1.4 sdk test"
    r = client(hub).chat.completions.create(
        model="tab/py-1",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is in it?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()},
                    },
                    {
                        "type": "file",
                        "file": {
                            "filename": "notes.pdf",
                            "file_data": "data:application/pdf;base64," + base64.b64encode(pdf).decode(),
                        },
                    },
                ],
            }
        ],
    )
    task = next_task_with_files(tab)
    assert task["prompt"] == "what is in it?\n[file: image-1.png]\n[file: notes.pdf]", task
    files = [tab.files.get(timeout=WAIT) for _ in range(2)]
    (img, status, body), (doc, dstatus, dbody) = files
    assert img["id"] and img["mime"] == "image/png", img
    assert img["sha256"] == hashlib.sha256(png).hexdigest()
    assert (status, body) == (200, png)
    assert doc["name"] == "notes.pdf" and doc["mime"] == "application/pdf", doc
    assert (dstatus, dbody) == (200, pdf)
    assert r.choices[0].message.content == reply_for(task["prompt"])


def test_a_remote_image_url_and_a_bad_data_url_are_bad_requests(hub, tab):
    for url, code, words in [
        ("https://example.com/cat.png", "invalid_image_url", "--fetch-urls"),
        ("data:image/png,notbase64", "invalid_image_url", "base64"),
        ("data:image/svg+xml;base64,PHN2Zy8+", "unsupported_file_type", "image/svg+xml"),
    ]:
        with pytest.raises(openai.BadRequestError) as e:
            client(hub).chat.completions.create(
                model="tab/py-1",
                messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}],
            )
        assert e.value.code == code, e.value
        assert e.value.param == "messages[0].content[0]", e.value
        assert words in str(e.value), e.value
