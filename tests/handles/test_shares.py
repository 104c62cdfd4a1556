"""Fair shares of running calls (`settings.limits.calls`, `server.handles.shares`): a principal at its share is
refused in one line naming the setting, and another principal is served as before."""

from __future__ import annotations

import anyio
import pytest

from tests.support.handles import Downstream, client_of, handles_proxy, start_in_background
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio


async def test_a_principal_at_its_share_of_running_calls_is_refused_and_another_is_served() -> None:
    down = Downstream()
    async with handles_proxy(down, {"limits": {"calls": 2}}) as proxy:
        async with client_of(proxy) as mallory, client_of(proxy) as alice:
            with anyio.fail_after(10):
                await start_in_background(mallory, text="one")
                await start_in_background(mallory, text="two")
                refused = await mallory.call_tool("down__gated", {"text": "three", "background": True})
                served = await start_in_background(alice, text="hers")
                down.release.set()
                waited = await alice.call_tool("wait_for_tool_output", {"handles": [served]})
    assert refused.is_error
    assert 'This principal has 2 calls running, at most 2 ("limits.calls")' in text_of(refused)
    assert not waited.is_error and "hers" in text_of(waited)
