"""claimcheck behind claimcheck behaves like one claimcheck: one set of handle tools, one handle per call.

The outer claimcheck runs in this process; the inner is a real `claimcheck serve` process (stdio, or
streamable HTTP) in front of the demo server. The outer sends a pass-through call as bytes, and the inner answers
it on its fast path as its SDK path would; those tests speak to the inner by hand, as the outer does.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from server.config import parse_config
from server.downstream.chain import CAPABILITY, OWN, PASSTHROUGH, PROXIED
from server.downstream.rawchannel import RawChannel
from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support.passthrough_cases import CALLS, CUT_MIB, Shape, check_shapes, shape
from tests.support.processes import PYTHON, announced_url, demo_server_entry, program_entry, write_config
from tests.support.proxies import OWN_TOOLS, text_of
from tests.support.wire import MIB, Wire, serving

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

HANDLE = re.compile(r'handle = "(session-[0-9a-f]{32}/[0-9a-f]{32})"')
INNER_SETTINGS = {
    "api": {"enabled": False},
    "asyncTimeoutSecs": 0.5,
    "asyncTokenThreshold": 2000,
    "startupWaitSecs": 60,
}
RAW = program_entry("raw_downstream")
META_ECHO = program_entry("meta_echo_downstream")


@asynccontextmanager
async def inner_entry(tmp_path: Path, kind: str) -> AsyncIterator[dict[str, Any]]:
    """The config entry of an inner claimcheck in front of the demo server, whose own rules are strict
    (0.5 s, 2000 tokens), so any double handling would show."""
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": INNER_SETTINGS})
    serve = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(config)]
    if kind == "stdio":
        yield {"command": serve[0], "args": serve[1:]}
        return
    async with announced_url([*serve, "--transport", "http", "--port", "0"], r"(http://127\.0\.0\.1:\d+/mcp)") as url:
        yield {"url": url}


@asynccontextmanager
async def outer_client(entry: dict[str, Any]) -> AsyncIterator[Client]:
    # The outer time rule is far beyond what a 2 MB answer takes on a loaded machine; the slow call goes to the
    # background by its `background` argument, and the inner claimcheck's 0.5 s rule must not apply to it either.
    settings = {"api": {"enabled": False}, "asyncTimeoutSecs": 120, "asyncTokenThreshold": 10000}
    starting = Proxy.start(parse_config({"mcpServers": {"inner": entry}, "settings": settings}))
    async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
        await proxy.pool.settled()  # the inner claimcheck is up (its start is not what is tested here)
        yield client


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_a_chain_of_two_claimchecks_shows_one_set_of_handle_tools_and_makes_one_handle_per_call(
    tmp_path: Path, kind: str
) -> None:
    with anyio.fail_after(90):
        async with inner_entry(tmp_path, kind) as entry, outer_client(entry) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            big = await client.call_tool("inner__demo__big", {"kb": 2048})
            big_handle = HANDLE.search(text_of(big))
            assert big_handle is not None, text_of(big)
            tail = await client.call_tool(
                "tool_output",
                {"handle": big_handle.group(1), "mode": "slice", "slice": {"start": 2097000, "length": 152}},
            )
            grep = await client.call_tool("Grep", {"file": big_handle.group(1), "regex": "^00032767 "})
            slow = await client.call_tool("inner__demo__slow", {"seconds": 3, "background": True})
            slow_handle = HANDLE.search(text_of(slow))
            assert slow_handle is not None, text_of(slow)
            waited = await client.call_tool(
                "wait_for_tool_output", {"handles": [slow_handle.group(1)], "timeout_secs": 30}
            )
            background = await client.call_tool("inner__demo__echo", {"text": "later", "background": True})

    assert OWN_TOOLS <= set(tools)
    assert not [name for name in tools if name.startswith("inner__") and name.removeprefix("inner__") in OWN_TOOLS]
    assert {"inner__demo__big", "inner__demo__slow", "inner__demo__echo"} <= set(tools)
    assert all(OWN not in (tools[name].meta or {}) for name in tools if name.startswith("inner__"))
    assert tools["inner__demo__echo"].meta is not None and PROXIED in tools["inner__demo__echo"].meta
    assert text_of(big).startswith(f"Tool output is too large ({2048 * 1024} bytes, 32768 lines, ")
    last_line = "00032767 INFO demo log line with some words in it".ljust(63, ".") + "\n"
    assert "[characters 2097000-2097152 of 2097152]\n" in text_of(tail)
    assert text_of(tail).split("\n[claimcheck]")[0].endswith(last_line)
    assert "→" in text_of(grep) and "00032767 INFO demo log line" in text_of(grep)
    assert text_of(slow).startswith("Tool inner__demo__slow is running in the background")
    assert "slept 3 s" in text_of(waited) and "running in the background" not in text_of(waited)
    assert text_of(background).startswith("Tool inner__demo__echo is running in the background")


async def test_a_claimcheck_declares_itself_and_marks_its_tools(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": INNER_SETTINGS})
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=PYTHON, args=["-m", "server", "serve", "--no-api", "--config", str(config)])
    with anyio.fail_after(60):
        async with Client(stdio_client(params), mode="legacy") as client:
            capabilities = client.server_capabilities
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            small = await client.call_tool("demo__big", {"kb": 512})
    assert capabilities.experimental is not None and CAPABILITY in capabilities.experimental
    assert all((tools[name].meta or {}).get(OWN) is True for name in OWN_TOOLS)
    assert (tools["demo__echo"].meta or {}).get(PROXIED) == {"background": "background"}
    # A client that is not claimcheck gets handles (too large, or, on a slow machine, handed off at 0.5 s).
    assert 'tool_output(handle = "session-' in text_of(small) and len(text_of(small)) < 2000


async def test_the_outer_claimcheck_sends_a_pass_through_call_as_bytes_with_the_mark_and_a_progress_token() -> None:
    """A raw call's progress token is its request id, from the raw channel's range (the SDK client counts from 0)."""
    marks: dict[bool, dict[str, Any]] = {}
    with anyio.fail_after(60):
        for fast in (True, False):
            settings = {"api": {"enabled": False}, "fastPath": fast}
            starting = Proxy.start(parse_config({"mcpServers": {"inner": META_ECHO}, "settings": settings}))
            async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
                await proxy.pool.settled()
                marks[fast] = json.loads(text_of(await client.call_tool("inner__meta", {})))
    assert marks[True][PASSTHROUGH] is True and marks[True]["progressToken"] > RawChannel.BASE
    assert marks[False][PASSTHROUGH] is True and marks[False]["progressToken"] < RawChannel.BASE


@asynccontextmanager
async def inner_wire(tmp_path: Path, fast: str) -> AsyncIterator[Wire]:
    """An inner claimcheck (its fast path `fast`) in front of the raw and demo servers, spoken to by hand; its own
    rules are strict (0.5 s, 2000 tokens) and its outputs are cut at 24 MiB."""
    directory = tmp_path / fast
    directory.mkdir()
    settings = {**INNER_SETTINGS, "maxOutputBytes": CUT_MIB * MIB}
    async with serving(directory, fast, settings, {"raw": RAW, "demo": demo_server_entry()}) as wire:
        yield wire


async def pass_through(
    wire: Wire, tool: str, arguments: dict[str, Any], token: int | str = 7
) -> tuple[bytes, list[dict[str, Any]]]:
    """Call `tool` as the outer claimcheck does: the answer's line as written, and the notifications before it."""
    meta = {"progressToken": token, PASSTHROUGH: True}
    ident = await wire.send("tools/call", {"name": tool, "arguments": arguments, "_meta": meta})
    notes: list[dict[str, Any]] = []
    while True:
        line = await wire.read_line()
        message = json.loads(line)
        if "method" not in message:
            assert message["id"] == ident, message
            return line, notes
        notes.append(message)


