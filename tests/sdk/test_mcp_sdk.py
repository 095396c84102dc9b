"""The official MCP Python SDK (`pip install mcp`) as a real client of both MCP doors.

Starts the built hub, connects simulated tabs over WebSocket, then drives the tools through
Streamable HTTP at /mcp and through `aicard mcp` on stdio, with the legacy `initialize`
handshake (2025-11-25) and the stateless `server/discover` (2026-07-28). Run with
tests/sdk/run.sh.
"""

import asyncio
import base64
import json
import os
import queue
import threading

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from websockets.sync.client import connect

from hubproc import fetch_attachments, running_hub

TOKEN = "mcp-sdk-token"
WAIT = 10
TOOLS = ["list_tabs", "ask", "fan_out", "run_flow", "get_run", "cancel", "list_flows", "agent_task"]


class Tab:
    """A simulated chat tab answering `answer: PROMPT`; with `hold`, it answers only once
    `release` is set. Counts the tasks it got."""

    def __init__(self, base: str, label: str, hold: bool = False):
        self.ws = connect(base.replace("http://", "ws://") + "/realtime").__enter__()
        self.ws.send(json.dumps({"type": "hello", "token": TOKEN, "site": "sim", "label": label}))
        welcome = json.loads(self.ws.recv(timeout=WAIT))
        assert welcome["type"] == "welcome", welcome
        self.id = welcome["client_id"]
        self.base = base
        # (attachment, status, bytes) of each file a task carried, fetched while it was held.
        self.files = queue.Queue()
        self.hold = hold
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.tasks = queue.Queue()
        self.cancels = queue.Queue()
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
                    self.cancels.put(frame)
        except Exception:
            pass

    def _answer(self, task):
        tid = task["task_id"]
        for got in fetch_attachments(self.base, TOKEN, self.id, task):
            self.files.put(got)
        self.send({"type": "task_update", "task_id": tid, "state": "accepted"})
        if self.hold or "HOLD" in task["prompt"]:
            assert self.release.wait(WAIT), "never released"
        text = f"answer: {task['prompt']}"
        self.send({"type": "turn_end", "turn_id": f"t-{tid}", "text": text, "task_id": tid})


@pytest.fixture(scope="module")
def hub():
    with running_hub(TOKEN, "aicard-mcp-sdk-", WAIT) as url:
        yield url


@pytest.fixture(scope="module")
def tabs(hub):
    return {"a": Tab(hub, "mcp-a"), "b": Tab(hub, "mcp-b", hold=True)}


def http_session(url):
    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx2.Timeout(30, read=120)
    )
    return client, streamable_http_client(url + "/mcp", http_client=client)


async def open_session(stack, transport, mode):
    read, write, *_ = await stack.enter_async_context(transport)
    session = await stack.enter_async_context(ClientSession(read, write))
    if mode == "initialize":
        result = await session.initialize()
        assert result.protocol_version == "2025-11-25", result.protocol_version
        assert result.server_info.name == "aicard"
    else:
        result = await session.discover()
        assert session.protocol_version == "2026-07-28", session.protocol_version
    return session


def structured(result):
    assert not result.is_error, result
    s = result.structured_content
    # The same as text content.
    assert json.loads(result.content[0].text) == s
    return s


async def transcript(session, tabs):
    tools = await session.list_tools()
    names = [t.name for t in tools.tools]
    # The seven, in order, then the skills of skills/ as skill_NAME tools.
    assert names[: len(TOOLS)] == TOOLS, names
    assert "skill_summarize" in names[len(TOOLS) :], names
    assert all(n.startswith("skill_") for n in names[len(TOOLS) :]), names
    summarize = next(t for t in tools.tools if t.name == "skill_summarize")
    assert summarize.input_schema["required"] == ["text"]
    # Arguments are checked against the skill's schema before anything is typed anywhere.
    bad = await session.call_tool("skill_summarize", {"words": 3})
    assert bad.is_error, bad
    assert "text" in bad.content[0].text and "words" in bad.content[0].text, bad
    ask = next(t for t in tools.tools if t.name == "ask")
    assert set(ask.input_schema["required"]) == {"target", "prompt"}
    assert "wait_s" in ask.input_schema["properties"]
    listed = structured(await session.call_tool("list_tabs", {}))
    labels = {t["label"] for t in listed["tabs"]}
    assert {"mcp-a", "mcp-b"} <= labels, listed
    got = structured(await session.call_tool("ask", {"target": "tab/mcp-a", "prompt": "hi"}))
    assert got["status"] == "completed", got
    assert got["answers"] == [
        {"tab": tabs["a"].id, "site": "sim", "label": "mcp-a", "text": "answer: hi"}
    ]
    assert got["text"] == "answer: hi"
    flows = structured(await session.call_tool("list_flows", {}))
    assert "flows" in flows


