"""The HTTP fast path answers a 2026-07-28 (sessionless) client as the SDK's single-exchange entry does, through
two real claimcheck processes (`serve --transport http`, the demo server behind each over stdio), one with the
fast path forced on and one forced off, driven by plain HTTP requests so the test sees the wire. Both answer in
one `application/json` body, so what tells that the fast path took a call is its DEBUG line on stderr:

- plain calls (unicode, empty, large, error, missing-argument, no-argument, unknown-tool) are taken and answered
  byte for byte as by the SDK's path, with the same status and headers;
- an answer that carries the status footer is taken and built with it;
- what the SDK refuses or treats otherwise (a mismatched or repeated routing header, JSON-only Accept, a foreign
  Origin, a wrong token, a log level or progress token in `_meta`, a version the envelope does not say) is left
  to it, answered alike;
- the session is the owner's: with one token and two `Claimcheck-Session` headers, each owner's handles are its
  own, on the fast path as on the SDK's; without a token, the client's name and that header say whose;
- a client that closes its connection cancels its call, as on the SDK's path: it never gets a handle.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest

from tests.support.handles import FOOTER_AGE
from tests.support.processes import announcing, demo_server_entry, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

CALL_S = 120
VERSION = "2026-07-28"
TOKEN = "sessionless-token"
_SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
_TAKEN = re.compile(r"the HTTP fast path takes call (\S+) of a sessionless client")
HANDLE = re.compile(r"session-[0-9a-f]+/[0-9a-f]+")


@dataclass
class Server:
    url: str
    stderr: list[bytes] = field(default_factory=list)

    def taken(self) -> list[Any]:
        """The ids of the calls the fast path took so far, as its DEBUG lines name them."""
        return [ast.literal_eval(found) for found in _TAKEN.findall(b"".join(self.stderr).decode(errors="replace"))]


@asynccontextmanager
async def claimcheck(tmp_path: Path, fast: str, settings: dict[str, Any], token: bool = True) -> AsyncIterator[Server]:
    """A claimcheck serving streamable HTTP with the fast path `fast` (on/off) and token `TOKEN` (or none), logging
    at DEBUG to a stderr the test keeps."""
    data: dict[str, Any] = {"mcpServers": {"demo": demo_server_entry()}, "settings": settings}
    (tmp_path / fast).mkdir()
    config = write_config(tmp_path / fast, data)
    command = [sys.executable, "-m", "server", "serve", "--no-api", "--config", str(config), "--transport", "http"]
    command += ["--port", "0", *(["--auth-token-env", "SESSIONLESS_TOKEN"] if token else [])]
    env = {**os.environ, "CLAIMCHECK_FAST_PATH": fast, "CLAIMCHECK_LOG": "debug", "SESSIONLESS_TOKEN": TOKEN}
    async with announcing(command, _SERVING, env=env) as started:
        yield Server(started.url, started.said)


class Client:
    """A plain HTTP client of the sessionless era (no SDK client: the test reads the wire)."""

    def __init__(self, http: httpx2.AsyncClient, url: str, *, name: str = "sessionless-test", **extra: str) -> None:
        self.http, self.url, self.name, self.extra = http, url, name, extra

    def headers(self, body: dict[str, Any], **extra: str) -> dict[str, str]:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "authorization": f"Bearer {TOKEN}",
            "mcp-protocol-version": VERSION,
            "mcp-method": body["method"],
            **self.extra,
        }
        headers = {key: value for key, value in headers.items() if value}  # "" leaves a header out
        name = body.get("params", {}).get("name")
        if isinstance(name, str):
            headers["mcp-name"] = name
        return headers | extra

    async def post(self, body: dict[str, Any], **headers: str) -> httpx2.Response:
        content = json.dumps(body, ensure_ascii=False).encode()  # as SDK clients send it: UTF-8, not \u escapes
        return await self.http.post(self.url, content=content, headers=self.headers(body, **headers))

    async def call(self, ident: int | str, name: str, arguments: dict[str, Any] | None, **meta: Any) -> httpx2.Response:
        return await self.post(call_body(ident, name, arguments, client=self.name, **meta))


def call_body(
    ident: int | str, name: str, arguments: dict[str, Any] | None, client: str = "sessionless-test", **meta: Any
) -> dict[str, Any]:
    """A `tools/call` as the SDK's client sends it at 2026-07-28 (its envelope; `meta` adds to it)."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        **meta,
    }
    params: dict[str, Any] = {"name": name, "_meta": envelope}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def wire(response: httpx2.Response) -> tuple[int, str, str, bytes]:
    """What the client got: status, content type and length, and the body as sent."""
    headers = response.headers
    return response.status_code, headers.get("content-type", ""), headers.get("content-length", ""), response.content


