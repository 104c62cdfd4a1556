"""Hostile frames and hostile outputs against a real `claimcheck serve`, for a bounded time.

Over stdio and streamable HTTP, with the fast path on and off, a seeded mix of frames from tests/support/hostile.py
(nesting, size, types, ids, unicode, truncation, floods, own-tool abuse), the known regressions first; then
every hostile output case of a downstream; and bearer tokens no issuer made, at claimcheck as an OAuth resource
server. After each run: the process lives and still serves a plain call,
no request got two answers, every request of ours that deserves one got one, and its peak RSS stayed bounded.

`CLAIMCHECK_FUZZ_SEED` picks another seed; `CLAIMCHECK_FUZZ_SECONDS` scales the time (default about 60 s in all).
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest

from tests.support.hostile import HOSTILE_READS, OUTPUT_CASES, REGRESSIONS, Frame, Ids, hostile_tokens, random_frames
from tests.support.oidc_peer import oidc_provider
from tests.support.processes import announced_url, program, program_entry, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SEED = int(os.environ.get("CLAIMCHECK_FUZZ_SEED", "20261125"))
SECONDS = float(os.environ.get("CLAIMCHECK_FUZZ_SECONDS", "60"))
ANSWER_S = 120
PEAK_RSS_MIB = 600
"""Idle claimcheck is about 120 MiB; frames of up to 3 MiB and a few hundred calls must not take it far."""
TOOLS = ["hostile__echo", "hostile__hostile", "nope__nothing"]
TOKEN = "fuzz-token"
HANDLE = re.compile(r"session-[0-9a-f-]{36}/[0-9a-f-]{36}")


def _config(tmp_path: Path, url: str | None = None) -> Path:
    """claimcheck's config: the hostile downstream over stdio, or at `url` over streamable HTTP."""
    hostile = {"url": url} if url else program_entry("hostile_downstream")
    data = {
        "mcpServers": {"hostile": hostile},
        "settings": {"asyncTokenThreshold": 2_000, "maxRequestBytes": 2 << 20},
    }
    return write_config(tmp_path, data)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


class Answers:
    """Every JSON-RPC answer seen, counted by id, with a way to wait for one."""

    def __init__(self) -> None:
        self.count: Counter[Any] = Counter()
        self.last: dict[Any, dict[str, Any]] = {}
        self._changed = anyio.Event()

    def add(self, message: Any) -> None:
        if isinstance(message, dict) and ("result" in message or "error" in message):
            ident = message.get("id")
            key = ident if isinstance(ident, int | str) else None
            self.count[key] += 1
            self.last[key] = message
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_for(self, idents: Iterable[Any]) -> None:
        wanted = set(idents)
        while wanted - set(self.count):
            await self._changed.wait()


def _check(frames: list[Frame], answers: Answers, seed: int) -> None:
    ours = {frame.ident: frame for frame in frames if frame.ident is not None}
    twice = [(ours[i].what, n) for i, n in answers.count.items() if i in ours and n > 1]
    assert not twice, f"seed {seed}: answered more than once: {twice}"
    silent = [frame.what for frame in frames if frame.expect == "one" and frame.ident not in answers.count]
    assert not silent, f"seed {seed}: never answered: {silent}"


def _frames(seed: int, ids: Ids, seconds: float) -> Iterable[Frame]:
    yield from REGRESSIONS(ids, "hostile__echo")
    deadline = anyio.current_time() + seconds
    for frame in random_frames(random.Random(seed), ids, TOOLS):
        if anyio.current_time() > deadline:
            return
        yield frame