@pytest.mark.parametrize("mode", ["initialize", "discover"])
def test_http_door(hub, tabs, mode):
    async def go():
        client, transport = http_session(hub)
        async with client:
            async with contextlib_stack() as stack:
                session = await open_session(stack, transport, mode)
                await transcript(session, tabs)

    asyncio.run(go())


@pytest.mark.parametrize("mode", ["initialize", "discover"])
def test_stdio_door(hub, tabs, mode):
    binary = os.environ.get("AICARD_BIN", "target/debug/aicard")
    params = StdioServerParameters(command=binary, args=["mcp", "--hub", hub, "--token", TOKEN])

    async def go():
        async with contextlib_stack() as stack:
            session = await open_session(stack, stdio_client(params), mode)
            await transcript(session, tabs)

    asyncio.run(go())


def test_slow_tab_is_picked_up_with_get_run(hub, tabs):
    async def go():
        client, transport = http_session(hub)
        async with client:
            async with contextlib_stack() as stack:
                session = await open_session(stack, transport, "initialize")
                first = structured(
                    await session.call_tool(
                        "ask", {"target": "tab/mcp-a", "prompt": "HOLD slow", "wait_s": 0.5}
                    )
                )
                assert first["status"] == "running", first
                run_id = first["run_id"]
                tabs["a"].release.set()
                done = structured(
                    await session.call_tool("get_run", {"run_id": run_id, "wait_s": WAIT})
                )
                assert done["status"] == "completed", done
                assert done["run_id"] == run_id
                assert done["answers"][0]["text"] == "answer: HOLD slow"

    asyncio.run(go())


@pytest.mark.parametrize("door", ["http", "stdio"])
def test_fan_out_sends_progress(hub, tabs, door):
    """One tab answers, the other holds until the client saw a progress notification: over
    HTTP, and through the stdio relay (`aicard mcp`, the door Claude Desktop and Cline use)."""
    seen = []
    tabs["b"].release.clear()  # the tabs outlive one test: b holds again until progress comes

    async def on_progress(progress, total, message):
        seen.append((progress, message))
        tabs["b"].release.set()

    async def go():
        async with contextlib_stack() as stack:
            session = await session_on(stack, hub, door)
            r = structured(
                await session.call_tool(
                    "fan_out",
                    {"targets": ["tab/mcp-a", "tab/mcp-b"], "prompt": "both", "wait_s": WAIT},
                    progress_callback=on_progress,
                )
            )
            assert r["status"] == "completed", r
            assert sorted(a["label"] for a in r["answers"]) == ["mcp-a", "mcp-b"]
            assert "[mcp-a] answer: both" in r["text"]

    asyncio.run(go())
    assert seen and "1/2" in seen[0][1], seen


async def session_on(stack, hub, door):
    if door == "http":
        client, transport = http_session(hub)
        await stack.enter_async_context(client)
    else:
        binary = os.environ.get("AICARD_BIN", "target/debug/aicard")
        params = StdioServerParameters(command=binary, args=["mcp", "--hub", hub, "--token", TOKEN])
        transport = stdio_client(params)
    return await open_session(stack, transport, "initialize")


@pytest.mark.parametrize("door", ["http", "stdio"])
def test_a_cancelled_call_stops_the_tab_and_frees_it(hub, door):
    """Issue 32 item 1: the SDK cancels a call (what Claude Desktop, Cursor and the Inspector
    do: `notifications/cancelled`); the tab gets `cancel` for its task at once, and the next
    call is typed into it straight away, over HTTP and through the stdio relay."""
    label = f"mcp-cancel-{door}"
    tab = Tab(hub, label, hold=True)

    async def go():
        async with contextlib_stack() as stack:
            session = await session_on(stack, hub, door)
            call = asyncio.create_task(
                session.call_tool("ask", {"target": f"tab/{label}", "prompt": "a long one", "wait_s": WAIT})
            )
            task = await asyncio.to_thread(tab.tasks.get, True, WAIT)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            frame = await asyncio.to_thread(tab.cancels.get, True, WAIT)
            assert frame["task_id"] == task["task_id"], frame
            tab.hold = False
            tab.release.set()
            got = structured(
                await asyncio.wait_for(
                    session.call_tool("ask", {"target": f"tab/{label}", "prompt": "next", "wait_s": WAIT}),
                    WAIT,
                )
            )
            assert got["status"] == "completed" and got["text"] == "answer: next", got

    asyncio.run(go())


