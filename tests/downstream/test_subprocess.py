"""Real processes and real transports: claimcheck over stdio, HTTP and SSE; downstreams over stdio, HTTP and SSE."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from server.config import parse_config
from server.downstream.pool import specs_from_config
from server.downstream.tool_call import call_tool
from server.proxy import Proxy
from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config
from tests.support.proxies import proxied_names, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

URL = r"(http://127\.0\.0\.1:\d+/\w+)"


def claimcheck(*args: str) -> list[str]:
    return [PYTHON, "-m", "server", *args]


def stdio_claimcheck(config: Path) -> StdioServerParameters:
    return StdioServerParameters(command=PYTHON, args=["-m", "server", "serve", "--config", str(config)])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_claimcheck_over_stdio_forwards_a_stdio_downstream(tmp_path: Path, mode: str) -> None:
    plain = {"async": False}  # pass-through: the 1 MiB result must cross both stdio hops whole
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": plain})
    reported: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(progress)

    with anyio.fail_after(60):
        async with Client(stdio_claimcheck(config), mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            echoed = await client.call_tool("demo__echo", {"text": "über 🚀"})
            slow = await client.call_tool("demo__slow", {"seconds": 1}, progress_callback=on_progress)
            big = await client.call_tool("demo__big", {"kb": 1024})
    assert {"demo__echo", "demo__slow", "demo__big", "demo__crash"} <= names
    assert text_of(echoed) == "über 🚀"
    assert text_of(slow) == "slept 1 s"
    assert sorted(reported) == [1, 2]
    assert len(text_of(big)) == 1024 * 1024


async def test_a_downstream_that_crashes_mid_call_gives_a_clear_error_and_the_next_call_works(tmp_path: Path) -> None:
    # asyncTimeoutSecs: the call after the crash waits for the restart, however slowly a loaded machine starts it
    settings = {"asyncTimeoutSecs": 120}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    with anyio.fail_after(240):
        async with Client(stdio_claimcheck(config), mode="legacy") as client:
            crashed = await client.call_tool("demo__crash", {})
            after = await client.call_tool("demo__echo", {"text": "alive"})
    assert crashed.is_error
    assert text_of(crashed) == (
        'Server "demo" failed on tool "crash": the server closed the connection '
        f"(`{PYTHON} -m server.demo.server` exited with status 3; it wrote nothing on stderr)"
    )
    assert not after.is_error
    assert text_of(after) == "alive"


async def test_a_respawned_stdio_server_is_a_new_process_and_stopping_the_proxy_ends_it() -> None:
    config = parse_config({"mcpServers": {"demo": demo_server_entry()}})
    starting = Proxy.start(config)
    with anyio.fail_after(60):
        async with starting as proxy:
            await proxy.pool.settled()
            (downstream,) = proxy.pool.downstreams
            assert downstream.process is not None and downstream.process.pid is not None
            first_pid = downstream.process.pid
            with pytest.raises(Exception, match="closed the connection"):
                await call_tool(downstream, "crash", {}, None)
            result = await call_tool(downstream, "echo", {"text": "again"}, None)
            second_pid = downstream.process.pid
    assert text_of(result) == "again"
    assert second_pid is not None and second_pid != first_pid
    assert not alive(first_pid)
    assert not alive(second_pid)


async def test_a_downstream_command_that_does_not_exist_leaves_the_other_servers_working(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {"mcpServers": {"ghost": {"command": "/no/such/mcp-server"}, "demo": demo_server_entry()}},
    )
    with anyio.fail_after(60):
        async with Client(stdio_claimcheck(config), mode="legacy") as client:
            names = proxied_names((await client.list_tools()).tools)
            result = await client.call_tool("demo__echo", {"text": "ok"})
            ghost = await client.call_tool("ghost__anything", {})
    assert names and all(name.startswith("demo__") for name in names)
    assert text_of(result) == "ok"
    assert ghost.is_error


def test_tools_command_prints_the_client_view_and_fails_when_a_server_cannot_start(tmp_path: Path) -> None:
    good = write_config(
        tmp_path, {"mcpServers": {"demo": demo_server_entry(), "off": {"command": "x", "disabled": True}}}
    )
    done = subprocess.run(claimcheck("tools", "--config", str(good)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "demo: ready, 6 tools" in done.stdout
    assert "off: disabled" in done.stdout
    assert "demo__slow\tSleep `seconds`, reporting progress about every half second." in done.stdout

    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = write_config(bad_dir, {"mcpServers": {"ghost": {"command": "/no/such/mcp-server"}}})
    done = subprocess.run(claimcheck("tools", "--config", str(bad)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "ghost: failed, 0 tools (command not found: /no/such/mcp-server)" in done.stdout


def test_a_malformed_config_stops_claimcheck_with_exit_2_and_the_key_path(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": {"command": "x", "argz": []}}})
    for command in ("tools", "serve"):
        done = subprocess.run(
            claimcheck(command, "--config", str(config)),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2
        assert "mcpServers.demo.argz: unknown key" in done.stderr


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_claimcheck_over_streamable_http_serves_both_protocol_eras(tmp_path: Path, mode: str) -> None:
    plain = {"async": False}  # pass-through: the 2 MiB result must cross HTTP whole
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": plain})
    command = claimcheck("serve", "--config", str(config), "--transport", "http", "--port", "0")
    with anyio.fail_after(60):
        async with (
            announced_url(command, URL) as url,
            Client(streamable_http_client(url, max_sse_event_size=None), mode=mode) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("demo__echo", {"text": "over http"})
            big = await client.call_tool("demo__big", {"kb": 2048})
    assert url.endswith("/mcp")
    assert "demo__echo" in names
    assert text_of(result) == "over http"
    assert len(text_of(big)) == 2048 * 1024


async def test_claimcheck_over_sse_serves_a_client(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    command = claimcheck("serve", "--config", str(config), "--transport", "sse", "--port", "0")
    with anyio.fail_after(60):
        async with announced_url(command, URL) as url, Client(sse_client(url), mode="legacy") as client:
            result = await client.call_tool("demo__echo", {"text": "over sse"})
    assert url.endswith("/sse")
    assert text_of(result) == "over sse"


@pytest.mark.parametrize(
    ("kind", "extra"),
    [("http", {}), ("sse", {"transport": "sse"}), pytest.param("sse", {}, id="sse-url-only")],
)
async def test_downstreams_over_http_and_sse_are_forwarded_with_large_results(kind: str, extra: dict[str, Any]) -> None:
    """Over streamable HTTP and SSE; a `url` with no `type` (as Cursor and Windsurf write an SSE server) that answers
    the POST of `initialize` with a 4xx is tried again at once over SSE."""
    command = [PYTHON, "-m", "server.demo.server", kind, "0"]
    with anyio.fail_after(60):
        async with announced_url(command, URL) as url:
            config = parse_config({"mcpServers": {"web": {"url": url, **extra}}})
            starting = Proxy.start(config)
            async with starting as proxy:
                await proxy.pool.settled()
                route = proxy.pool.route("web__big")
                assert route is not None
                result = await call_tool(route.downstream, "big", {"kb": 1536}, None)
                spooled = proxy.pool.spooled.claim(result)  # over 1 MiB: it went to a file as it arrived
                assert spooled is not None and spooled.path is not None
                stored = spooled.path.read_bytes()
    assert not spooled.is_error
    assert len(stored) == spooled.bytes == 1536 * 1024


async def test_a_url_that_answers_neither_transport_says_what_each_answered() -> None:
    command = [PYTHON, "-m", "server.demo.server", "sse", "0"]
    with anyio.fail_after(60):
        async with announced_url(command, URL) as url:
            wrong = url.removesuffix("/sse") + "/nothing"
            config = parse_config({"mcpServers": {"web": {"url": wrong}}})
            async with Proxy.start(config) as proxy:
                await proxy.pool.settled()
                status = next(d for d in proxy.pool.downstreams if d.name == "web").status()
    assert status["state"] == "failed"
    assert status["lastError"].startswith(f"{wrong}: ")
    assert (
        status["lastError"]
        == f"{wrong}: HTTP 404 Not Found over streamable HTTP and SSE (nothing serves MCP at this path)"
    )
    assert "\n" not in status["lastError"]


@pytest.mark.parametrize(("kind", "typed", "hint"), [("http", "sse", "streamable HTTP"), ("sse", "http", "SSE")])
async def test_a_url_whose_type_names_the_other_transport_says_how_to_ask_for_its_own(
    kind: str, typed: str, hint: str
) -> None:
    other = "http" if typed == "sse" else "sse"
    with anyio.fail_after(60):
        async with announced_url([PYTHON, "-m", "server.demo.server", kind, "0"], URL) as url:
            config = parse_config({"mcpServers": {"web": {"url": url, "type": typed}}})
            async with Proxy.start(config) as proxy:
                await proxy.pool.settled()
                status = next(d for d in proxy.pool.downstreams if d.name == "web").status()
    assert status["state"] == "failed"
    assert status["lastError"].endswith(f'(if it serves {hint}, its "type" is "{other}"; or leave "type" out)')
    assert "\n" not in status["lastError"]


def test_the_demo_runs_and_shows_forwarding_handles_errors_and_restart() -> None:
    done = subprocess.run(claimcheck("demo"), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tools/list -> 12 tools" in out
    assert "-> 'hello through claimcheck'" in out
    assert "progress: slow: step 1 of 8" in out
    assert re.search(r'Tool demo__slow is running in the background \(handle: "session-\w+/\w+"\)', out)
    assert re.search(r'\[claimcheck\] 1 running: demo__slow "session-\w+/\w+"', out)
    assert "demo__slow: ready after" in out and "  slept 4 s" in out
    assert "Tool output is too large (524288 bytes, 8192 lines, " in out
    assert "  00004000 INFO demo log line" in out
    assert "2 outputs in this session:" in out
    assert 'isError=True: Server "demo" failed on tool "crash"' in out
    assert "back again" in out.split("demo__echo after the crash", 1)[1]


async def test_a_bearer_token_guards_the_http_transport(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    command = claimcheck(
        "serve", "--config", str(config), "--transport", "http", "--port", "0", "--auth-token-env", "CC_TEST_TOKEN"
    )
    monkeypatch.setenv("CC_TEST_TOKEN", "s3cret-token")
    with anyio.fail_after(60):
        async with announced_url(command, URL) as url:
            async with httpx2.AsyncClient() as http:
                without = await http.post(url, json={})
                wrong = await http.post(url, json={}, headers={"Authorization": "Bearer nope"})
            headers = {"Authorization": "Bearer s3cret-token"}
            async with httpx2.AsyncClient(headers=headers) as authed:
                async with Client(streamable_http_client(url, http_client=authed), mode="legacy") as client:
                    result = await client.call_tool("demo__echo", {"text": "let in"})
    assert without.status_code == 401 and without.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401
    assert text_of(result) == "let in"


def test_an_auth_token_variable_that_is_not_set_stops_claimcheck(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {}})
    done = subprocess.run(
        claimcheck("serve", "--config", str(config), "--transport", "http", "--auth-token-env", "CC_UNSET_VAR_X"),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "CC_UNSET_VAR_X, which is not set" in done.stderr


async def test_a_server_that_keeps_crashing_is_not_restarted_at_once_and_the_error_says_so(tmp_path: Path) -> None:
    settings = {"asyncTimeoutSecs": 120}  # each crash call waits for the restart before it, however slow
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    with anyio.fail_after(240):
        async with Client(stdio_claimcheck(config), mode="legacy") as client:
            crashes = [await client.call_tool("demo__crash", {}) for _ in range(3)]
            refused = await client.call_tool("demo__echo", {"text": "too soon"})
    assert all(result.is_error for result in crashes)
    assert refused.is_error
    assert 'Server "demo" failed on tool "echo": the server keeps crashing (3 times in the last 60 s' in text_of(
        refused
    )
    assert "claimcheck starts it again in" in text_of(refused)


async def test_http_clients_cannot_reach_each_others_handles_and_foreign_hosts_are_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": {"asyncTokenThreshold": 500}}
    )
    command = claimcheck("serve", "--config", str(config), "--transport", "http", "--port", "0")
    with anyio.fail_after(60):
        async with announced_url(command, URL) as url:
            async with Client(url, mode="legacy") as alice, Client(url, mode="legacy") as bob:
                big = text_of(await alice.call_tool("demo__big", {"kb": 8}))
                handle = re.search(r'handle = "([^"]+)"', big)
                assert handle, big
                stolen = await bob.call_tool("tool_output", {"handle": handle.group(1), "mode": "truncate"})
                read = await bob.call_tool("Read", {"file": handle.group(1)})
                own = await alice.call_tool("tool_output", {"handle": handle.group(1), "mode": "truncate"})
            async with httpx2.AsyncClient() as http:
                rebound = await http.post(url, json={}, headers={"Host": "attacker.example"})
    assert stolen.is_error and "Unknown handle" in text_of(stolen)
    assert read.is_error and "Unknown file" in text_of(read)
    assert not own.is_error
    assert rebound.status_code == 421


def _modern_client(url: str, name: str, session: str | None = None) -> Client:
    """A 2026-07-28 client over HTTP: no handshake, no Mcp-Session-Id."""
    headers = {} if session is None else {"Claimcheck-Session": session}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    transport = streamable_http_client(url, http_client=http)
    return Client(transport, mode="auto", client_info=Implementation(name=name, version="1"))


async def test_2026_clients_over_http_are_kept_apart_by_client_name_and_claimcheck_session_header(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": {"asyncTokenThreshold": 500}}
    )
    command = claimcheck("serve", "--config", str(config), "--transport", "http", "--port", "0")
    with anyio.fail_after(60):
        async with announced_url(command, URL) as url:
            async with (
                _modern_client(url, "alice") as alice,
                _modern_client(url, "bob") as bob,
                _modern_client(url, "bob", session="second window") as bob_two,
                _modern_client(url, "alice") as alice_again,
            ):
                assert alice.protocol_version == "2026-07-28"
                big = text_of(await alice.call_tool("demo__big", {"kb": 8}))
                handle = re.search(r'handle = "([^"]+)"', big)
                assert handle, big
                stolen = await bob.call_tool("tool_output", {"handle": handle.group(1), "mode": "truncate"})
                other_window = await bob_two.call_tool("Read", {"file": handle.group(1)})
                listed_by_bob = text_of(await bob.call_tool("list_tool_outputs", {}))
                same_client = await alice_again.call_tool(
                    "tool_output", {"handle": handle.group(1), "mode": "truncate"}
                )
    assert stolen.is_error and "Unknown handle" in text_of(stolen)
    assert other_window.is_error and "Unknown file" in text_of(other_window)
    assert handle.group(1) not in listed_by_bob
    assert not same_client.is_error  # the same client name, token and header: the same session (no way to tell)


def _python_entry(code: str) -> dict[str, Any]:
    return {"command": PYTHON, "args": ["-c", code]}


async def test_a_banner_printed_to_stdout_before_the_protocol_does_not_break_the_server() -> None:
    noisy = "print('Welcome to the noisy server!', flush=True); from server.demo.server import main; main([])"
    config = parse_config({"mcpServers": {"noisy": _python_entry(noisy)}})
    starting = Proxy.start(config)
    with anyio.fail_after(60):
        async with starting as proxy:
            await proxy.pool.settled()
            (downstream,) = proxy.pool.downstreams
            result = await call_tool(downstream, "echo", {"text": "heard through the noise"}, None)
    assert downstream.state == "ready"
    assert text_of(result) == "heard through the noise"


_GARBAGE_SERVER = """
import os
from server.demo.server import build_demo_server
WIRE = os.dup(1)  # the SDK moves print() off the protocol's stdout; a server in another language would not
demo = build_demo_server()

