"""The pool changed while it runs (`Pool.reconfigure`, what a reloaded config does): servers stop and start one by
one, a replacement keeps its server's place, the others are left alone. In-process servers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from server.config import parse_config
from server.downstream.connect import DownstreamSpec
from server.downstream.inflight import OutsideRoots
from server.downstream.pool import Pool
from server.downstream.relay import no_roots
from server.downstream.tool_call import call_tool

pytestmark = [pytest.mark.anyio]


def named(label: str) -> MCPServer:
    server = MCPServer(label)

    @server.tool(name=f"{label}_tool", structured_output=False)
    def tool() -> str:
        return label

    return server


async def no_roots_outside() -> Any:
    return no_roots()


def spec(name: str, server: MCPServer) -> DownstreamSpec:
    config = parse_config({"mcpServers": {name: {"command": "in-process"}}})
    return DownstreamSpec(name, config.mcp_servers[name], target=lambda: server)


def pool_of(
    *, many_clients: bool = False, outside_roots: Callable[[str], OutsideRoots] | None = None, **servers: MCPServer
) -> Pool:
    config = parse_config({"mcpServers": {name: {"command": "in-process"} for name in servers}})
    specs = [spec(name, server) for name, server in servers.items()]
    return Pool(config, specs, many_clients=many_clients, outside_roots=outside_roots)


async def routes_once(pool: Pool, changed: list[anyio.Event], want: set[str]) -> set[str]:
    while set(pool.routes) != want:
        changed[0] = anyio.Event()
        await changed[0].wait()
    return set(pool.routes)


async def test_a_replaced_server_keeps_its_place_an_added_one_comes_last_and_the_untouched_one_is_the_same() -> None:
    prepared: list[str] = []

    def outside_roots(server: str) -> OutsideRoots:
        prepared.append(server)
        return no_roots_outside

    pool = pool_of(a=named("one"), b=named("b"), c=named("c"), many_clients=True, outside_roots=outside_roots)
    changed = [anyio.Event()]

    async def heard() -> None:
        changed[0].set()

    pool.listeners.append(heard)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run)
            await pool.listable()
            a, b, c = pool.downstreams
            config = parse_config({"mcpServers": {name: {"command": "in-process"} for name in ("a", "b", "d")}})
            why = {"a": "a changed", "c": "c was removed"}
            started = await pool.reconfigure(config, why, [spec("a", named("two")), spec("d", named("d"))])
            routes = await routes_once(pool, changed, {"a__two_tool", "b__b_tool", "d__d_tool"})
            answer: Any = await call_tool(pool.downstreams[0], "two_tool", {}, None)
            tg.cancel_scope.cancel()
    assert routes == {"a__two_tool", "b__b_tool", "d__d_tool"}
    assert [d.name for d in pool.downstreams] == ["a", "b", "d"]
    assert pool.downstreams[1] is b and b.state == "ready"
    assert (
        pool.downstreams[0] is not a
        and [d.name for d in started] == ["a", "d"]
        and prepared == ["a", "b", "c", "a", "d"]
    )
    assert (a.state, a.last_error, c.state, c.last_error) == ("down", "a changed", "down", "c was removed")
    assert all(d.in_flight.fixed_roots is not None for d in started)  # several clients: as the first servers
    assert answer.content[0].text == "two"
