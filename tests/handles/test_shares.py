"""Fair shares of running calls (`settings.limits.calls`, `server.handles.shares`): a principal at its share is
refused in one line naming the setting, and another principal is served as before."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import anyio
import pytest
from mcp import Client

from server.handles.calls import Call, Description
from server.handles.owners import Entrance, principal
from server.handles.session import Session
from server.proxy import Proxy
from tests.support.handles import Downstream, client_of, client_with_token, handles_proxy, start_in_background
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio


def mallory(proxy: Proxy, token: str) -> AbstractAsyncContextManager[Client]:
    """One connection of Mallory's: with her token, or without any (every client without one is one principal)."""
    return client_with_token(proxy, token) if token else client_of(proxy)


@pytest.mark.parametrize("token", ["mallory", ""], ids=["her-token", "no-token"])
async def test_a_principal_at_its_share_of_running_calls_is_refused_however_many_connections_and_another_is_served(
    token: str,
) -> None:
    """Two connections of one principal hold one share: connections cost nothing to make. Without a token, two
    connections are one principal too; a token's principal keeps its own share."""
    down = Downstream()
    async with handles_proxy(down, {"limits": {"calls": 2}}) as proxy:
        async with (
            mallory(proxy, token) as first,
            mallory(proxy, token) as second,
            client_with_token(proxy, "alice") as alice,
        ):
            with anyio.fail_after(10):
                await start_in_background(first, text="one")
                await start_in_background(second, text="two")
                refused = await second.call_tool("down__gated", {"text": "three", "background": True})
                served = await start_in_background(alice, text="hers")
                down.release.set()
                waited = await alice.call_tool("wait_for_tool_output", {"handles": [served]})
    assert refused.is_error
    assert 'This principal has 2 calls running, at most 2 ("limits.calls")' in text_of(refused)
    assert not waited.is_error and "hers" in text_of(waited)


async def test_a_principal_past_its_sessions_loses_the_longest_unused_idle_one_never_one_with_a_call_running() -> None:
    down = Downstream()
    async with handles_proxy(down, {"limits": {"sessions": 2}}) as proxy:
        sessions = proxy.sessions

        def opened(owner: str) -> Session:
            session = sessions.find(Entrance(None, owner, None), create=True)
            assert session is not None
            return session

        with anyio.fail_after(10):
            first, busy = opened(principal("Bearer a", "agent 0")), opened(principal("Bearer a", "agent 1"))
            handle = f"{busy.id}/call"
            busy.calls[handle] = Call(Description(handle, "down__gated", "down", "gated", {}))  # running
            bobs = [opened(principal("Bearer b", f"agent {n}")) for n in range(2)]
            third = opened(principal("Bearer a", "agent 2"))
            await anyio.wait_all_tasks_blocked()
            ended_first = first.closed
            fourth = opened(principal("Bearer a", "agent 3"))
            await anyio.wait_all_tasks_blocked()
            assert ended_first and third.closed  # the longest unused idle session went each time
            assert not busy.closed and not fourth.closed  # never one with a call running
            assert not any(bob.closed for bob in bobs)  # another principal's sessions are its own count
            del busy.calls[handle]  # it never ran: nothing to wait for as the proxy stops


async def test_a_principal_past_its_stored_bytes_is_refused_a_new_call_and_another_is_served() -> None:
    down = Downstream()
    async with handles_proxy(down, {"limits": {"storedBytes": 100_000}}) as proxy:
        async with client_with_token(proxy, "mallory") as mallory, client_with_token(proxy, "alice") as alice:
            with anyio.fail_after(10):
                first = await mallory.call_tool("down__big", {"lines": 2500})  # ~140 kB: stored
                refused = await mallory.call_tool("down__echo", {"text": "more"})
                served = await alice.call_tool("down__big", {"lines": 2500})
    assert "too large" in text_of(first) and "too large" in text_of(served)
    assert refused.is_error
    assert 'at most 0.1 MiB ("limits.storedBytes")' in text_of(refused), text_of(refused)


async def test_a_principal_past_its_waits_is_refused_one_more_and_another_waits_as_before() -> None:
    down = Downstream()
    async with handles_proxy(down, {"limits": {"waits": 1}}) as proxy:
        async with client_with_token(proxy, "mallory") as mallory, client_with_token(proxy, "alice") as alice:
            with anyio.fail_after(10):
                his = await start_in_background(mallory, text="his")
                hers = await start_in_background(alice, text="hers")
                waited: list[str] = []
                async with anyio.create_task_group() as tg:

                    async def wait(client: Client, handle: str) -> None:
                        waited.append(text_of(await client.call_tool("wait_for_tool_output", {"handles": [handle]})))

                    tg.start_soon(wait, mallory, his)
                    await anyio.wait_all_tasks_blocked()  # his first wait is waiting
                    refused = await mallory.call_tool("wait_for_tool_output", {"handles": [his]})
                    tg.start_soon(wait, alice, hers)
                    await anyio.wait_all_tasks_blocked()
                    down.release.set()
    assert refused.is_error and 'at most 1 ("limits.waits")' in text_of(refused), text_of(refused)
    assert len(waited) == 2 and all("1 finished" in text for text in waited), waited