@demo.tool(structured_output=False)
def noise() -> str:
    stray, bad = b'{"jsonrpc": "2.0", "id": 987654, "result": {}}', b'{"jsonrpc": "2.0", "method": 42}'
    for line in (b"not json at all", b'{"half": ', b"\\xff\\xfe binary", stray, bad, b"[]"):
        os.write(WIRE, line + b"\\n")  # the protocol's own stdout, in the middle of a call
    return "said my piece"

demo.run("stdio")
"""


async def test_garbage_written_to_stdout_in_the_middle_of_a_session_is_skipped_and_calls_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = parse_config({"mcpServers": {"noisy": _python_entry(_GARBAGE_SERVER), "demo": demo_server_entry()}})
    starting = Proxy.start(config)
    with anyio.fail_after(60):
        async with starting as proxy:
            await proxy.pool.settled()
            noisy, demo = proxy.pool.downstreams
            before = await call_tool(noisy, "echo", {"text": "before"}, None)
            during = await call_tool(noisy, "noise", {}, None)
            after = await call_tool(noisy, "echo", {"text": "after"}, None)
            elsewhere = await call_tool(demo, "echo", {"text": "unaffected"}, None)
    assert [text_of(before), text_of(during), text_of(after)] == ["before", "said my piece", "after"]
    assert not during.is_error and noisy.state == "ready"
    assert text_of(elsewhere) == "unaffected"
    skipped = [r.getMessage() for r in caplog.records if "wrote a line that is not JSON-RPC" in r.getMessage()]
    assert len(skipped) == 5, skipped  # all but the stray response, which is valid JSON-RPC with an unknown id


async def test_a_server_slower_than_the_connect_timeout_is_left_out_with_the_reason() -> None:
    # Readiness, not the clock, decides: the sleepy server never answers, so it meets its 1 s timeout however
    # loaded the machine is, and the demo server has 120 s to start.
    sleepy = "import time; time.sleep(3600)"
    config = parse_config({"mcpServers": {"sleepy": _python_entry(sleepy), "demo": demo_server_entry()}})
    specs = [replace(s, connect_timeout=1.0) if s.name == "sleepy" else s for s in specs_from_config(config)]
    starting = Proxy.start(config, specs=specs, connect_timeout=120)
    with anyio.fail_after(240):
        async with starting as proxy:
            await proxy.pool.settled()
            sleepy_server, demo = proxy.pool.downstreams
            tools = [tool.name for tool in proxy.pool.tools()]
    # it failed once at least; by now it may be in its next try (1 s later), which keeps the reason
    assert sleepy_server.state in ("failed", "starting") and sleepy_server.backoff.failed_starts >= 1
    assert sleepy_server.last_error == "no answer to initialize and tools/list within 1 s"
    assert demo.state == "ready" and "demo__echo" in tools
    assert not any(name.startswith("sleepy__") for name in tools)


async def test_an_http_client_that_leaves_has_its_running_calls_cancelled_and_its_directory_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAIMCHECK_API_ENABLED", "true")
    monkeypatch.setenv("CLAIMCHECK_API_PORT", "0")
    root, state = tmp_path / "outputs", tmp_path / "state"
    settings = {"root": str(root), "stateDir": str(state)}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    command = claimcheck("serve", "--config", str(config), "--transport", "http", "--port", "0")
    with anyio.fail_after(90):
        both = r"status API at[\s\S]*(http://127\.0\.0\.1:\d+/mcp)"  # the proxy (and its API) starts first
        async with announced_url(command, both) as url:
            (discovery,) = (state / "instances").glob("*.json")
            info = json.loads(discovery.read_text(encoding="utf-8"))
            token = {"Authorization": f"Bearer {info['token']}"}  # the status API needs its token
            async with (
                httpx2.AsyncClient(base_url=info["url"], timeout=60, headers=token) as http,
                http.stream("GET", "v1/events") as events,
            ):
                lines = events.aiter_lines()
                async with Client(url, mode="legacy") as client:
                    first = text_of(await client.call_tool("demo__slow", {"seconds": 30, "background": True}))
                    handle = re.search(r'handle: "(session-\w+)/(\w+)"', first)
                    assert handle, first
                    (session_dir,) = root.glob(f"claimcheck-run-*/{handle.group(1)}")
                # the client has left: its HTTP session ends, and with it the call
                cancelled = None
                async for line in lines:
                    if line.startswith("data: ") and '"status": "cancelled"' in line:
                        cancelled = json.loads(line.removeprefix("data: "))
                        break
    assert cancelled is not None and cancelled["handle"] == f"{handle.group(1)}/{handle.group(2)}"
    assert not session_dir.exists()


async def test_an_http_client_whose_stream_drops_mid_call_resumes_it_with_last_event_id(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    command = claimcheck("serve", "--config", str(config), "--transport", "http", "--port", "0")
    version = "2025-11-25"
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    hello = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    call = {"name": "demo__slow", "arguments": {"seconds": 1}}
    with anyio.fail_after(60):
        async with announced_url(command, URL) as url, httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(
                url, headers=base, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
            )
            session = {**base, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version}
            await http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
            async with http.stream("POST", url, headers=session, json=request) as stream:
                first_id = None
                async for line in stream.aiter_lines():  # the priming event comes first
                    if line.startswith("id:"):
                        first_id = line.removeprefix("id:").strip()
                        break
            assert first_id, "no event id: the stream cannot be resumed"
            resumed: list[dict[str, Any]] = []
            replay = {**session, "Accept": "text/event-stream", "Last-Event-ID": first_id}
            async with http.stream("GET", url, headers=replay) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and line.removeprefix("data:").strip():
                        resumed.append(json.loads(line.removeprefix("data:")))
                        if resumed[-1].get("id") == 2:
                            break
    result = resumed[-1]["result"]
    assert [item["text"] for item in result["content"]] == ["slept 1 s"]
