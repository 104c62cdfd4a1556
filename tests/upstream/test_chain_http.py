"""Pass-through calls to a claimcheck serving streamable HTTP, as a claimcheck in front sends them: answered on its
HTTP fast path as its SDK path answers them (the same results, the same progress), a long output sent as it is
read, never held whole; and a real chain over HTTP (claimcheck → claimcheck over HTTP → server) that stores the
output whole and identical."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from server.downstream.chain import PASSTHROUGH
from server.upstream.http_fast import PRIME_ENV
from server.upstream.streamed import GONE
from tests.support.passthrough_cases import CALLS, CUT_MIB, UNKNOWN, Shape, check_shapes, check_stored_big, shape
from tests.support.processes import PYTHON, Announced, announcing, demo_server_entry, peak, program_entry, write_config
from tests.support.servers.raw_downstream import big_text_sha256, fast_text_sha256
from tests.support.wire import MIB, serving

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SETTINGS = {"api": {"enabled": False}, "asyncTimeoutSecs": 0.5, "asyncTokenThreshold": 2000, "startupWaitSecs": 60}
RAW = program_entry("raw_downstream")
URL = r"(http://127\.0\.0\.1:\d+/mcp)"
SESSIONLESS = "2026-07-28"


def inner_config(directory: Path, settings: dict[str, Any]) -> Path:
    directory.mkdir()
    servers = {"raw": RAW, "demo": demo_server_entry(), "halt": program_entry("halting_downstream")}
    return write_config(directory, {"mcpServers": servers, "settings": {**SETTINGS, **settings}})


@asynccontextmanager
async def inner_http(
    directory: Path, fast: str, settings: dict[str, Any], prime: str | None = None
) -> AsyncIterator[tuple[str, int]]:
    """A claimcheck serving streamable HTTP (its fast path `fast`; a call's SSE stream primed after `prime` seconds
    when given) in front of the raw, demo and halting servers: its URL and pid."""
    async with inner_started(directory, fast, settings, prime) as started:
        yield started.url, started.process.pid


@asynccontextmanager
async def inner_started(
    directory: Path, fast: str, settings: dict[str, Any], prime: str | None = None, log: str = "info"
) -> AsyncIterator[Announced]:
    """`inner_http`'s claimcheck, logging at `log` to a stderr the test reads."""
    command = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(inner_config(directory, settings))]
    env = {**os.environ, "CLAIMCHECK_FAST_PATH": fast, "CLAIMCHECK_LOG": log}
    if prime is not None:
        env[PRIME_ENV] = prime
    async with announcing([*command, "--transport", "http", "--port", "0"], URL, env=env, within=60) as started:
        yield started


class Peer:
    """A handshake-era client spoken by hand, as the claimcheck in front speaks to its HTTP servers."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self._http, self._url = http, url
        self._headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        self._next = 0

    async def handshake(self) -> None:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
        body = self._body("initialize", init)
        async with self._http.stream("POST", self._url, content=body, headers=self._headers) as r:
            assert r.status_code == 200, await r.aread()
            self._headers["mcp-session-id"] = r.headers["mcp-session-id"]
            await r.aread()
        self._headers["mcp-protocol-version"] = "2025-11-25"
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert (await self._http.post(self._url, content=note, headers=self._headers)).status_code == 202

    @property
    def headers(self) -> dict[str, str]:
        return dict(self._headers)

    def _body(self, method: str, params: dict[str, Any]) -> bytes:
        self._next += 1
        return json.dumps({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}).encode()

    def request(self, tool: str, arguments: dict[str, Any], token: int | str = 7) -> bytes:
        """A pass-through call's body, as the claimcheck in front sends it."""
        params = {"name": tool, "arguments": arguments, "_meta": {"progressToken": token, PASSTHROUGH: True}}
        return self._body("tools/call", params)

    async def pass_through(
        self, tool: str, arguments: dict[str, Any], token: int | str = 7
    ) -> tuple[bytes, list[dict[str, Any]], str]:
        """The answer as sent (a JSON body, or the data of its SSE event), the notifications before it, and the
        response's content type."""
        body = self.request(tool, arguments, token)
        async with self._http.stream("POST", self._url, content=body, headers=self._headers) as response:
            kind = response.headers["content-type"].partition(";")[0]
            if kind == "application/json":
                return await response.aread(), [], kind
            notes: list[dict[str, Any]] = []
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: ":
                    message = json.loads(line.removeprefix("data: "))
                    if "method" not in message:
                        return line.removeprefix("data: ").encode(), notes, kind
                    notes.append(message)
        raise AssertionError("the stream ended with no answer")


