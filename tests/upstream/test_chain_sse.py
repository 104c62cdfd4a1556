"""Pass-through calls to a claimcheck serving legacy SSE, as a claimcheck in front sends them: answered on its SDK
path, a stored output written on the client's event stream from its file, never held whole (it took the inner
+1.4 GiB for 100 MiB when read whole); the answers are what a pass-through gets on every transport; and a real
chain over SSE (claimcheck → claimcheck over SSE → server) stores the output whole and identical."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from server import sdk_compat
from server.downstream.chain import PASSTHROUGH
from tests.support.passthrough_cases import CALLS, CUT_MIB, check_shapes, check_stored_big, shape
from tests.support.processes import PYTHON, announcing, demo_server_entry, peak, program_entry, write_config
from tests.support.servers.raw_downstream import fast_text_sha256
from tests.support.wire import MIB, serving

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SETTINGS = {"api": {"enabled": False}, "asyncTimeoutSecs": 0.5, "asyncTokenThreshold": 2000, "startupWaitSecs": 60}
URL = r"(http://127\.0\.0\.1:\d+/sse)"
MARK = cast(types.RequestParamsMeta, {PASSTHROUGH: True})


def _config(directory: Path, settings: dict[str, Any]) -> Path:
    directory.mkdir()
    servers = {"raw": program_entry("raw_downstream"), "demo": demo_server_entry()}
    return write_config(directory, {"mcpServers": servers, "settings": {**SETTINGS, **settings}})


@asynccontextmanager
async def inner_sse(directory: Path, settings: dict[str, Any]) -> AsyncIterator[tuple[str, int]]:
    """A claimcheck serving legacy SSE in front of the raw and demo servers: its URL and pid."""
    command = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(_config(directory, settings))]
    async with announcing([*command, "--transport", "sse", "--port", "0"], URL, within=60) as started:
        yield started.url, started.process.pid


@asynccontextmanager
async def client(url: str) -> AsyncIterator[ClientSession]:
    """The SDK's SSE client, as the claimcheck in front uses it (one event may be as long as a result)."""
    sdk_compat.lift_legacy_sse_event_cap()
    async with (
        sse_client(url, timeout=30, sse_read_timeout=120) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _pass_through(session: ClientSession, name: str, arguments: dict[str, Any]) -> bytes:
    """A pass-through call's result, as its answer's JSON."""
    result = await session.call_tool(name, arguments, meta=MARK)
    return json.dumps({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}).encode()


async def test_pass_through_answers_over_sse_are_what_a_pass_through_gets(tmp_path: Path) -> None:
    with anyio.fail_after(240):
        async with inner_sse(tmp_path / "inner", {"maxOutputBytes": CUT_MIB * MIB}) as (url, _), client(url) as session:
            answers = [await _pass_through(session, name, args) for name, args in CALLS]
    check_shapes([shape(answer) for answer in answers])


async def test_a_long_pass_through_output_over_sse_is_sent_from_its_file_in_bounded_memory(tmp_path: Path) -> None:
    with anyio.fail_after(240):
        async with inner_sse(tmp_path / "inner", {}) as (url, pid), client(url) as session:
            await _pass_through(session, "raw__fast", {"mib": 20})  # the spool's path and its threads, warmed up
            idle = peak(pid)
            answer = await _pass_through(session, "raw__fast", {"mib": 48})
            grew = peak(pid) - idle
    text = json.loads(answer)["result"]["content"][0]["text"].encode()
    assert (hashlib.sha256(text).hexdigest(), len(text)) == fast_text_sha256(48)
    assert grew < 64 * MIB, f"the inner claimcheck grew by {grew / MIB:.0f} MiB"


async def test_a_large_output_through_a_chain_over_sse_arrives_whole_and_identical(tmp_path: Path) -> None:
    with anyio.fail_after(240):
        async with inner_sse(tmp_path / "inner", {"asyncTimeoutSecs": 600}) as (url, _):
            outer = tmp_path / "outer"
            outer.mkdir()
            settings = {"api": {"enabled": False}, "asyncTimeoutSecs": 600, "startupWaitSecs": 60}
            async with serving(outer, "on", settings, {"inner": {"url": url, "transport": "sse"}}) as wire:
                answer = await wire.call("inner__raw__big", {"mib": 40})
    check_stored_big(answer, outer, 40)
