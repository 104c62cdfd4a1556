"""While `wait_for_tool_output` waits for one running call, it reports that call's own progress (the server's
progress, total and message), not seconds; for several calls, seconds and a summary of theirs."""

from __future__ import annotations

import re

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.dispatcher import ProgressFnT

from server.handles import own_tools
from tests.support.proxies import proxied, text_of

pytestmark = pytest.mark.anyio

Seen = list[tuple[float, float | None, str | None]]
HANDLE = re.compile(r'handle: "(session-[0-9a-f]{32}/[0-9a-f]{32})"')


def copier() -> tuple[MCPServer, anyio.Event]:
    down = MCPServer("x")
    release = anyio.Event()

    @down.tool(structured_output=False)
    async def copy(ctx: Context, name: str = "a") -> str:
        await ctx.report_progress(3, 6, f"copied 3 of 6 files ({name})")
        await release.wait()
        return "copied"

    return down, release


async def waited_for_one(down: MCPServer, on_progress: ProgressFnT) -> types.CallToolResult:
    """One `copy` started in the background, then waited for by its handle, with `on_progress` told the progress."""
    async with proxied({"x": down}) as client:
        with anyio.fail_after(20):
            started = await client.call_tool("x__copy", {"background": True})
            handle = HANDLE.search(text_of(started))
            assert handle, text_of(started)
            return await client.call_tool(
                "wait_for_tool_output", {"handles": [handle.group(1)]}, progress_callback=on_progress
            )


async def test_waiting_for_one_call_relays_the_server_s_own_progress() -> None:
    down, release = copier()
    seen: Seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        if total is not None:
            release.set()  # the server's progress arrived: let the call finish

    waited = await waited_for_one(down, on_progress)
    assert "copied" in text_of(waited)
    assert (3, 6, "x__copy: copied 3 of 6 files (a)") in seen
    assert [p for p, _, _ in seen] == sorted({p for p, _, _ in seen})  # increasing, as MCP requires


async def test_waiting_for_several_calls_reports_seconds_and_their_progress() -> None:
    down, release = copier()
    seen: Seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        if message and "progress 3/6" in message:
            release.set()

    async with proxied({"x": down}) as client:
        with anyio.fail_after(20):
            handles = []
            for name in ("a", "b"):
                started = await client.call_tool("x__copy", {"name": name, "background": True})
                match = HANDLE.search(text_of(started))
                assert match, text_of(started)
                handles.append(match.group(1))
            await client.call_tool("wait_for_tool_output", {"handles": handles}, progress_callback=on_progress)
    summary = next(message for _, total, message in seen if message and "progress 3/6" in message)
    assert summary.startswith("waiting for 2 running outputs (x__copy progress 3/6")
    assert all(total is None for _, total, _ in seen)


async def test_the_first_report_is_sent_as_the_wait_starts_not_a_round_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that resets its timeout on progress hears from the wait at once; here a round lasts an hour, so
    only a report sent before the first round lets the call finish within the test's bound."""
    monkeypatch.setattr(own_tools, "PROGRESS_EVERY_S", 3600.0)
    down, release = copier()
    seen: Seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        release.set()

    waited = await waited_for_one(down, on_progress)
    assert "copied" in text_of(waited)
    assert seen


@pytest.mark.parametrize("handles", [None, []], ids=["left-out", "empty"])
async def test_an_empty_handles_list_waits_for_every_running_call_as_leaving_it_out_does(
    handles: list[str] | None,
) -> None:
    """Models write "all" as `[]` too: that is not "nothing is running"."""
    down, release = copier()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        release.set()  # it is waiting: let the call finish

    async with proxied({"x": down}) as client:
        with anyio.fail_after(20):
            started = await client.call_tool("x__copy", {"background": True})
            assert HANDLE.search(text_of(started)), text_of(started)
            args = {} if handles is None else {"handles": handles}
            waited = await client.call_tool("wait_for_tool_output", args, progress_callback=on_progress)
    assert "copied" in text_of(waited)
    assert "No outputs are running" not in text_of(waited)