async def test_pass_through_answers_on_the_http_fast_path_equal_those_of_its_sdk_path(tmp_path: Path) -> None:
    shapes: dict[str, list[Shape]] = {}
    progress: dict[str, list[dict[str, Any]]] = {}
    kinds: dict[str, list[str]] = {}
    with anyio.fail_after(240):
        for fast in ("on", "off"):
            settings = {"maxOutputBytes": CUT_MIB * MIB}
            async with inner_http(tmp_path / fast, fast, settings, prime="600") as (url, _):  # never primed: below
                async with httpx2.AsyncClient(timeout=120) as http:
                    peer = Peer(http, url)
                    await peer.handshake()
                    await peer.pass_through("raw__echo", {"text": "first"})  # the SDK's path: it shows the session
                    answers = [await peer.pass_through(name, args) for name, args in CALLS]
                    slow = await peer.pass_through("demo__slow", {"seconds": 1}, token="outer-42")
            shapes[fast] = [shape(data) for data, _, _ in answers]
            kinds[fast] = [kind for _, _, kind in answers]
            progress[fast] = [note["params"] for note in slow[1] if note["method"] == "notifications/progress"]
            assert json.loads(slow[0])["result"]["content"][0]["text"] == "slept 1 s"
    assert shapes["on"] == shapes["off"]
    check_shapes(shapes["on"])
    assert progress["on"] == progress["off"]
    reported = [(note["progressToken"], note["progress"], note["total"]) for note in progress["on"]]
    assert reported == [("outer-42", n, 2) for n in (1, 2)]
    # Each answered on the fast path, in one JSON body, but the unknown tool's (the SDK's path says it is unknown).
    # Never primed: a long output on a loaded machine would pass the half second after which its answer is begun
    # as an SSE stream, which would not tell the paths apart.
    expected = ["text/event-stream" if n == UNKNOWN else "application/json" for n in range(len(CALLS))]
    assert kinds["on"] == expected, kinds


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_a_long_pass_through_output_over_http_is_sent_as_it_is_read_in_bounded_memory(
    tmp_path: Path, fast: str
) -> None:
    """Answered whole in memory, 96 MiB of text took the inner claimcheck over 1 GiB. On the fast path it is sent
    as it is read; on the SDK's path (what the fast path leaves it: the fast path off here) from its file."""
    with anyio.fail_after(240):
        async with inner_http(tmp_path / "inner", fast, {}) as (url, pid):
            async with httpx2.AsyncClient(timeout=120) as http:
                peer = Peer(http, url)
                await peer.handshake()
                await peer.pass_through("raw__fast", {"mib": 20})  # the spool's path and its threads, warmed up
                idle = peak(pid)
                data, _, _ = await peer.pass_through("raw__fast", {"mib": 96})
                grew = peak(pid) - idle
    text = json.loads(data)["result"]["content"][0]["text"].encode()
    assert (hashlib.sha256(text).hexdigest(), len(text)) == fast_text_sha256(96)
    assert grew < 64 * MIB, f"the inner claimcheck grew by {grew / MIB:.0f} MiB"


@pytest.mark.parametrize("prime", [None, "0"], ids=["json-body", "sse-event"])
async def test_a_large_output_through_a_chain_over_http_arrives_whole_and_identical(
    tmp_path: Path, prime: str | None
) -> None:
    """The inner's answer is one JSON body; or, primed at once, the event of an SSE stream."""
    with anyio.fail_after(240):
        async with inner_http(tmp_path / "inner", "on", {"asyncTimeoutSecs": 600}, prime) as (url, _):
            outer = tmp_path / "outer"
            outer.mkdir()
            settings = {"api": {"enabled": False}, "asyncTimeoutSecs": 600, "startupWaitSecs": 60}
            async with serving(outer, "on", settings, {"inner": {"url": url}}) as wire:
                answer = await wire.call("inner__raw__big", {"mib": 40})
    check_stored_big(answer, outer, 40)


async def test_a_cancelled_pass_through_over_http_ends_its_output_as_an_error(tmp_path: Path) -> None:
    """Cancelled while its output is sent as it is read (the server waits half-way), the answer ends at once with
    claimcheck's note, as an error: never a truncated success. (Never primed: on a slow machine the server takes
    longer than the half second before priming to pass the 16 MiB after which the inner follows its output.)"""
    gate = tmp_path / "gate"
    with anyio.fail_after(240):
        async with (
            inner_http(tmp_path / "inner", "on", {}, prime="600") as (url, _),
            httpx2.AsyncClient(timeout=120) as http,
        ):
            peer = Peer(http, url)
            await peer.handshake()
            await peer.pass_through("raw__echo", {"text": "first"})  # the SDK's path: it shows the session
            body = peer.request("halt__halting", {"mib": 20, "gate": str(gate), "end": "finish"})
            ident = json.loads(body)["id"]
            async with http.stream("POST", url, content=body, headers=peer.headers) as response:
                chunks = response.aiter_bytes()
                received = [await anext(chunks)]  # the answer has begun: the inner follows the output
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}}
                assert (await http.post(url, content=json.dumps(cancel), headers=peer.headers)).status_code == 202
                received += [chunk async for chunk in chunks]
            gate.touch()  # the server ends its answer (read to its end by the inner)
    assert response.headers["content-type"] == "application/json"
    result = json.loads(b"".join(received))["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].endswith(
        "\n[claimcheck] the request was cancelled while its output was passed on"
    )


