"""A down server speaks: a call to one of its tools names the server and why it is down (the command, its exit
status and the last lines of its stderr, or the URL and the connection error), and a server that crashed keeps
its tools listed while claimcheck tries to bring it back."""

from __future__ import annotations

import socket
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from server.config import parse_config
from server.downstream.roots_applied import RootsInPlace
from server.downstream.stdio import StderrTail, StdioProcess
from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support.processes import PYTHON, demo_server_entry, program_entry
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio]

FAILING = """
import sys
print("starting the failing server", file=sys.stderr)
print("error: FAKE_API_KEY is not set", file=sys.stderr)
sys.exit(1)
"""


FAILS_THEN_HANGS = """
import pathlib, sys, time
marker = pathlib.Path(sys.argv[1])
if not marker.exists():
    marker.write_text("tried")
    print("error: the first start fails", file=sys.stderr)
    sys.exit(1)
time.sleep(600)  # the second start never answers initialize
"""


def _script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _proxy(servers: dict[str, Any]) -> AbstractAsyncContextManager[Proxy]:
    # Generous waits: a call waits for a restart, and a loaded machine starts servers slowly.
    settings = {"startupWaitSecs": 120, "asyncTimeoutSecs": 120}
    config = parse_config({"mcpServers": servers, "settings": settings})
    return Proxy.start(config, connect_timeout=120)


@pytest.mark.subprocess
async def test_a_call_to_a_server_whose_command_exits_1_names_the_exit_status_and_its_stderr(tmp_path: Path) -> None:
    failing = _script(tmp_path, "failing.py", FAILING)
    starting = _proxy({"broken": {"command": PYTHON, "args": [failing]}, "demo": demo_server_entry()})
    with anyio.fail_after(120):
        async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
            await proxy.pool.settled()
            names = [tool.name for tool in (await client.list_tools()).tools]
            answer = await client.call_tool("broken__anything", {})
            state = proxy.server_states()[0]
    text = text_of(answer)
    assert answer.is_error
    assert 'server "broken" is down: it could not start' in text
    assert f"`{PYTHON} {failing}` exited with status 1" in text
    assert "error: FAKE_API_KEY is not set" in text and "starting the failing server" in text
    assert "Connection closed" not in text
    # its next start comes on its own 1 s after the failure: the call may meet the wait or that start under way
    assert "claimcheck tries again in" in text or text.endswith(
        "; claimcheck is starting it again now. Its tools are announced with a list change when it starts."
    )
    assert "demo__echo" in names and not any(name.startswith("broken__") for name in names)
    assert state["state"] in ("failed", "starting")  # the wait before its next start, or that start
    assert (
        "exited with status 1; its stderr ends: starting the failing server | error: FAKE_API_KEY is not set"
        in (state["lastError"])
    )


@pytest.mark.subprocess
async def test_a_crashed_server_keeps_its_tools_listed_and_a_restart_that_fails_says_why(tmp_path: Path) -> None:
    flag = tmp_path / "crashed.flag"
    starting = _proxy({"flaky": program_entry("crashes_then_fails", str(flag))})
    with anyio.fail_after(120):
        async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
            before = sorted(tool.name for tool in (await client.list_tools()).tools if tool.name.startswith("flaky"))
            crashed = await client.call_tool("flaky__crash", {})
            after_crash = proxy.server_states()[0]
            listed = sorted(tool.name for tool in (await client.list_tools()).tools if tool.name.startswith("flaky"))
            again = await client.call_tool("flaky__hello", {})
            still = sorted(tool.name for tool in (await client.list_tools()).tools if tool.name.startswith("flaky"))
    assert before == ["flaky__crash", "flaky__hello"]
    assert crashed.is_error and 'Server "flaky" failed on tool "crash": the server closed the connection' in (
        text_of(crashed)
    )
    assert "exited with status 3; its stderr ends: dying now" in text_of(crashed)
    assert "exited with status 3; its stderr ends: dying now" in after_crash["lastError"]
    assert listed == before and still == before  # down, not gone
    text = text_of(again)
    assert again.is_error
    assert 'Server "flaky" failed on tool "hello": the server could not restart' in text
    assert "exited with status 1; its stderr ends: fatal: the database moved away" in text


