"""Handles through claimcheck as a real process in front of the real `@modelcontextprotocol/server-everything`."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.interop, pytest.mark.subprocess]

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 60  # python, then node and npm's module tree, on a cold cache
CALL_S = 60  # one call; a wait_for_tool_output blocks up to waitMaxSecs (50 s by default)
EXIT_S = 30
HANDLE = r"session-[0-9a-f]{32}/[0-9a-f]{32}"
RUNNING = re.compile(  # claimcheck has no extraction endpoint here and the client does not sample: no `extract`
    r'^Tool ev__trigger-long-running-operation is running in the background \(handle: "(' + HANDLE + r')"\)\.\n'
    r'Call wait_for_tool_output\(handles = \["\1"\]\) to wait for it, or go on with other work\.\n'
    r'When it is ready, search it with Grep\(file = "\1", regex = "what you look for"\) or read it with '
    r'Read\(file = "\1", start = 0, lines = 100\); if it is JSON, tool_output\(handle = "\1", mode = "json"\) '
    r"shows its shape\.$"
)
TOO_LARGE = re.compile(
    r"^Tool output is too large \((\d+) bytes, (\d+) lines?, (~?\d+) tokens\)\.\n"
    r"No LLM is available here, so read it with these:\n"
    r'- Grep\(file = "(' + HANDLE + r')", regex = "\w+"\) finds the lines that match a regular expression\.\n'
    r'- Read\(file = "\4", start = 0, lines = 100\) reads numbered lines\.\n'
    r'- tool_output\(handle = "\4", mode = "slice", slice = \{"anchor": "\w+", "window": 2000\}\) '
    r"reads the characters around a match, however long its line\.$"
)
SLICE_CHARS = 20_000  # ~6 000 tokens of "wordNNNNN" text: under the 10 000-token threshold


@asynccontextmanager
async def claimcheck_over_stdio(config: Path) -> AsyncIterator[Client]:
    """A legacy client connected to `claimcheck serve` running as a child process on stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server", "serve", "--config", str(config), "--no-api"], cwd=REPO_ROOT
    )
    with anyio.fail_after(STARTUP_S + 2 * CALL_S + EXIT_S):  # each test also bounds its own steps
        async with Client(params, mode="legacy") as client:
            yield client


def first_text(result: types.CallToolResult) -> str:
    """The first item, which is claimcheck's message (a status footer may follow it)."""
    item = result.content[0]
    assert isinstance(item, types.TextContent), result
    return item.text


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_a_long_running_operation_hands_off_and_wait_returns_its_result(everything_config: Path) -> None:
    async with claimcheck_over_stdio(everything_config) as client:
        with anyio.fail_after(CALL_S):
            first = await client.call_tool("ev__trigger-long-running-operation", {"duration": 8, "steps": 8})
        match = RUNNING.match(first_text(first))
        assert match, text_of(first)
        handle = match.group(1)

        with anyio.fail_after(CALL_S):  # the operation takes 8 s; each wait blocks up to 50 s
            while True:
                waited = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
                assert not waited.is_error, text_of(waited)
                if f'"{handle}" ev__trigger-long-running-operation: running' not in text_of(waited):
                    break
            raw = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})

    assert f'"{handle}" ev__trigger-long-running-operation: ready' in text_of(waited)
    assert "Long running operation completed. Duration: 8 seconds, Steps: 8." in text_of(waited)
    assert not raw.is_error, text_of(raw)
    assert first_text(raw) == (
        f"ABSTRACT FROM TOOL OUTPUT ev__trigger-long-running-operation WITH HANDLE {handle}, STRATEGY:raw:\n\n"
        "Long running operation completed. Duration: 8 seconds, Steps: 8."
    )


async def test_a_300_kb_echo_is_stored_whole_and_read_back_through_tool_output(everything_config: Path) -> None:
    message = " ".join(f"word{i}" for i in range(32_000))  # varied words: ~100 000 tokens, not a few
    assert len(message) >= 300_000
    expected = "Echo: " + message

    async with claimcheck_over_stdio(everything_config) as client:

        async def tool_output(handle: str, **args: Any) -> str:
            result = await client.call_tool("tool_output", {"handle": handle, **args})
            assert not result.is_error, text_of(result)[:2000]
            return first_text(result)

        with anyio.fail_after(CALL_S):
            short = await client.call_tool("ev__echo", {"message": "hi"})
            assert text_of(short) == "Echo: hi"  # the prefix the stored output must carry
            big = await client.call_tool("ev__echo", {"message": message})
        match = TOO_LARGE.match(first_text(big))
        assert match, text_of(big)[:2000]
        size, lines, tokens, handle = match.groups()

        with anyio.fail_after(CALL_S):
            truncated = await tool_output(handle, mode="truncate")
            pieces = []
            for start in range(0, len(expected), SLICE_CHARS):
                body = await tool_output(handle, mode="slice", slice={"start": start, "length": SLICE_CHARS})
                header, piece = body.split("\n\n", 1)[1].split("\n", 1)
                end = min(start + SLICE_CHARS, len(expected))
                assert header == f"[characters {start}-{end} of {len(expected)}]"
                pieces.append(piece)

    assert int(size) == len(expected.encode())
    assert int(lines) == 1
    assert int(tokens.lstrip("~")) > 10_000
    assert not big.is_error
    assert truncated.startswith(f"ABSTRACT FROM TOOL OUTPUT ev__echo WITH HANDLE {handle}, STRATEGY:truncate:\n\n")
    assert "Echo: word0 word1" in truncated
    assert "".join(pieces) == expected