class StdioWire:
    """A client of a real `claimcheck serve` over raw stdio lines."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.answers = Answers()
        self.ids = Ids(1)

    async def read(self) -> None:
        assert self.process.stdout is not None
        pending = b""
        async for chunk in self.process.stdout:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                try:
                    self.answers.add(json.loads(line))
                except ValueError:
                    raise AssertionError(f"claimcheck wrote a line that is not JSON: {line[:200]!r}") from None

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data + b"\n")

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        ident = self.ids()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(json.dumps(message).encode())
        await self.answers.wait_for([ident])
        return self.answers.last[ident]


@asynccontextmanager
async def stdio_claimcheck(tmp_path: Path, fast: str, url: str | None = None) -> AsyncIterator[StdioWire]:
    command = [sys.executable, "-m", "server", "serve", "--no-api", "--config", str(_config(tmp_path, url))]
    env = {**os.environ, "CLAIMCHECK_FAST_PATH": fast}
    async with await anyio.open_process(command, env=env, stderr=None) as process:
        wire = StdioWire(process)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wire.read)
            params = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "1"},
            }
            with anyio.fail_after(ANSWER_S):
                await wire.request("initialize", params)
                await wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
                listed = await wire.request("tools/list")  # claimcheck answers once its servers are up
                assert "hostile__echo" in json.dumps(listed), listed
            try:
                yield wire
            finally:
                tg.cancel_scope.cancel()
                process.terminate()


async def _still_serves(wire: StdioWire) -> None:
    answer = await wire.request("tools/call", {"name": "hostile__echo", "arguments": {"text": "still serving"}})
    assert answer["result"]["content"][0]["text"] == "still serving", answer


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_hostile_frames_over_stdio_leave_claimcheck_serving_and_answer_each_request_once(
    tmp_path: Path, fast: str
) -> None:
    seconds = SECONDS * (0.25 if fast == "on" else 0.15)
    async with stdio_claimcheck(tmp_path, fast) as wire:
        sent: list[Frame] = []
        for frame in _frames(SEED, Ids(), seconds):
            await wire.send(frame.data)
            sent.append(frame)
        with anyio.fail_after(ANSWER_S):
            await _still_serves(wire)
            await wire.answers.wait_for(frame.ident for frame in sent if frame.expect == "one")
        assert wire.process.returncode is None, f"seed {SEED}: claimcheck exited"
        _check(sent, wire.answers, SEED)
        assert _peak_rss_mib(wire.process.pid) < PEAK_RSS_MIB


@asynccontextmanager
async def http_claimcheck(tmp_path: Path, fast: str) -> AsyncIterator[tuple[str, anyio.abc.Process | None]]:
    command = ["env", f"CLAIMCHECK_FAST_PATH={fast}", f"FUZZ_TOKEN={TOKEN}", sys.executable, "-m", "server"]
    command += ["serve", "--no-api", "--config", str(_config(tmp_path)), "--transport", "http", "--port", "0"]
    command += ["--auth-token-env", "FUZZ_TOKEN"]
    async with announced_url(command, r"serving MCP over streamable HTTP at (http://\S+/mcp)") as url:
        yield url, None


def _messages(response: httpx2.Response) -> list[Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = re.split(r"\r\n|\r|\n", response.text)  # SSE's line ends only: str.splitlines also cuts at U+2028
        return [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip()]
    if response.headers.get("content-type", "").startswith("application/json") and response.content:
        return [response.json()]
    return []


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_hostile_frames_over_http_leave_claimcheck_serving_and_answer_each_request_once(
    tmp_path: Path, fast: str
) -> None:
    seconds = SECONDS * (0.25 if fast == "on" else 0.15)
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    base["authorization"] = f"Bearer {TOKEN}"
    async with http_claimcheck(tmp_path, fast) as (url, _), httpx2.AsyncClient(timeout=ANSWER_S) as http:
        answers = Answers()
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}
        with anyio.fail_after(ANSWER_S):
            opened = await http.post(
                url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, headers=base
            )
        headers = base | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        sent: list[Frame] = []
        failures: list[str] = []
        send, receive = anyio.create_memory_object_stream[Frame](16)

        async def worker(frames: anyio.abc.ObjectReceiveStream[Frame]) -> None:
            async for frame in frames:
                try:
                    response = await http.post(url, content=frame.data, headers=headers)
                except httpx2.TransportError as error:
                    failures.append(f"{frame.what}: {error!r}")
                    continue
                if response.status_code >= 500:
                    failures.append(f"{frame.what}: HTTP {response.status_code}")
                try:
                    found = _messages(response)
                except ValueError:
                    failures.append(f"{frame.what}: an answer that is not JSON")
                    continue
                for message in found:
                    answers.add(message)

        with anyio.fail_after(ANSWER_S + SECONDS):
            async with anyio.create_task_group() as tg:
                with receive:
                    for _ in range(4):
                        tg.start_soon(worker, receive.clone())
                async with send:
                    for frame in _frames(SEED, Ids(), seconds):
                        sent.append(frame)
                        await send.send(frame)
            call = {"name": "hostile__echo", "arguments": {"text": "still serving"}}
            alive = await http.post(
                url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, headers=headers
            )
        assert _messages(alive)[-1]["result"]["content"][0]["text"] == "still serving"
        assert not failures, f"seed {SEED}: {failures[:10]}"
        _check(sent, answers, SEED)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_hostile_outputs_of_a_downstream_are_answered_and_stored_ones_can_be_read(
    tmp_path: Path, transport: str
) -> None:
    problems: list[str] = []
    async with AsyncExitStack() as stack:
        url = None
        if transport == "http":
            command = program("hostile_downstream", "--http", "0")
            url = await stack.enter_async_context(announced_url(command, r"hostile downstream at (http://\S+/mcp)"))
        wire = await stack.enter_async_context(stdio_claimcheck(tmp_path, "on", url))
        with anyio.fail_after(ANSWER_S):
            for case in OUTPUT_CASES:
                problems += await _try_output(wire, case)
            await _still_serves(wire)
        assert wire.process.returncode is None
    assert not problems, problems


async def _try_output(wire: StdioWire, case: str) -> list[str]:
    """What went wrong with one hostile output: its answer, then reading it back through each own tool."""
    answer = await wire.request("tools/call", {"name": "hostile__hostile", "arguments": {"case": case}})
    if "result" not in answer:
        return [f"{case}: {answer}"]
    text = "\n".join(item.get("text", "") for item in answer["result"]["content"])
    if (
        "maximum recursion depth" in text
        or "Internal error" in text
        or (case.endswith("_big") and "too large" not in text)
    ):
        return [f"{case}: {text[:300]}"]
    match = HANDLE.search(text)
    if match is None:
        return []
    problems = []
    handle = match.group(0)
    reads: list[tuple[str, dict[str, Any]]] = [
        ("tool_output", {"handle": handle, "mode": "json", "query": "@"}),
        ("tool_output", {"handle": handle, "mode": "slice", "slice": {"start": 0, "length": 200}}),
        ("Read", {"file": handle, "lines": 5}),
        ("Grep", {"file": handle, "regex": "pad|7|L|a"}),
    ]
    if case in ("deep_object_big", "huge_int_text_big"):  # the known bad reads, on one deep and one flat JSON
        reads += [(tool, {("file" if tool == "Grep" else "handle"): handle, **args}) for tool, args in HOSTILE_READS]
    for tool, arguments in reads:
        read = await wire.request("tools/call", {"name": tool, "arguments": arguments})
        body = json.dumps(read.get("result", read))
        if "result" not in read or "maximum recursion depth" in body or "Traceback" in body or "Internal error" in body:
            problems.append(f"{case}, {tool} {arguments.get('mode', '')}: {body[:300]}")
    return problems


TOKENS = 300


@pytest.mark.oidc
async def test_hostile_bearer_tokens_get_401_with_the_challenge_and_claimcheck_serves_on(tmp_path: Path) -> None:
    """claimcheck as an OAuth resource server of a real OpenID provider, sent tokens no issuer made."""
    rng = random.Random(SEED)
    async with oidc_provider(tmp_path) as provider:
        config = write_config(
            tmp_path,
            {
                "mcpServers": {"hostile": program_entry("hostile_downstream")},
                "settings": {"auth": {"issuer": provider.issuer}},
            },
        )
        command = [sys.executable, "-m", "server", "serve", "--no-api", "--config", str(config)]
        command += ["--transport", "http", "--port", "0"]
        async with (
            announced_url(command, r"serving MCP over streamable HTTP at (http://\S+/mcp)") as url,
            httpx2.AsyncClient(timeout=ANSWER_S) as http,
        ):
            base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            hello = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "1"},
            }
            body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
            problems: list[str] = []
            send, receive = anyio.create_memory_object_stream[tuple[str, str]](16)

            async def worker(tokens: anyio.abc.ObjectReceiveStream[tuple[str, str]]) -> None:
                async for what, token in tokens:
                    answer = await http.post(url, content=body, headers={**base, "authorization": f"Bearer {token}"})
                    challenge = answer.headers.get("www-authenticate", "")
                    if answer.status_code != 401 or not challenge.startswith('Bearer error="invalid_token"'):
                        problems.append(f"{what} ({token[:80]}): HTTP {answer.status_code} {challenge!r}")

            with anyio.fail_after(ANSWER_S):
                async with anyio.create_task_group() as tg:
                    with receive:
                        for _ in range(4):
                            tg.start_soon(worker, receive.clone())
                    async with send:
                        for case in hostile_tokens(rng, TOKENS):
                            await send.send(case)
                good = await provider.token("alice", url)
                alive = await http.post(url, content=body, headers={**base, "authorization": f"Bearer {good}"})
    assert not problems, f"seed {SEED}: {problems[:10]}"
    assert alive.status_code == 200
