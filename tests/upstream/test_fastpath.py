"""The fast path answers as the SDK's path does: the same calls through two real claimcheck processes,
one with the fast path forced on and one with it forced off, give the same results, to a client of either era
(a 2026-07-28 client's answers byte for byte, an answer that carries the status footer, and calls to a server
whose rules are off, passed through with the footer); every log
message of a call reaches the client; a cancelled call is not answered and the next call gets its own answer;
a call handed out under the time rule is marked so in the status API on both paths.
The fast path's DEBUG line on stderr tells which calls it took."""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.support.handles import FOOTER_AGE
from tests.support.processes import PYTHON, demo_server_entry, write_config
from tests.support.proxies import text_of
from tests.support.wire import Wire

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

CALL_S = 120


@asynccontextmanager
async def claimcheck(config: Path, fast: str, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    serve = ["-m", "server", "serve", "--no-api", "--config", str(config)]
    params = StdioServerParameters(command=sys.executable, args=serve, env={"CLAIMCHECK_FAST_PATH": fast})
    async with Client(params, mode=mode, **options) as client:
        await client.list_tools()
        yield client


def _shape(result: types.CallToolResult) -> tuple[bool, list[str]]:
    return result.is_error, [item.text if isinstance(item, types.TextContent) else item.type for item in result.content]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_through_the_fast_path_answer_as_through_the_sdk_path(tmp_path: Path, mode: str) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    calls: list[tuple[str, dict[str, Any]]] = [
        ("demo__echo", {"text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}),
        ("demo__echo", {"text": ""}),
        ("demo__big", {"kb": 4}),
        ("demo__fail", {"message": "it failed"}),
        ("demo__echo", {}),  # a missing argument: the server's own error
        ("demo__nope", {}),  # an unknown tool: claimcheck's error
    ]
    results: dict[str, list[tuple[bool, list[str]]]] = {}
    with anyio.fail_after(CALL_S):
        for fast in ("on", "off"):
            async with claimcheck(config, fast, mode) as client:
                results[fast] = [_shape(await client.call_tool(name, args)) for name, args in calls]
    assert results["on"] == results["off"]
    assert results["on"][0] == (False, ['plain, "quoted", é 中 \U0001f600 \\ \n'])
    assert results["on"][3][0] is True and "it failed" in results["on"][3][1][0]


async def test_every_log_message_of_a_call_reaches_the_client(tmp_path: Path) -> None:
    """The server writes its log message just before its answer; claimcheck relays a log message only while
    the call is in flight, so one relayed after the answer overtook it would be lost."""
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    seen: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.append(str(params.data))

    with anyio.fail_after(CALL_S):
        async with claimcheck(config, "on", logging_callback=on_log) as client:
            for number in range(5):
                result = await client.call_tool("demo__log", {"message": f"note {number}"})
                assert text_of(result) == f"logged note {number}"
            await client.call_tool("demo__echo", {"text": "last"})  # whatever the client still had to read
    assert [number for number in range(5) if not any(f"note {number}" in line for line in seen)] == [], seen


async def test_a_cancelled_call_is_not_answered_and_the_next_call_gets_its_own_answer(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    with anyio.fail_after(CALL_S):
        async with claimcheck(config, "on") as client:
            with anyio.move_on_after(0.5):  # the client cancels its request (notifications/cancelled)
                await client.call_tool("demo__slow", {"seconds": 3})
                pytest.fail("the slow call should not have been answered")
            for number in range(3):
                result = await client.call_tool("demo__echo", {"text": f"after {number}"})
                assert text_of(result) == f"after {number}"
            listing = text_of(await client.call_tool("list_tool_outputs", {}))
            assert "running" not in listing.lower() or "demo__slow" not in listing


_TAKEN = re.compile(r"the stdio fast path takes call (\S+)")
HANDLE = re.compile(r"session-[0-9a-f]+/[0-9a-f]+")
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "stdio-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
}


@asynccontextmanager
async def logged(
    tmp_path: Path, fast: str, settings: dict[str, Any] | None = None, *, api: bool = False
) -> AsyncIterator[tuple[Wire, Path]]:
    """A claimcheck over stdio (fast path `fast`) spoken to by hand, its DEBUG log in the file it yields; `api`:
    with its status API (on a port the OS picks)."""
    directory = tmp_path / fast
    directory.mkdir()
    config = write_config(directory, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings or {}})
    log = directory / "stderr.log"
    env = {**os.environ, "CLAIMCHECK_FAST_PATH": fast, "CLAIMCHECK_LOG": "debug"}
    if api:
        env |= {"CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
    with log.open("wb") as stderr:
        command = [PYTHON, "-m", "server", "serve", *([] if api else ["--no-api"]), "--config", str(config)]
        async with await anyio.open_process(command, stderr=stderr, env=env) as process:
            try:
                yield Wire(process), log
            finally:
                process.kill()


def taken(log: Path) -> list[Any]:
    return [ast.literal_eval(found) for found in _TAKEN.findall(log.read_text(encoding="utf-8", errors="replace"))]


async def sessionless_call(wire: Wire, ident: int | str, name: str, arguments: dict[str, Any] | None) -> bytes:
    """The answer line to a 2026-07-28 `tools/call`, as claimcheck wrote it."""
    params: dict[str, Any] = {"name": name, "_meta": ENVELOPE}
    if arguments is not None:
        params["arguments"] = arguments
    message = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
    await wire.write(json.dumps(message, ensure_ascii=False).encode())
    while True:
        line = await wire.read_line()
        if json.loads(line).get("id") == ident:
            return line


async def test_a_sessionless_clients_calls_are_taken_and_answered_byte_for_byte_as_by_the_sdk_path(
    tmp_path: Path,
) -> None:
    """The SDK serves one era a stream, chosen by the first request: after `server/discover` with the envelope,
    plain calls of that era are the fast path's (the first opens the session, on the SDK's path)."""
    calls: list[tuple[int | str, str, dict[str, Any] | None]] = [
        (1, "demo__echo", {"text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}),
        ("two", "demo__echo", {"text": ""}),
        (3, "demo__big", {"kb": 4}),
        (4, "demo__fail", {"message": "it failed"}),
        (5, "demo__echo", {}),
        (6, "demo__echo", None),
        (7, "demo__nope", {}),
    ]
    answers: dict[str, list[bytes]] = {}
    logs: dict[str, Path] = {}
    with anyio.fail_after(CALL_S):
        for fast in ("on", "off"):
            async with logged(tmp_path, fast) as (wire, logs[fast]):
                await wire.answer(await wire.send("server/discover", {"_meta": ENVELOPE}))
                await wire.answer(await wire.send("tools/list", {"_meta": ENVELOPE}))  # once the servers are up
                assert b"ready?" in await sessionless_call(wire, "ready", "demo__echo", {"text": "ready?"})
                answers[fast] = [await sessionless_call(wire, *call) for call in calls]
    assert answers["on"] == answers["off"]
    assert taken(logs["on"]) == [1, "two", 3, 4, 5, 6] and taken(logs["off"]) == []
    first = json.loads(answers["on"][0])["result"]
    assert first["resultType"] == "complete" and first["content"][0]["text"] == calls[0][2]["text"]  # type: ignore[index]  # given


async def test_an_answer_with_the_status_footer_is_taken_and_carries_it(tmp_path: Path) -> None:
    """A call over the time rule (1 s here) gets a handle; while it runs, the next call's answer carries the
    footer naming it, on the fast path as on the SDK's."""
    answers: dict[str, tuple[str, dict[str, Any]]] = {}
    logs: dict[str, Path] = {}
    with anyio.fail_after(CALL_S):
        for fast in ("on", "off"):
            async with logged(tmp_path, fast, {"asyncTimeoutSecs": 1}) as (wire, logs[fast]):
                await wire.handshake("footer-test")
                slow = await wire.call("demo__slow", {"seconds": 30})
                handle = HANDLE.findall(slow["result"]["content"][0]["text"])[0]
                answers[fast] = handle, await wire.call("demo__echo", {"text": "with a footer"})
    for fast, (handle, echo) in answers.items():
        content = echo["result"]["content"]
        assert content[0]["text"] == "with a footer" and len(content) == 2, (fast, content)
        assert content[1]["text"].startswith("[claimcheck] 1 running: demo__slow") and handle in content[1]["text"]
    normalized = {
        fast: FOOTER_AGE.sub("(age)", HANDLE.sub("H", json.dumps(echo))) for fast, (_, echo) in answers.items()
    }
    assert normalized["on"] == normalized["off"]
    assert len(taken(logs["on"])) == 2 and taken(logs["off"]) == []  # the slow call and the one with the footer


async def test_calls_to_a_server_with_its_rules_off_are_taken_and_answered_as_by_the_sdk_path(tmp_path: Path) -> None:
    """`"async": false` on one server: its calls are passed through on the fast path (no handle, however long or
    large), answered as the SDK's path answers them, the footer about the other server's running call included;
    a 20 MiB result (past the 16 MiB its spool keeps whole) comes back whole on both paths."""
    servers = {"demo": demo_server_entry(), "plain": {**demo_server_entry(), "async": False}}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("plain__echo", {"text": 'plain, "quoted", \\ \n'}),  # no emoji: its surrogate escapes are the SDK's to read
        ("plain__fail", {"message": "it failed"}),
        ("plain__echo", {}),  # a missing argument: the server's own error
        ("plain__slow", {"seconds": 2}),  # over the time rule: still answered whole, no handle
        ("plain__big", {"kb": 20 * 1024}),
    ]
    answers: dict[str, list[str]] = {}
    logs: dict[str, Path] = {}
    with anyio.fail_after(CALL_S):
        for fast in ("on", "off"):
            directory = tmp_path / fast
            directory.mkdir()
            config = write_config(directory, {"mcpServers": servers, "settings": {"asyncTimeoutSecs": 1}})
            log = logs[fast] = directory / "stderr.log"
            env = {**os.environ, "CLAIMCHECK_FAST_PATH": fast, "CLAIMCHECK_LOG": "debug"}
            command = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(config)]
            with log.open("wb") as stderr:
                async with await anyio.open_process(command, stderr=stderr, env=env) as process:
                    try:
                        wire = Wire(process)
                        await wire.handshake("rules-off-test")
                        await wire.answer(await wire.send("tools/list"))  # once both servers are up
                        await wire.call("demo__slow", {"seconds": 60})  # a handle: the footer names it
                        answers[fast] = [json.dumps(await wire.call(name, args)) for name, args in calls]
                    finally:
                        process.kill()
    normalized = {
        fast: [FOOTER_AGE.sub("(age)", HANDLE.sub("H", answer)) for answer in found] for fast, found in answers.items()
    }
    assert normalized["on"] == normalized["off"]
    echo, failed, _, slow, big = (json.loads(answer)["result"] for answer in answers["on"])
    assert echo["content"][0]["text"] == calls[0][1]["text"]
    assert all(result["content"][-1]["text"].startswith("[claimcheck] 1 running: demo__slow") for result in (echo, big))
    assert failed["isError"] is True and "it failed" in failed["content"][0]["text"]
    assert slow["content"][0]["text"] == "slept 2 s"
    assert len(big["content"][0]["text"]) == 20 * 1024 * 1024
    assert len(taken(logs["on"])) == 1 + len(calls) and taken(logs["off"]) == []


async def test_a_call_handed_out_under_the_time_rule_says_so_on_both_paths(tmp_path: Path) -> None:
    """The status API tells why a call got a handle: the time rule (1 s here), whichever path took the call."""
    handoffs: dict[str, Any] = {}
    with anyio.fail_after(CALL_S):
        for fast in ("on", "off"):
            state = tmp_path / f"state-{fast}"
            settings = {"asyncTimeoutSecs": 1, "stateDir": str(state)}
            async with logged(tmp_path, fast, settings, api=True) as (wire, _):
                await wire.handshake("handoff-test")
                slow = await wire.call("demo__slow", {"seconds": 30})
                handle = HANDLE.findall(slow["result"]["content"][0]["text"])[0]
                (found,) = (state / "instances").glob("*.json")
                discovery = json.loads(found.read_text(encoding="utf-8"))
                headers = {"Authorization": f"Bearer {discovery['token']}"}
                async with httpx2.AsyncClient(base_url=discovery["url"], headers=headers, timeout=CALL_S) as http:
                    handoffs[fast] = (await http.get(f"/v1/tasks/{handle}")).json()["handoff"]
    assert handoffs == {"on": "time", "off": "time"}
