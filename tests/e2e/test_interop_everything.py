"""claimcheck as a real process in front of the real `@modelcontextprotocol/server-everything` from npm."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc
import mcp_types as types
import pytest
from anyio.streams.memory import MemoryObjectSendStream
from anyio.streams.text import TextReceiveStream
from mcp import Client, StdioServerParameters

from tests.support import peers

pytestmark = [pytest.mark.anyio, pytest.mark.interop, pytest.mark.subprocess]

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 60  # python, then node and npm's module tree, on a cold cache
CALL_S = 60
EXIT_S = 30
EVERYTHING_TOOLS = frozenset(
    {
        "echo",
        "get-annotated-message",
        "get-env",
        "get-resource-links",
        "get-resource-reference",
        "get-structured-content",
        "get-sum",
        "get-tiny-image",
        "gzip-file-as-resource",
        "toggle-simulated-logging",
        "toggle-subscriber-updates",
        "trigger-long-running-operation",
        "simulate-research-query",
    }
)
_SERVING = re.compile(r"claimcheck: serving MCP over streamable HTTP at (http://\S+/mcp)")


def _serve_args(config: Path, *extra: str) -> list[str]:
    return ["-m", "server", "serve", "--config", str(config), "--no-api", *extra]


@asynccontextmanager
async def claimcheck_over_stdio(config: Path, mode: Literal["legacy", "auto"]) -> AsyncIterator[Client]:
    """A client connected to `claimcheck serve` running as a child process on stdio."""
    params = StdioServerParameters(command=sys.executable, args=_serve_args(config), cwd=REPO_ROOT)
    with anyio.fail_after(STARTUP_S + CALL_S + EXIT_S):
        async with Client(params, mode=mode) as client:
            yield client


@asynccontextmanager
async def claimcheck_over_http(config: Path) -> AsyncIterator[tuple[str, anyio.abc.Process]]:
    """Run `claimcheck serve --transport http` on a port the OS picks; yield its URL, then SIGTERM it."""
    command = [sys.executable, *_serve_args(config, "--transport", "http", "--port", "0")]
    stderr_tail: deque[str] = deque(maxlen=50)
    async with (
        await anyio.open_process(
            command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        ) as process,
        anyio.create_task_group() as tg,
    ):
        found, url_stream = anyio.create_memory_object_stream[str](1)
        assert process.stderr is not None
        tg.start_soon(_read_stderr, process.stderr, found, stderr_tail)
        try:
            with anyio.fail_after(STARTUP_S), url_stream:
                try:
                    url = await url_stream.receive()
                except anyio.EndOfStream:
                    pytest.fail(f"claimcheck exited before serving HTTP; stderr:\n{''.join(stderr_tail)}")
            yield url, process
        finally:
            process.terminate()
            with anyio.fail_after(EXIT_S, shield=True):
                await process.wait()
            tg.cancel_scope.cancel()  # a downstream that outlived claimcheck may still hold its stderr open


async def _read_stderr(
    stderr: anyio.abc.ByteReceiveStream, found: MemoryObjectSendStream[str], tail: deque[str]
) -> None:
    """Send the URL of the "serving MCP" line, and keep draining stderr so the child never blocks on it."""
    pending = ""
    async with found:
        async for chunk in TextReceiveStream(stderr):
            *lines, pending = (pending + chunk).split("\n")
            for line in lines:
                tail.append(line + "\n")
                if (match := _SERVING.search(line)) is not None:
                    found.send_nowait(match.group(1))


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_everything_tools_are_listed_only_under_the_ev_prefix(everything_config: Path) -> None:
    async with claimcheck_over_stdio(everything_config, "legacy") as client:
        with anyio.fail_after(CALL_S):
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert {"ev__echo", "ev__get-sum", "ev__trigger-long-running-operation"} <= tools.keys()
    assert not EVERYTHING_TOOLS & tools.keys(), "a downstream tool is listed without its prefix"
    assert {"a", "b"} <= tools["ev__get-sum"].input_schema["properties"].keys()


async def test_get_sum_through_claimcheck_returns_42(everything_config: Path) -> None:
    async with claimcheck_over_stdio(everything_config, "legacy") as client:
        with anyio.fail_after(CALL_S):
            result = await client.call_tool("ev__get-sum", {"a": 2, "b": 40})

    assert not result.is_error, _text(result)
    assert "42" in _text(result)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_long_running_operation_relays_its_progress_then_its_result(
    everything_config: Path, mode: Literal["legacy", "auto"]
) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with claimcheck_over_stdio(everything_config, mode) as client:
        with anyio.fail_after(CALL_S):
            result = await client.call_tool(
                "ev__trigger-long-running-operation", {"duration": 2, "steps": 4}, progress_callback=on_progress
            )

    assert not result.is_error, _text(result)
    assert "Long running operation completed" in _text(result)
    assert len(seen) >= 3, seen
    assert all(total == 4 for _, total in seen), seen
    progress = [p for p, _ in seen]
    assert progress == sorted(set(progress)), f"progress must rise: {seen}"


async def test_an_auto_mode_client_speaks_2026_07_28_to_claimcheck_and_reaches_everything(
    everything_config: Path,
) -> None:
    async with claimcheck_over_stdio(everything_config, "auto") as client:
        with anyio.fail_after(CALL_S):
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("ev__echo", {"message": "through the modern era"})
        protocol = client.protocol_version

    assert protocol == "2026-07-28"
    assert "ev__get-sum" in names
    assert "Echo: through the modern era" in _text(result)


async def test_get_sum_through_claimcheck_over_streamable_http_returns_42(everything_config: Path) -> None:
    async with claimcheck_over_http(everything_config) as (url, process):
        with anyio.fail_after(CALL_S):
            async with Client(url) as client:
                result = await client.call_tool("ev__get-sum", {"a": 2, "b": 40})

    assert url.startswith("http://127.0.0.1:")
    assert process.returncode in (0, -signal.SIGTERM), "claimcheck crashed instead of stopping on SIGTERM"
    assert not result.is_error, _text(result)
    assert "42" in _text(result)


def test_a_missing_node_skips_the_interop_tests_on_a_developer_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CI", raising=False)

    with pytest.raises(pytest.skip.Exception, match="'node' is not on PATH"):
        peers._require("node")


def test_a_missing_node_fails_the_interop_tests_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("CI", "true")

    with pytest.raises(RuntimeError, match="CI is set"):
        peers._require("node")