def test_same_idempotency_key_types_one_prompt(hub, tabs):
    async def go():
        client, transport = http_session(hub)
        async with client:
            async with contextlib_stack() as stack:
                session = await open_session(stack, transport, "discover")
                before = tabs["a"].tasks.qsize()
                args = {"target": "tab/mcp-a", "prompt": "once", "idempotency_key": "k-1"}
                one = structured(await session.call_tool("ask", args))
                two = structured(await session.call_tool("ask", args))
                assert one["run_id"] == two["run_id"]
                assert two["status"] == "completed"
                assert tabs["a"].tasks.qsize() - before == 1

    asyncio.run(go())


def test_security_refusals(hub):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx2.Client(timeout=WAIT) as c:
        r = c.post(hub + "/mcp", json=body, headers=headers)
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"].startswith("Bearer")
        auth = dict(headers, Authorization=f"Bearer {TOKEN}")
        r = c.post(hub + "/mcp", json=body, headers=dict(auth, Origin="https://evil.example"))
        assert r.status_code == 403, r.text
        r = c.post(hub + "/mcp", json=body, headers=dict(auth, Host="evil.example"))
        assert r.status_code == 403, r.text
        r = c.post(hub + "/mcp", json=body, headers=dict(auth, Authorization="Bearer wrong"))
        assert r.status_code == 401, r.text


def contextlib_stack():
    import contextlib

    return contextlib.AsyncExitStack()


@pytest.mark.parametrize("door", ["http", "stdio"])
def test_resources_list_read_and_a_subscribed_run_is_updated(hub, tabs, door):
    """The hub's resources (docs/mcp.md, "Resources"): listed, read, and a run's resource
    subscribed to — the run finishing sends notifications/resources/updated for it, and a read
    then shows the answer (2025-11-25: resources/subscribe); over HTTP and through the stdio
    relay."""
    from mcp_types import ResourceUpdatedNotification

    updated = asyncio.Queue()

    async def on_message(message):
        if isinstance(message, ResourceUpdatedNotification):
            await updated.put(str(message.params.uri))

    tabs["a"].release.clear()

    async def go():
        async with contextlib_stack() as stack:
            if door == "http":
                client, transport = http_session(hub)
                await stack.enter_async_context(client)
            else:
                binary = os.environ.get("AICARD_BIN", "target/debug/aicard")
                params = StdioServerParameters(command=binary, args=["mcp", "--hub", hub, "--token", TOKEN])
                transport = stdio_client(params)
            read, write, *_ = await stack.enter_async_context(transport)
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=on_message)
            )
            init = await session.initialize()
            assert init.capabilities.resources.subscribe, init.capabilities
            listed = await session.list_resources()
            uris = [str(r.uri) for r in listed.resources]
            assert "aicard://tabs" in uris, uris
            tabs_now = await session.read_resource("aicard://tabs")
            body = json.loads(tabs_now.contents[0].text)
            assert tabs_now.contents[0].mime_type == "application/json"
            assert {"mcp-a", "mcp-b"} <= {t["label"] for t in body["tabs"]}, body
            templates = await session.list_resource_templates()
            assert {t.uri_template for t in templates.resource_templates} == {
                "aicard://flows/{name}",
                "aicard://runs/{run_id}",
            }
            first = structured(
                await session.call_tool(
                    "ask", {"target": "tab/mcp-a", "prompt": "HOLD resource", "wait_s": 0.2}
                )
            )
            assert first["status"] == "running", first
            uri = f"aicard://runs/{first['run_id']}"
            assert uri in [str(r.uri) for r in (await session.list_resources()).resources]
            before = json.loads((await session.read_resource(uri)).contents[0].text)
            assert before["status"] == "running", before
            await session.subscribe_resource(uri)
            tabs["a"].release.set()
            # Each change is announced (the answer, then the run's end): read after each.
            after = before
            while after["status"] == "running":
                got = await asyncio.wait_for(updated.get(), WAIT)
                assert got == uri, got
                after = json.loads((await session.read_resource(uri)).contents[0].text)
            assert after["status"] == "completed", after
            assert after["text"] == "answer: HOLD resource", after
            with pytest.raises(Exception) as e:
                await session.read_resource("aicard://runs/nope")
            assert "-32002" in repr(e.value) or "no resource" in str(e.value), e.value

    asyncio.run(go())