def text(response: httpx2.Response) -> str:
    return "\n".join(item["text"] for item in response.json()["result"]["content"] if item["type"] == "text")


@asynccontextmanager
async def servers(
    tmp_path: Path, token: bool = True, **settings: Any
) -> AsyncIterator[dict[str, tuple[Server, Client]]]:
    """A fast-path-on and a fast-path-off claimcheck, each with a client whose session the SDK's path opened."""
    async with (
        claimcheck(tmp_path, "on", settings, token) as on,
        claimcheck(tmp_path, "off", settings, token) as off,
        httpx2.AsyncClient(timeout=CALL_S) as http,
    ):
        extra = {} if token else {"authorization": ""}
        both = {"on": (on, Client(http, on.url, **extra)), "off": (off, Client(http, off.url, **extra))}
        with anyio.fail_after(CALL_S):
            for _, client in both.values():
                await ready(client)
        yield both


async def ready(client: Client) -> None:
    """Until the demo server is up (a call before is an error); the first call also opens the owner's session."""
    while True:
        response = await client.call("ready", "demo__echo", {"text": "ready?"})
        if response.status_code == 200 and "result" in response.json() and text(response) == "ready?":
            return
        await anyio.sleep(0.2)


async def test_plain_calls_are_taken_and_answered_byte_for_byte_as_by_the_sdk_path(tmp_path: Path) -> None:
    calls: list[tuple[int | str, str, dict[str, Any] | None]] = [
        (1, "demo__echo", {"text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}),
        ("two", "demo__echo", {"text": ""}),
        (3, "demo__big", {"kb": 4}),
        (4, "demo__fail", {"message": "it failed"}),
        (5, "demo__echo", {}),  # a missing argument: the server's own error
        (6, "demo__echo", None),  # no arguments at all
        (7, "demo__nope", {}),  # an unknown tool: claimcheck's error, on the SDK's path
    ]
    async with servers(tmp_path) as both:
        with anyio.fail_after(CALL_S):
            answers = {mode: [await client.call(*call) for call in calls] for mode, (_, client) in both.items()}
        taken = {mode: server.taken() for mode, (server, _) in both.items()}
    for on, off in zip(answers["on"], answers["off"], strict=True):
        assert wire(on) == wire(off)
        assert wire(on)[:2] == (200, "application/json")
    assert taken == {"on": [1, "two", 3, 4, 5, 6], "off": []}
    first = answers["on"][0].json()
    assert first == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "content": [{"type": "text", "text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}],
            "isError": False,
            "resultType": "complete",
            "_meta": {
                "io.modelcontextprotocol/serverInfo": first["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
            },
        },
    }
    assert answers["on"][3].json()["result"]["isError"] is True


async def test_an_answer_with_the_status_footer_is_taken_and_carries_it(tmp_path: Path) -> None:
    """A call over the time rule (1 s here) gets a handle; while it runs, the next call's answer carries the footer
    naming it, on the fast path as on the SDK's."""
    async with servers(tmp_path, asyncTimeoutSecs=1) as both:
        answers: dict[str, list[httpx2.Response]] = {}
        with anyio.fail_after(CALL_S):
            for mode, (_, client) in both.items():
                slow = await client.call(1, "demo__slow", {"seconds": 30})
                answers[mode] = [slow, await client.call(2, "demo__echo", {"text": "with a footer"})]
        taken = {mode: server.taken() for mode, (server, _) in both.items()}
    for mode, (slow, echo) in answers.items():
        handle = HANDLE.findall(text(slow))[0]
        lines = echo.json()["result"]["content"]
        assert lines[0]["text"] == "with a footer", mode
        assert len(lines) == 2 and lines[1]["text"].startswith("[claimcheck] 1 running: demo__slow"), (mode, lines)
        assert handle in lines[1]["text"], mode
    # the handle and the running call's age (tenths of a second) differ between the runs; nothing else may
    normalized = {mode: FOOTER_AGE.sub("(age)", HANDLE.sub("H", echo.text)) for mode, (_, echo) in answers.items()}
    assert normalized["on"] == normalized["off"]
    assert taken == {"on": [1, 2], "off": []}


async def test_what_the_sdk_refuses_or_reads_otherwise_is_left_to_it_and_answered_alike(tmp_path: Path) -> None:
    body = call_body(9, "demo__echo", {"text": "x"})
    async with servers(tmp_path) as both:
        results: dict[str, list[tuple[int, str, str, bytes]]] = {}
        with anyio.fail_after(CALL_S):
            for mode, (_, client) in both.items():
                sent = [
                    await client.post(body, **{"mcp-name": "demo__other"}),  # the name header differs
                    await client.post(body, **{"mcp-method": "tools/list"}),  # the method header differs
                    await client.post(body, accept="application/json"),  # no SSE in Accept
                    await client.post(body, authorization="Bearer wrong"),
                    await client.post(body, origin="http://evil.example"),
                    await client.call(
                        10, "demo__echo", {"text": "log"}, **{"io.modelcontextprotocol/logLevel": "info"}
                    ),
                    await client.call(11, "demo__echo", {"text": "progress"}, progressToken="p"),
                    await client.call(12, "list_tool_outputs", {}),
                ]
                results[mode] = [wire(response) for response in sent]
        taken = {mode: server.taken() for mode, (server, _) in both.items()}
    assert results["on"] == results["off"]
    assert [status for status, *_ in results["on"]] == [400, 400, 406, 401, 403, 200, 200, 200]
    assert taken == {"on": [], "off": []}


async def test_each_owner_gets_its_own_session_on_the_fast_path_as_on_the_sdks(tmp_path: Path) -> None:
    """One token, two `Claimcheck-Session` headers: two owners. A call handed a handle (over the time rule, 1 s
    here) is listed for the owner of its request, never for the other."""
    async with servers(tmp_path, asyncTimeoutSecs=1) as both:
        for mode, (server, client) in both.items():
            with anyio.fail_after(CALL_S):
                owners = {name: Client(client.http, client.url, **{"claimcheck-session": name}) for name in "ab"}
                for owner in owners.values():
                    await ready(owner)
                made = {
                    name: HANDLE.findall(text(await owner.call(f"slow-{name}", "demo__slow", {"seconds": 2})))[0]
                    for name, owner in owners.items()
                }
                listed = {
                    name: text(await owner.call("list", "list_tool_outputs", {})) for name, owner in owners.items()
                }
            assert made["a"] in listed["a"] and made["a"] not in listed["b"], mode
            assert made["b"] in listed["b"] and made["b"] not in listed["a"], mode
            assert ("slow-a" in server.taken() and "slow-b" in server.taken()) == (mode == "on"), server.taken()


async def test_without_a_token_the_owner_is_the_clients_name_and_claimcheck_session_header(tmp_path: Path) -> None:
    """No credential: the client's name (from its envelope) and its `Claimcheck-Session` header say whose the
    handles are, as `owners.owner_key` says on the SDK's path. Three owners: two names, and one name twice."""
    async with servers(tmp_path, token=False, asyncTimeoutSecs=1) as both:
        for mode, (server, client) in both.items():
            with anyio.fail_after(CALL_S):
                owners = {
                    "a": Client(client.http, client.url, name="agent-a", authorization=""),
                    "b": Client(client.http, client.url, name="agent-b", authorization=""),
                    "a-x": Client(
                        client.http, client.url, name="agent-a", authorization="", **{"claimcheck-session": "x"}
                    ),
                }
                for owner in owners.values():
                    await ready(owner)
                made = {
                    name: HANDLE.findall(text(await owner.call(f"slow-{name}", "demo__slow", {"seconds": 2})))[0]
                    for name, owner in owners.items()
                }
                listed = {
                    name: text(await owner.call("list", "list_tool_outputs", {})) for name, owner in owners.items()
                }
            for name, handle in made.items():
                assert [other for other in owners if handle in listed[other]] == [name], (mode, name, listed)
            took = {f"slow-{name}" for name in owners} <= set(server.taken())
            assert took == (mode == "on"), (mode, server.taken())


async def test_a_client_that_leaves_cancels_its_call_as_on_the_sdk_path(tmp_path: Path) -> None:
    """The client leaves 1 s into a call that the time rule (2 s here) would have handed out; the next call,
    handed out itself a second later, carries a footer that names no other running call: the first was
    cancelled, not handed out."""
    async with servers(tmp_path, asyncTimeoutSecs=2) as both:
        for mode, (server, client) in both.items():
            with anyio.fail_after(CALL_S):
                async with httpx2.AsyncClient(timeout=CALL_S) as leaving:
                    with anyio.move_on_after(1):  # the client gives up and closes its connection
                        await Client(leaving, client.url).call("left", "demo__slow", {"seconds": 30})
                after = await client.call("after", "demo__slow", {"seconds": 3})
            assert "running in the background" in text(after), (mode, text(after))
            assert "[claimcheck]" not in text(after), (mode, text(after))
            assert ("left" in server.taken()) == (mode == "on"), server.taken()