async def test_a_pass_through_call_is_answered_on_the_inner_fast_path_with_the_result_as_the_server_gave_it(
    tmp_path: Path,
) -> None:
    """The fast path writes a plain result as it came (raw_downstream writes no `isError`); the SDK's path
    serializes the model (with `isError: false`)."""
    text = 'plain, "quoted", é 中 \\ \n'  # no character the client escapes as a surrogate pair: the SDK reads those
    answers: dict[str, tuple[bytes, list[dict[str, Any]]]] = {}
    with anyio.fail_after(120):
        for fast in ("on", "off"):
            async with inner_wire(tmp_path, fast) as wire:
                line, _ = await pass_through(wire, "raw__echo", {"text": text})
                slow = await pass_through(wire, "demo__slow", {"seconds": 1}, token="outer-42")
                answers[fast] = line, slow[1]
    content = [{"type": "text", "text": text}]
    expected = {"jsonrpc": "2.0", "id": json.loads(answers["on"][0])["id"], "result": {"content": content}}
    assert answers["on"][0] == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
    assert json.loads(answers["off"][0])["result"] == {"content": content, "isError": False}
    progress = [note["params"] for note in answers["on"][1] if note["method"] == "notifications/progress"]
    assert progress == [note["params"] for note in answers["off"][1] if note["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [("outer-42", n, 2) for n in (1, 2)]


async def test_pass_through_answers_on_the_inner_fast_path_equal_those_of_its_sdk_path(tmp_path: Path) -> None:
    shapes: dict[str, list[Shape]] = {}
    with anyio.fail_after(180):
        for fast in ("on", "off"):
            async with inner_wire(tmp_path, fast) as wire:
                shapes[fast] = [shape((await pass_through(wire, name, args))[0]) for name, args in CALLS]
    assert shapes["on"] == shapes["off"]
    check_shapes(shapes["on"])


async def test_a_cancelled_pass_through_call_on_the_inner_fast_path_is_never_answered(tmp_path: Path) -> None:
    """`pass_through` fails on an answer to any other request: the cancelled call's would come before `later`'s."""
    with anyio.fail_after(120):
        async with inner_wire(tmp_path, "on") as wire:
            slow = {"name": "demo__slow", "arguments": {"seconds": 2}, "_meta": {"progressToken": 1, PASSTHROUGH: True}}
            cancelled = await wire.send("tools/call", slow)
            await wire.send("notifications/cancelled", {"requestId": cancelled}, notify=True)
            later, _ = await pass_through(wire, "demo__slow", {"seconds": 3})
            echo, _ = await pass_through(wire, "raw__echo", {"text": "after"})
    assert json.loads(later)["result"]["content"][0]["text"] == "slept 3 s"
    assert json.loads(echo)["result"]["content"] == [{"type": "text", "text": "after"}]


async def test_calls_that_start_no_call_record_count_in_the_principals_share_of_running_calls(tmp_path: Path) -> None:
    """A pass-through and a plain call to a server whose rules are off start no `Call`, but run in the downstream
    all the same: with two of them running, a principal at `"calls": 2` is refused a third of any kind, naming
    the setting; once they are answered, its calls are served again. On either path."""
    servers = {"raw": RAW, "demo": demo_server_entry(), "plain": {**demo_server_entry(), "async": False}}
    settings = {**INNER_SETTINGS, "limits": {"calls": 2}}
    answers: dict[str, list[dict[str, Any]]] = {}
    with anyio.fail_after(120):
        for fast in ("on", "off"):
            directory = tmp_path / fast
            directory.mkdir()
            async with serving(directory, fast, settings, servers) as wire:
                rules_off = await wire.send("tools/call", {"name": "plain__slow", "arguments": {"seconds": 2}})
                meta = {"progressToken": "outer", PASSTHROUGH: True}
                passed = {"name": "demo__slow", "arguments": {"seconds": 2}, "_meta": meta}
                through = await wire.send("tools/call", passed)
                note = await wire.read()  # both run now: the later one's first progress comes after 0.5 s
                assert note["method"] == "notifications/progress" and note["params"]["progressToken"] == "outer"
                refused = [
                    await wire.call("raw__echo", {"text": "ruled"}),
                    await wire.call("plain__echo", {"text": "rules off"}),
                    await wire.answer(await wire.send("tools/call", {**passed, "arguments": {"seconds": 0}})),
                ]
                finished = [await wire.answer(rules_off), await wire.answer(through)]
                served = await wire.call("raw__echo", {"text": "again"})
                answers[fast] = [*refused, *finished, served]
    for fast, (*refused, first, second, served) in answers.items():
        for answer in refused:
            assert answer["result"]["isError"] is True, (fast, answer)
            text = answer["result"]["content"][0]["text"]
            assert text.startswith('This principal has 2 calls running, at most 2 ("limits.calls")'), (fast, text)
        assert [a["result"]["content"][0]["text"] for a in (first, second)] == ["slept 2 s"] * 2, fast
        assert served["result"]["content"] == [{"type": "text", "text": "again"}], (fast, served)
