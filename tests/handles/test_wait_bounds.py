"""`wait_for_tool_output` does bounded work whatever a client sends: a handle named many times is waited for and
answered once, and more than 64 handles are refused by the tool's schema."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from extraction import count_tokens
from server.handles.own_registry import WAIT_HANDLES_MAX
from tests.support.handles import THRESHOLD, Downstream, client_of, handles_proxy, start_in_background
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio


async def test_a_handle_named_many_times_is_answered_once() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client, text="once")
            down.release.set()
            waited = await client.call_tool("wait_for_tool_output", {"handles": [handle] * WAIT_HANDLES_MAX})
    assert not waited.is_error
    assert text_of(waited).count(f'"{handle}" down__gated: ready') == 1
    assert [c.text for c in waited.content].count("once") == 1  # type: ignore[union-attr]


async def test_more_handles_than_the_bound_are_refused_naming_it() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client, text="kept")
            refused = await client.call_tool("wait_for_tool_output", {"handles": [handle] * (WAIT_HANDLES_MAX + 1)})
            down.release.set()
    assert refused.is_error
    assert "Invalid arguments for wait_for_tool_output" in text_of(refused)
    assert f"at most {WAIT_HANDLES_MAX} items" in text_of(refused)


async def test_the_answer_for_the_most_handles_stays_under_the_token_threshold() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(60):
            handles = [await start_in_background(client, text=f"{n} " + "word " * 900) for n in range(WAIT_HANDLES_MAX)]
            down.release.set()
            calls = proxy.sessions.live.copy().pop().calls
            for handle in handles:  # settling runs in worker threads: wait for each call, not for quiet tasks
                await calls[handle].finished.wait()
            waited = await client.call_tool("wait_for_tool_output", {"handles": handles})
            listed = await client.call_tool("list_tool_outputs", {})
    assert not waited.is_error
    texts = [c.text for c in waited.content if isinstance(c, types.TextContent)]
    answer = "\n".join(t for t in texts if not t.startswith("[claimcheck]"))  # the status footer: bounded apart
    assert count_tokens(answer) <= THRESHOLD, count_tokens(answer)
    assert "did not fit under the token threshold (1000)" in answer and "list_tool_outputs shows them" in answer
    assert f"{WAIT_HANDLES_MAX} finished" in answer and not listed.is_error