def test_listen_gets_a_runs_update_at_2026_07_28(hub, tabs):
    """The same through `subscriptions/listen` (2026-07-28, the SDK's listen())."""
    from mcp.client.subscriptions import listen

    tabs["a"].release.clear()

    async def go():
        client, transport = http_session(hub)
        async with client:
            async with contextlib_stack() as stack:
                session = await open_session(stack, transport, "discover")
                first = structured(
                    await session.call_tool(
                        "ask", {"target": "tab/mcp-a", "prompt": "HOLD listen", "wait_s": 0.2}
                    )
                )
                uri = f"aicard://runs/{first['run_id']}"
                async with listen(session, resource_subscriptions=[uri, "aicard://nothing"]) as sub:
                    assert list(sub.honored.resource_subscriptions or []) == [uri], sub.honored
                    tabs["a"].release.set()
                    after = {"status": "running"}
                    while after["status"] == "running":
                        event = await asyncio.wait_for(sub.__anext__(), WAIT)
                        assert str(event.uri) == uri, event
                        after = json.loads((await session.read_resource(uri)).contents[0].text)
                assert after["status"] == "completed", after

    asyncio.run(go())


def test_ask_with_a_file_attaches_it_and_a_bad_one_is_the_tools_error(hub):
    """`ask` with `files: [{name, mime_type, data}]`: the tab gets an attachment id and
    fetches the same bytes with its token; a path out of the files folder is refused."""
    tab = Tab(hub, "mcp-files")
    pdf = b"%PDF-1.4 from the MCP SDK"

    async def go():
        client, transport = http_session(hub)
        async with client:
            async with contextlib_stack() as stack:
                session = await open_session(stack, transport, "initialize")
                tools = {t.name: t for t in (await session.list_tools()).tools}
                assert "files" in tools["ask"].input_schema["properties"], tools["ask"].input_schema
                file = {"name": "brief.pdf", "mime_type": "application/pdf", "data": base64.b64encode(pdf).decode()}
                r = structured(
                    await session.call_tool(
                        "ask", {"target": "tab/mcp-files", "prompt": "read it", "files": [file], "wait_s": WAIT}
                    )
                )
                assert r["status"] == "completed" and r["text"] == "answer: read it", r
                bad = await session.call_tool(
                    "ask", {"target": "tab/mcp-files", "prompt": "x", "files": ["../token"]}
                )
                assert bad.is_error and "../token" in bad.content[0].text, bad

    asyncio.run(go())
    att, status, body = tab.files.get(timeout=WAIT)
    assert att["id"] and att["name"] == "brief.pdf" and att["mime"] == "application/pdf", att
    assert (status, body) == (200, pdf)
    assert tab.tasks.qsize() == 1, "the refused call sent nothing"


def test_agent_task_with_a_file_reaches_the_agents_first_message(hub):
    """`agent_task` with `files`: the agent's tab gets them on the session's first `deliver`
    and fetches the same bytes with its token while it holds it; the run's text is the
    agent's final answer."""
    png = b"\x89PNG\r\n\x1a\n from the MCP SDK to an agent"
    ws_url = hub.replace("http://", "ws://") + "/realtime"
    agent_ws = connect(ws_url).__enter__()
    agent_ws.send(json.dumps({"type": "hello", "token": TOKEN, "site": "sim", "label": "mcp-agent-tab"}))
    agent_id = json.loads(agent_ws.recv(timeout=WAIT))["client_id"]
    with connect(ws_url) as boss:
        boss.send(json.dumps({"type": "hello", "token": TOKEN, "site": "sim", "label": "mcp-agent-boss", "role": "master"}))
        boss.send(json.dumps({"type": "user_input", "text": "?<agent create sdk-looker on mcp-agent-tab>!"}))
        while (made := json.loads(boss.recv(timeout=WAIT)))["type"] != "cmd_result":
            pass
    assert made["result"]["success"], made
    seen = queue.Queue()

    def model():
        for msg in agent_ws:
            frame = json.loads(msg)
            if frame["type"] != "deliver":
                continue
            seen.put((frame, fetch_attachments(hub, TOKEN, agent_id, frame)))
            answer = "I looked at it ?<done a picture>!"
            agent_ws.send(json.dumps({"type": "chunk", "turn_id": "sdk-1", "seq": 0, "text": answer}))
            agent_ws.send(json.dumps({"type": "turn_end", "turn_id": "sdk-1", "text": answer}))
            return

    threading.Thread(target=model, daemon=True).start()

    async def go():
        client, transport = http_session(hub)
        async with client:
            async with contextlib_stack() as stack:
                session = await open_session(stack, transport, "initialize")
                file = {"name": "look.png", "mime_type": "image/png", "data": base64.b64encode(png).decode()}
                r = await session.call_tool(
                    "agent_task", {"agent": "sdk-looker", "task": "what is this?", "files": [file], "wait_s": WAIT}
                )
                return structured(r)

    r = asyncio.run(go())
    assert r["status"] == "completed" and r["text"] == "a picture", r
    frame, got = seen.get(timeout=WAIT)
    assert frame["agent"]["round"] == 0 and "what is this?" in frame["text"], frame
    [(att, status, body)] = got
    assert att["name"] == "look.png" and att["mime"] == "image/png", att
    assert (status, body) == (200, png)
