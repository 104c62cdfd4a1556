"""The HTTP fast path answers as the SDK's streamable HTTP transport does, through two real claimcheck
processes (`serve --transport http`, the demo server behind each over stdio), one with the fast path forced
on and one forced off, driven by plain HTTP requests so the test sees the wire:

- a plain call is answered with one `application/json` body when the fast path is on (an SSE stream when it
  is off: the proof that the fast path took it) and with the same JSON-RPC result either way, for unicode,
  empty, error, missing-argument and unknown-tool calls;
- what the SDK refuses is refused alike (unknown session, no session header, JSON-only Accept, wrong token,
  a foreign Origin), and what the fast path leaves alone (`_meta`, claimcheck's own tools) is the SDK's;
- an answer that carries the status footer is taken too, and carries it; so are calls to a server whose rules are
  off (passed through, the footer added, a 20 MiB result whole);
- a call that logs gets its log message before its answer, on an SSE stream;
- a cancelled call is answered "Request cancelled" (-32800), as the SDK's 2025-era transport answers it;
- a client that leaves mid-call leaves the call running to its end, on both paths (the output it made is
  listed for the session afterwards).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from server.upstream.http_fast import PRIME_ENV
from tests.support.handles import FOOTER_AGE
from tests.support.processes import announced_url, demo_server_entry, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

CALL_S = 120
VERSION = "2025-11-25"
TOKEN = "fast-path-token"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
_SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"


@asynccontextmanager
async def claimcheck(
    tmp_path: Path,
    fast: str,
    settings: dict[str, Any] | None = None,
    prime: float = 60,
    servers: dict[str, Any] | None = None,
) -> AsyncIterator[str]:
    """The URL of a claimcheck serving streamable HTTP with the fast path `fast` (on/off), token `TOKEN`; a
    fast-path call still running after `prime` seconds is answered on a resumable SSE stream (else in JSON);
    `servers`: its servers, when not the demo server alone."""
    data: dict[str, Any] = {"mcpServers": servers or {"demo": demo_server_entry()}, "settings": settings or {}}
    (tmp_path / fast).mkdir()
    config = write_config(tmp_path / fast, data)
    command = [
        "env",
        f"CLAIMCHECK_FAST_PATH={fast}",
        f"{PRIME_ENV}={prime}",
        f"FAST_TEST_TOKEN={TOKEN}",
        sys.executable,
        "-m",
        "server",
        "serve",
        "--no-api",
    ]
    command += ["--config", str(config), "--transport", "http", "--port", "0", "--auth-token-env", "FAST_TEST_TOKEN"]
    async with announced_url(command, _SERVING) as url:
        yield url


class Peer:
    """A plain HTTP client of one MCP session (no SDK client: the test reads the wire)."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url, self.session = http, url, ""
        self.extra: dict[str, str] = {}

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {**ACCEPT, "authorization": f"Bearer {TOKEN}", **self.extra}
        if self.session:
            headers |= {"mcp-session-id": self.session, "mcp-protocol-version": VERSION}
        return headers | extra

    async def post(self, body: dict[str, Any], **headers: str) -> httpx2.Response:
        content = json.dumps(body, ensure_ascii=False).encode()  # as SDK clients send it: UTF-8, not \u escapes
        return await self.http.post(self.url, content=content, headers=self.headers(**headers))

    async def open(self) -> None:
        params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "fast-test", "version": "1"}}
        response = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert response.status_code == 200, response.text
        self.session = response.headers["mcp-session-id"]
        assert (await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status_code == 202
        listed = messages(await self.post({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}))
        assert "demo__echo" in {tool["name"] for tool in listed[-1]["result"]["tools"]}

    async def call(
        self, ident: int | str, name: str, arguments: dict[str, Any] | None, **params: Any
    ) -> httpx2.Response:
        request_params: dict[str, Any] = {"name": name, **params}
        if arguments is not None:
            request_params["arguments"] = arguments
        return await self.post({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": request_params})


def messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: its JSON body, or the data of its SSE events (in order)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = []
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                found.append(json.loads(line[5:]))
        return found
    return [response.json()]


def kind(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0]


@asynccontextmanager
async def peers(
    tmp_path: Path, prime: float = 60, servers: dict[str, Any] | None = None, **settings: Any
) -> AsyncIterator[dict[str, Peer]]:
    """One opened session on a fast-path-on and one on a fast-path-off claimcheck."""
    async with (
        claimcheck(tmp_path, "on", settings, prime, servers) as on,
        claimcheck(tmp_path, "off", settings, prime, servers) as off,
        httpx2.AsyncClient(timeout=CALL_S) as http,
    ):
        opened = {"on": Peer(http, on), "off": Peer(http, off)}
        with anyio.fail_after(CALL_S):
            for peer in opened.values():
                for name in servers or ["demo"]:
                    while True:  # a demo server may still be starting: a call before it is up is an error
                        await peer.open() if not peer.session else None
                        answer = messages(await peer.call("ready", f"{name}__echo", {"text": "ready?"}))[-1]
                        if answer.get("result", {}).get("content", [{}])[0].get("text") == "ready?":
                            break
                        await anyio.sleep(0.2)
        yield opened


async def test_plain_calls_are_answered_in_json_with_the_sdk_paths_results(tmp_path: Path) -> None:
    calls: list[tuple[int | str, str, dict[str, Any] | None]] = [
        (1, "demo__echo", {"text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}),
        ("two", "demo__echo", {"text": ""}),
        (3, "demo__big", {"kb": 4}),
        (4, "demo__fail", {"message": "it failed"}),
        (5, "demo__echo", {}),  # a missing argument: the server's own error
        (6, "demo__echo", None),  # no arguments at all
        (7, "demo__nope", {}),  # an unknown tool: claimcheck's error
    ]
    async with peers(tmp_path) as both:
        with anyio.fail_after(CALL_S):
            answers = {mode: [await peer.call(*call) for call in calls] for mode, peer in both.items()}
    assert [kind(response) for response in answers["on"]] == ["application/json"] * 6 + ["text/event-stream"]
    assert {kind(response) for response in answers["off"]} == {"text/event-stream"}
    for on, off in zip(answers["on"], answers["off"], strict=True):
        assert on.status_code == off.status_code == 200
        assert on.headers["mcp-session-id"] and messages(on)[-1] == messages(off)[-1]
    first = messages(answers["on"][0])[-1]
    assert first == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}], "isError": False},
    }
    assert messages(answers["on"][3])[-1]["result"]["isError"] is True


async def test_what_the_sdk_refuses_is_refused_alike_and_the_rest_is_the_sdks(tmp_path: Path) -> None:
    async with peers(tmp_path) as both:
        results: dict[str, list[tuple[int, str, Any]]] = {}
        with anyio.fail_after(CALL_S):
            for mode, peer in both.items():
                params = {"name": "demo__echo", "arguments": {"text": "x"}}
                call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
                refused = [
                    await peer.post(call, **{"mcp-session-id": "0" * 32}),  # an unknown session
                    await peer.post(call, accept="application/json"),  # no SSE in Accept
                    await peer.post(call, authorization="Bearer wrong"),
                    await peer.post(call, origin="http://evil.example"),
                    await peer.post(call, **{"content-type": "text/plain"}),
                    await peer.http.post(
                        peer.url, content=json.dumps(call), headers={**ACCEPT, "authorization": f"Bearer {TOKEN}"}
                    ),
                ]
                sdk = [
                    await peer.call(10, "demo__echo", {"text": "meta"}, _meta={"progressToken": "p"}),
                    await peer.call(11, "list_tool_outputs", {}),
                ]
                results[mode] = [(r.status_code, kind(r), _body(r)) for r in refused]
                results[mode] += [(r.status_code, kind(r), messages(r)[-1]) for r in sdk]
    assert results["on"] == results["off"]
    assert [status for status, _, _ in results["on"]] == [404, 406, 401, 403, 415, 400, 200, 200]
    assert [content for _, content, _ in results["on"][-2:]] == ["text/event-stream"] * 2


def _body(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


async def test_a_call_that_logs_gets_its_log_message_before_its_answer(tmp_path: Path) -> None:
    async with peers(tmp_path) as both:
        with anyio.fail_after(CALL_S):
            answers = {mode: await peer.call(1, "demo__log", {"message": "hello é"}) for mode, peer in both.items()}
    for response in answers.values():
        assert kind(response) == "text/event-stream"
        sent = messages(response)
        assert [message.get("method") for message in sent] == ["notifications/message", None]
        assert sent[0]["params"]["data"] == "hello é" and sent[1]["result"]["content"][0]["text"] == "logged hello é"
    assert messages(answers["on"]) == messages(answers["off"])
    assert re.search(r"^id: \S+", answers["on"].text, re.M)  # events the event store keeps, for a resumption


async def test_a_cancelled_call_is_answered_request_cancelled_as_by_the_sdk(tmp_path: Path) -> None:
    async with peers(tmp_path) as both:
        for peer in both.values():
            with anyio.fail_after(CALL_S):
                answer: list[httpx2.Response] = []
                async with anyio.create_task_group() as tg:

                    async def slow(peer: Peer = peer, answer: list[httpx2.Response] = answer) -> None:
                        answer.append(await peer.call(5, "demo__slow", {"seconds": 30}))

                    tg.start_soon(slow)
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
                    while not answer:  # one that comes before the call is known is ignored, so say it until heard
                        assert (await peer.post(cancel)).status_code == 202
                        await anyio.sleep(0.2)
            error = messages(answer[0])[-1]
            assert error == {"jsonrpc": "2.0", "id": 5, "error": {"code": -32800, "message": "Request cancelled"}}
            after = messages(await peer.call(6, "demo__echo", {"text": "after"}))[-1]
            assert after["result"]["content"][0]["text"] == "after"


async def test_a_client_that_leaves_mid_call_leaves_the_call_running_to_its_end(tmp_path: Path) -> None:
    """The client leaves 3 s into an 8 s call (time enough for its request to arrive, however loaded the
    machine); the call outlives the time rule's wait (6 s here), so it gets a handle: listed once complete."""
    listed: dict[str, str] = {}

    async def leave_and_list(mode: str, peer: Peer) -> None:
        async with httpx2.AsyncClient(timeout=CALL_S) as leaving:
            gone = Peer(leaving, peer.url)
            gone.session = peer.session
            with anyio.move_on_after(3):  # the client gives up and closes its connection
                await gone.call(1, "demo__slow", {"seconds": 8})
        while True:
            text = messages(await peer.call("list", "list_tool_outputs", {}))[-1]["result"]["content"][0]["text"]
            if "demo__slow" in text and "running" not in text:
                listed[mode] = text
                return
            await anyio.sleep(0.5)

    async with peers(tmp_path, asyncTimeoutSecs=6) as both:
        with anyio.fail_after(CALL_S):
            async with anyio.create_task_group() as tg:  # the two modes' servers side by side: the calls wait alike
                for mode, peer in both.items():
                    tg.start_soon(leave_and_list, mode, peer)
    for mode, text in listed.items():
        assert "demo__slow: ready after" in text, (mode, text)
    assert listed.keys() == both.keys()


async def test_a_fast_path_call_lands_in_the_session_the_sdk_path_would_use(tmp_path: Path) -> None:
    """The owner key: one token, two `Claimcheck-Session` headers, so two owners. A call handed a handle
    (over the time rule, 1 s here) is listed for the owner of its request by every connection of that owner,
    and never for the other owner; a request of one owner on a connection the other opened is refused as for
    an unknown session (server.upstream.principals): fast path on as off."""
    handle = re.compile(r"session-[0-9a-f]+/[0-9a-f]+")
    async with peers(tmp_path, asyncTimeoutSecs=1) as both:
        for mode, peer in both.items():
            with anyio.fail_after(CALL_S):
                owners = {name: Peer(peer.http, peer.url) for name in ("a", "a-again", "b")}
                for name, other in owners.items():
                    other.extra = {"claimcheck-session": name.removesuffix("-again")}
                    await other.open()
                b_params = {"name": "demo__slow", "arguments": {"seconds": 2}}
                b_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": b_params}
                crossed = await owners["a"].post(b_call, **{"claimcheck-session": "b"})  # b's request, a's connection
                answers = [await owners["a"].call(1, "demo__slow", {"seconds": 2}), await owners["b"].post(b_call)]
                made = [handle.findall(messages(answer)[-1]["result"]["content"][0]["text"]) for answer in answers]
                listed: dict[str, str] = {}
                while not listed or any("running" in text for text in listed.values()):
                    for name, other in owners.items():
                        response = await other.call("list", "list_tool_outputs", {})
                        listed[name] = messages(response)[-1]["result"]["content"][0]["text"]
            a_handle, b_handle = made[0][0], made[1][0]
            assert crossed.status_code == 404 and "Session not found" in crossed.text, (mode, crossed.text)
            assert a_handle in listed["a"] and a_handle in listed["a-again"] and a_handle not in listed["b"], mode
            assert b_handle in listed["b"] and b_handle not in listed["a"] and b_handle not in listed["a-again"], mode
            assert len(handle.findall(listed["b"])) == 1, (mode, listed["b"])  # nothing else ran for b
            if mode == "on":
                assert [kind(answer) for answer in answers] == ["application/json"] * 2  # the fast path took them


async def test_a_client_whose_stream_drops_resumes_it_with_last_event_id(tmp_path: Path) -> None:
    """A call still running after a moment is answered on an SSE stream that begins with a priming event, as on
    the SDK's path: a client that drops the stream there gets the answer by a GET with `Last-Event-ID`."""
    async with peers(tmp_path, prime=0.1) as both:
        for mode, peer in both.items():
            with anyio.fail_after(CALL_S):
                body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
                body["params"] = {"name": "demo__slow", "arguments": {"seconds": 2}}
                content = json.dumps(body).encode()
                last_id = ""
                async with httpx2.AsyncClient(timeout=CALL_S) as dropping:
                    async with dropping.stream("POST", peer.url, content=content, headers=peer.headers()) as response:
                        assert kind(response) == "text/event-stream", mode
                        async for line in response.aiter_lines():
                            if line.startswith("id:"):
                                last_id = line[3:].strip()
                                break  # the priming event: the client drops the stream here
                assert last_id, mode
                answer: list[dict[str, Any]] = []
                while not answer:  # until the call has ended, a GET may get the events so far and end: ask again
                    headers = peer.headers(**{"last-event-id": last_id})
                    async with peer.http.stream("GET", peer.url, headers=headers) as resumed:
                        assert resumed.status_code == 200, mode
                        async for line in resumed.aiter_lines():
                            if line.startswith("data:") and line[5:].strip():
                                answer.append(json.loads(line[5:]))
                                break
                            if line.startswith("id:"):
                                last_id = line[3:].strip()
                    if not answer:
                        await anyio.sleep(0.2)  # a poll's pace (the server suggests 1 s), not a synchronisation
            assert answer[0]["id"] == 3 and answer[0]["result"]["content"][0]["text"] == "slept 2 s", (mode, answer)


async def test_an_answer_with_the_status_footer_is_taken_and_carries_it(tmp_path: Path) -> None:
    """A call over the time rule (1 s here) gets a handle; while it runs, the next call's answer carries the footer
    naming it: in one JSON body on the fast path (it took the call), on an SSE stream on the SDK's."""
    handle = re.compile(r"session-[0-9a-f]+/[0-9a-f]+")
    async with peers(tmp_path, asyncTimeoutSecs=1) as both:
        answers: dict[str, httpx2.Response] = {}
        with anyio.fail_after(CALL_S):
            for mode, peer in both.items():
                slow = messages(await peer.call(1, "demo__slow", {"seconds": 30}))[-1]
                made = handle.findall(slow["result"]["content"][0]["text"])[0]
                answers[mode] = await peer.call(2, "demo__echo", {"text": "with a footer"})
                content = messages(answers[mode])[-1]["result"]["content"]
                assert content[0]["text"] == "with a footer" and len(content) == 2, (mode, content)
                assert (
                    content[1]["text"].startswith("[claimcheck] 1 running: demo__slow") and made in content[1]["text"]
                )
    assert kind(answers["on"]) == "application/json" and kind(answers["off"]) == "text/event-stream"
    normalized = {
        mode: FOOTER_AGE.sub("(age)", handle.sub("H", json.dumps(messages(answer)[-1])))
        for mode, answer in answers.items()
    }
    assert normalized["on"] == normalized["off"]


async def test_calls_to_a_server_with_its_rules_off_are_taken_and_carry_the_footer(tmp_path: Path) -> None:
    """`"async": false` on one server: its calls are passed through on the fast path (one JSON body, however long
    the call or large its result), with the footer about the other server's running call, as the SDK's path
    answers them (on SSE); a 20 MiB result (past the 16 MiB its spool keeps whole) comes back whole."""
    servers = {"demo": demo_server_entry(), "plain": {**demo_server_entry(), "async": False}}
    handle = re.compile(r"session-[0-9a-f]+/[0-9a-f]+")
    calls: list[tuple[int, str, dict[str, Any]]] = [
        (2, "plain__echo", {"text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}),
        (3, "plain__slow", {"seconds": 2}),  # over the time rule: still answered whole, no handle
        (4, "plain__big", {"kb": 20 * 1024}),
    ]
    async with peers(tmp_path, servers=servers, asyncTimeoutSecs=1) as both:
        answers: dict[str, list[httpx2.Response]] = {}
        with anyio.fail_after(CALL_S):
            for mode, peer in both.items():
                slow = messages(await peer.call(1, "demo__slow", {"seconds": 60}))[-1]
                assert handle.search(slow["result"]["content"][0]["text"])
                answers[mode] = [await peer.call(*call) for call in calls]
    assert [kind(response) for response in answers["on"]] == ["application/json"] * len(calls)
    assert {kind(response) for response in answers["off"]} == {"text/event-stream"}
    normalized = {
        mode: [FOOTER_AGE.sub("(age)", handle.sub("H", json.dumps(messages(answer)[-1]))) for answer in found]
        for mode, found in answers.items()
    }
    assert normalized["on"] == normalized["off"]
    echo, slept, big = (messages(answer)[-1]["result"] for answer in answers["on"])
    assert echo["content"][0]["text"] == calls[0][2]["text"] and slept["content"][0]["text"] == "slept 2 s"
    assert len(big["content"][0]["text"]) == 20 * 1024 * 1024
    assert all(result["content"][-1]["text"].startswith("[claimcheck] 1 running: demo__slow") for result in (echo, big))