async def test_a_pass_through_on_the_sdk_path_resumed_by_its_client_gets_its_output_once(tmp_path: Path) -> None:
    """The SDK's path answers with a stand-in that the response writes from the file: a client whose stream dropped
    before the answer resumes it (`Last-Event-ID`) and gets the whole output; resumed again, the output is no longer
    held (it is written once, never kept whole for a replay), and the answer says so instead of the stand-in."""
    gate = tmp_path / "gate"
    with anyio.fail_after(240):
        async with inner_http(tmp_path / "inner", "off", {}) as (url, _), httpx2.AsyncClient(timeout=120) as http:
            peer = Peer(http, url)
            await peer.handshake()
            body = peer.request("halt__halting", {"mib": 10, "gate": str(gate), "end": "finish"})
            primed = ""
            async with http.stream("POST", url, content=body, headers=peer.headers) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                async for line in response.aiter_lines():
                    if line.startswith("id:"):
                        primed = line.removeprefix("id:").strip()
                        break  # the priming event: the client drops the stream here, before the answer
            gate.touch()
            resumed = [await _resume(http, url, peer.headers, primed) for _ in range(2)]
    first, again = (json.loads(answer)["result"] for answer in resumed)
    text = first["content"][0]["text"].encode()
    assert first.get("isError") is not True and len(text) == 20 * MIB
    half = text[: 10 * MIB]
    assert hashlib.sha256(half).hexdigest() == big_text_sha256(10)[0] and text[10 * MIB :] == half  # written twice
    assert again["isError"] is True and again["content"] == [{"type": "text", "text": GONE}]


async def _resume(http: httpx2.AsyncClient, url: str, headers: dict[str, str], last_id: str) -> bytes:
    """The answer a GET resuming the stream after `last_id` carries (the data of its event)."""
    async with http.stream("GET", url, headers={**headers, "last-event-id": last_id}) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: ") and '"result"' in line[:64]:
                return line.removeprefix("data: ").encode()
    raise AssertionError("the resumed stream ended with no answer")


async def test_a_sessionless_pass_through_gets_its_output_from_the_file_in_one_json_body(tmp_path: Path) -> None:
    """A 2026-07-28 request is answered on the SDK's path, in one JSON body: the stand-in's body is written with
    the output in its place, chunked (its length changes), in bounded memory."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": SESSIONLESS,
        "io.modelcontextprotocol/clientInfo": {"name": "chain-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        PASSTHROUGH: True,
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": SESSIONLESS,
        "mcp-method": "tools/call",
        "mcp-name": "raw__fast",
    }
    with anyio.fail_after(240):
        async with inner_http(tmp_path / "inner", "on", {}) as (url, pid), httpx2.AsyncClient(timeout=120) as http:

            async def call(mib: int) -> httpx2.Response:
                params = {"name": "raw__fast", "arguments": {"mib": mib}, "_meta": envelope}
                body = {"jsonrpc": "2.0", "id": mib, "method": "tools/call", "params": params}
                return await http.post(url, content=json.dumps(body), headers=headers)

            await call(20)  # the spool's path and its threads, warmed up
            idle = peak(pid)
            answer = await call(48)
            grew = peak(pid) - idle
    assert grew < 64 * MIB, f"the inner claimcheck grew by {grew / MIB:.0f} MiB"
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert "content-length" not in answer.headers
    text = answer.json()["result"]["content"][0]["text"].encode()
    assert (hashlib.sha256(text).hexdigest(), len(text)) == fast_text_sha256(48)


@pytest.mark.parametrize("prime", [None, "0"], ids=["json-body", "sse-event"])
async def test_a_client_that_leaves_mid_answer_stops_the_inner_sending_it(tmp_path: Path, prime: str | None) -> None:
    """The answer is followed as the server writes it, and the server waits half-way: a client that leaves then is
    noticed at once (before, only once the server had finished), and the inner serves on once the server ends."""
    gate = tmp_path / "gate"
    with anyio.fail_after(240):
        async with inner_started(tmp_path / "inner", "on", {}, prime, log="debug") as started:
            async with httpx2.AsyncClient(timeout=120) as http:
                peer = Peer(http, started.url)
                await peer.handshake()
                await peer.pass_through("raw__echo", {"text": "first"})  # the SDK's path: it shows the session
                body = peer.request("halt__halting", {"mib": 20, "gate": str(gate), "end": "finish"})
                async with http.stream("POST", started.url, content=body, headers=peer.headers) as response:
                    received = b""
                    async for chunk in response.aiter_bytes():  # a priming event first, on an SSE stream
                        received += chunk
                        if b'"result"' in received:
                            break  # the answer has begun (past the 16 MiB kept whole)
                # The client leaves: its connection is closed with the answer half sent.
                ident = json.loads(body)["id"]
                await started.until(f"the client of request {ident} left while its answer was sent")
                gate.touch()  # the server ends its answer: the inner reads it to its end, sending nothing
                after, _, _ = await peer.pass_through("raw__echo", {"text": "still serving"})
    assert json.loads(after)["result"]["content"] == [{"type": "text", "text": "still serving"}]
