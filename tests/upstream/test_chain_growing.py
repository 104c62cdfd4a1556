"""A long output through a chain (claimcheck → claimcheck → server) is passed on by the inner claimcheck as it
arrives: the outer gets it whole and identical, an output that breaks off reaches the outer as an error, and the
inner's answer has begun before its server has finished writing."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from server.downstream.chain import PASSTHROUGH
from tests.support.processes import PYTHON, program_entry, write_config
from tests.support.servers.raw_downstream import big_text_pieces, big_text_sha256
from tests.support.wire import MIB, serving

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

HANDLE = re.compile(r'handle = "(session-[0-9a-f]{32}/[0-9a-f]{32})"')
SETTINGS = {"api": {"enabled": False}, "asyncTimeoutSecs": 600, "startupWaitSecs": 60}
HALF_MIB = 20  # past the 16 MiB a spool keeps whole: the inner follows the output from there


def inner_entry(directory: Path, servers: dict[str, Any]) -> dict[str, Any]:
    """A claimcheck in front of `servers`, as the outer's server."""
    directory.mkdir()
    config = write_config(directory, {"mcpServers": servers, "settings": {**SETTINGS, "root": str(directory / "out")}})
    return {"command": PYTHON, "args": ["-m", "server", "serve", "--no-api", "--config", str(config)]}


def outer_directory(tmp_path: Path) -> Path:
    directory = tmp_path / "outer"
    directory.mkdir()
    return directory


def stored(root: Path, text: str) -> Path:
    """The file of the handle the outer's answer names."""
    match = HANDLE.search(text)
    assert match is not None, text[:500]
    (run,) = root.glob("claimcheck-run-*")
    return run / match.group(1)


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stored_file:
        while block := stored_file.read(MIB):
            digest.update(block)
    return digest.hexdigest()


async def test_a_large_output_through_a_chain_arrives_whole_and_identical(tmp_path: Path) -> None:
    inner = inner_entry(tmp_path / "inner", {"raw": program_entry("raw_downstream")})
    with anyio.fail_after(240):
        async with serving(outer_directory(tmp_path), "on", SETTINGS, {"inner": inner}) as wire:
            answer = await wire.call("inner__raw__big", {"mib": 40})
    result = answer["result"]
    text = result["content"][0]["text"]
    assert result.get("isError", False) is False, text[:500]
    assert text.startswith(f"Tool output is too large ({40 * MIB} bytes, ")
    assert sha256_of_file(stored(tmp_path / "outer" / "out", text)) == big_text_sha256(40)[0]


@pytest.mark.parametrize("end", ["break", "die"])
async def test_a_server_that_breaks_off_mid_output_gives_the_chain_an_error_not_a_truncated_success(
    tmp_path: Path, end: str
) -> None:
    gate = tmp_path / "gate"
    gate.touch()  # the server goes on (and breaks off) at once
    inner = inner_entry(tmp_path / "inner", {"halt": program_entry("halting_downstream")})
    with anyio.fail_after(240):
        async with serving(outer_directory(tmp_path), "on", SETTINGS, {"inner": inner}) as wire:
            answer = await wire.call("inner__halt__halting", {"mib": HALF_MIB, "gate": str(gate), "end": end})
    result = answer["result"]
    assert result["isError"] is True, result["content"][0]["text"][:500]


def whole_text_sha256() -> str:
    digest = hashlib.sha256()
    for _ in range(2):
        for piece in big_text_pieces(HALF_MIB):
            digest.update(piece.encode())
    return digest.hexdigest()


async def test_the_inner_claimcheck_begins_its_answer_before_its_server_has_finished_the_output(
    tmp_path: Path,
) -> None:
    """The server writes half its output and waits for the gate: the inner's answer line must be well under way
    before the gate opens (store-and-forward would write nothing), then end whole."""
    gate = tmp_path / "gate"
    servers = {"halt": program_entry("halting_downstream")}
    with anyio.fail_after(240):
        async with serving(tmp_path, "on", SETTINGS, servers) as wire:
            call = {"name": "halt__halting", "arguments": {"mib": HALF_MIB, "gate": str(gate)}}
            ident = await wire.send("tools/call", {**call, "_meta": {PASSTHROUGH: True}})
            with anyio.fail_after(120):  # the server waits for the gate until this has arrived
                received = await wire.peek(8 * MIB)
            begun = received.rsplit(b"\n", 1)[-1]  # the line under way (notifications before it have ended)
            assert begun.startswith(b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{' % ident)
            assert len(begun) > 4 * MIB, "most of what the server wrote has been passed on while it waits"
            gate.touch()
            answer = await wire.answer(ident)
    text = answer["result"]["content"][0]["text"]
    assert hashlib.sha256(text.encode()).hexdigest() == whole_text_sha256()


async def test_a_pass_through_cancelled_while_its_answer_is_under_way_ends_it_as_an_error_and_the_inner_goes_on(
    tmp_path: Path,
) -> None:
    """A line cannot be taken back: cancelled while the server still writes, it ends at once as an error (the
    server's output, once finished, is dropped), and the next call is answered."""
    gate = tmp_path / "gate"
    servers = {"halt": program_entry("halting_downstream")}
    with anyio.fail_after(240):
        async with serving(tmp_path, "on", SETTINGS, servers) as wire:
            call = {"name": "halt__halting", "arguments": {"mib": HALF_MIB, "gate": str(gate)}}
            ident = await wire.send("tools/call", {**call, "_meta": {PASSTHROUGH: True}})
            with anyio.fail_after(120):
                await wire.peek(8 * MIB)
                await wire.send("notifications/cancelled", {"requestId": ident}, notify=True)
                cancelled = await wire.answer(ident)  # the gate is still shut: the line ended by itself
            gate.touch()
            small = {"name": "halt__halting", "arguments": {"mib": 0.25, "gate": str(gate)}}
            later = await wire.answer(await wire.send("tools/call", {**small, "_meta": {PASSTHROUGH: True}}))
    result = cancelled["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].endswith(
        "\n[claimcheck] the request was cancelled while its output was passed on"
    )
    assert len(later["result"]["content"][0]["text"].encode()) == 2 * MIB // 4
