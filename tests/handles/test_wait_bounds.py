"""`wait_for_tool_output` does bounded work whatever a client sends: a handle named many times is waited for and
answered once, and more than 64 handles are refused by the tool's schema."""

from __future__ import annotations

import anyio
import pytest

from server.handles.own_registry import WAIT_HANDLES_MAX
from tests.support.handles import Downstream, client_of, handles_proxy, start_in_background
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