async def test_an_http_server_on_a_closed_port_is_named_by_its_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    starting = _proxy({"web": {"url": url}})
    with anyio.fail_after(120):
        async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
            await proxy.pool.settled()
            answer = await client.call_tool("web__search", {})
            state = proxy.server_states()[0]
    assert answer.is_error
    assert 'server "web" is down: it could not start' in text_of(answer)
    assert url in text_of(answer) and "Connection closed" not in text_of(answer)
    assert state["lastError"].startswith(f"{url}: ")


def test_the_stderr_tail_keeps_the_last_lines_whole_and_bounded() -> None:
    tail = StderrTail()
    tail.feed(b"one\ntwo\n" + b"x" * 100_000 + b"\nthr")
    tail.feed(b"ee\n\n\nfour\nfive\nsix\nseven")
    lines = tail.lines()
    assert lines == ["three", "four", "five", "six", "seven"]
    tail.feed(b"y" * 1_000_000)
    assert len(tail.lines()) == 5 and all(len(line) <= 301 for line in tail.lines())


async def test_line_after_waits_for_a_line_ended_past_the_mark() -> None:
    tail = StderrTail()
    tail.feed(b"started\n")
    mark = tail.written
    woke: list[int] = []

    async def wait() -> None:
        await tail.line_after(mark)
        woke.append(tail.written)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            tail.feed(b"\n  \nUpdated allowed")  # blank lines and an unfinished one are not a line
            await anyio.wait_all_tasks_blocked()
            assert woke == []
            tail.feed(b" directories\n")
    assert woke == [2]
    await tail.line_after(0)  # a line already past the mark: no wait


async def test_a_call_waits_while_a_roots_question_is_expected_or_answered_then_for_its_ping() -> None:
    pings: list[str] = []

    class Server:
        name, connect_timeout = "fs", 5.0
        process: StdioProcess | None = None

        async def connected(self) -> Any:
            class Pinged:
                async def send_ping(self) -> None:
                    pings.append("ping")

            return Pinged()

    roots = RootsInPlace()
    done: list[bool] = []

    async def call() -> None:
        await roots.wait(Server())
        done.append(True)

    with anyio.fail_after(5):
        assert roots.settled
        roots.expect(anyio.current_time() + 5)
        assert not roots.settled
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            roots.asked()
            await anyio.wait_all_tasks_blocked()
            assert done == [] and not roots.settled  # expected, then being answered: the call waits
            roots.answered(0)
        assert done == [True] and pings == ["ping"] and roots.settled
        await roots.wait(Server())  # nothing new answered: no second ping
    assert pings == ["ping"]


@pytest.mark.subprocess
async def test_a_call_while_a_server_that_could_not_start_is_started_again_says_it_is_down_and_being_started(
    tmp_path: Path,
) -> None:
    """A server that never came up is started again on its own (1 s after its first failure): a call made while
    that start is under way hears why it is down and that it is being started now, not "not ready yet"."""
    script = _script(tmp_path, "fails_then_hangs.py", FAILS_THEN_HANGS)
    starting = _proxy({"flaky": {"command": PYTHON, "args": [script, str(tmp_path / "tried")]}})
    with anyio.fail_after(120):
        async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
            await proxy.pool.settled()
            (flaky,) = proxy.pool.downstreams
            while not (flaky.state == "starting" and flaky.backoff.failed_starts == 1):
                await flaky.state_changed()
            answer = await client.call_tool("flaky__anything", {})
    text = text_of(answer)
    assert answer.is_error
    assert text.startswith('Unknown tool "flaky__anything": server "flaky" is down: it could not start (')
    assert "error: the first start fails" in text
    assert text.endswith(
        "; claimcheck is starting it again now. Its tools are announced with a list change when it starts."
    )
