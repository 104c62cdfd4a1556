"""A server's scope (`server.downstream.scopes`): with several clients its first process is everyone's and hears
only `settings.roots`; "owner" and "session" give each owner or client connection a process of its own, started
on first use, stopped when idle or when its connection closes, refused past `maxInstances`; "auto" is shared until
the server asks for roots. The pool itself, with tests/support/servers/roots_server.py as a real subprocess."""

from __future__ import annotations

import time
from typing import Any

import anyio
import mcp_types as types
import pytest

from server.config import parse_config
from server.downstream.pool import Pool, Route
from server.downstream.scopes import Requester
from server.downstream.tool_call import call_tool
from server.errors import DownstreamUnavailable
from tests.support.processes import program_entry
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


def pool_of(scope: str, *, many: bool = True, one_principal: bool = False, **fields: Any) -> Pool:
    settings = fields.pop("settings", {})
    server = {**program_entry("roots_server"), "env": {"INSTANCE": "${CLAIMCHECK_INSTANCE}"}}
    config = parse_config({"mcpServers": {"fs": {**server, "scope": scope, **fields}}, "settings": settings})
    return Pool(config, many_clients=many, one_principal=one_principal)


def requester(connection: str, owner: str | None = None, roots: list[str] | None = None) -> Requester:
    """A client of its own principal (its owner, else its connection), as one with a token of its own is."""

    async def ask() -> types.ListRootsResult:
        listed = [types.Root(uri=uri) for uri in roots or []]  # type: ignore[arg-type]  # a str is a FileUrl
        return types.ListRootsResult(roots=listed)

    principal = owner or connection
    return Requester(connection, principal, principal, roots is not None, ask if roots is not None else None)


async def call(pool: Pool, tool: str, who: Requester) -> str:
    route = pool.route(f"fs__{tool}")
    assert isinstance(route, Route)
    routed = await pool.for_client(route, who)
    return text_of(await call_tool(routed.downstream, tool, {}, None))


async def started(pool: Pool, tg: anyio.abc.TaskGroup) -> None:
    await tg.start(pool.run)
    await pool.settled()


async def test_owner_scope_gives_each_owner_one_process_of_its_own_and_a_third_owner_reclaims_the_idlest() -> None:
    pool = pool_of("owner", maxInstances=2)
    alice_1, alice_2, bob = requester("c1", "alice"), requester("c2", "alice"), requester("c3", "bob")
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            first = await call(pool, "count", alice_1)
            second = await call(pool, "count", alice_2)
            other = await call(pool, "count", bob)
            carol = await call(pool, "count", requester("c4", "carol"))  # all taken: alice's, idle longest, stops
            again = await call(pool, "count", alice_1)  # then bob's
            status = pool.instances["fs"].status()
            tg.cancel_scope.cancel()
    assert first.startswith("count=1 ") and second.startswith("count=2 "), (first, second)  # one process for alice
    assert other.startswith("count=1 ") and carol.startswith("count=1 ") and again.startswith("count=1 ")
    assert first.split("instance=")[1] == second.split("instance=")[1] != other.split("instance=")[1]
    assert first.split("instance=")[1].startswith("owner-")
    assert status == {"scope": "owner", "instances": 2, "instancesStarted": 4, "instancesReclaimed": 2}


async def test_one_principal_gets_its_share_of_max_instances_however_many_sessions_it_names() -> None:
    pool = pool_of("owner", maxInstances=4)
    agents = [Requester(f"c{n}", f"principal:mallory:{n}", "principal:mallory", False) for n in range(3)]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            await call(pool, "count", agents[0])
            await call(pool, "count", agents[1])
            with pytest.raises(DownstreamUnavailable) as refused:
                await call(pool, "count", agents[2])
            served = await call(pool, "count", requester("c9", "principal:alice"))
            tg.cancel_scope.cancel()
    assert 'this principal has 2, its share ("maxInstancesPerPrincipal" 2 of "maxInstances" 4)' in str(refused.value)
    assert served.startswith("count=1 ")


async def test_where_every_client_is_one_principal_its_share_is_every_instance_unless_the_config_says_less() -> None:
    """Without tokens every client is one principal (`owners.ANONYMOUS`): half of `maxInstances` kept for no one
    else would only refuse its clients. A `maxInstancesPerPrincipal` given still applies."""
    pool = pool_of("session", one_principal=True, maxInstances=3)
    clients = [Requester(f"c{n}", f"c{n}", "anonymous", False) for n in range(3)]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            served = [await call(pool, "count", client) for client in clients]
            tg.cancel_scope.cancel()
    assert len({text.split("instance=")[1] for text in served}) == 3  # a process each, none refused
    given = parse_config({"mcpServers": {"fs": {"command": "x", "maxInstances": 3, "maxInstancesPerPrincipal": 2}}})
    assert given.mcp_servers["fs"].instances_per_principal(one_principal=True) == 2
    assert given.mcp_servers["fs"].instances_per_principal() == 2
    halves = parse_config({"mcpServers": {"fs": {"command": "x", "maxInstances": 3}}}).mcp_servers["fs"]
    assert (halves.instances_per_principal(), halves.instances_per_principal(one_principal=True)) == (2, 3)


async def test_a_process_serving_a_call_is_never_reclaimed_and_past_max_instances_all_busy_is_refused() -> None:
    pool = pool_of("owner", maxInstances=2)
    alice, bob = requester("c1", "alice"), requester("c2", "bob")
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            await call(pool, "count", alice)
            await call(pool, "count", bob)
            busy: list[Route] = []
            for who in (alice, bob):
                route = pool.route("fs__roots")
                assert isinstance(route, Route)
                busy.append(await pool.for_client(route, who))
                tg.start_soon(call_tool, busy[-1].downstream, "roots", {"after": 600}, None)
            while not all(routed.downstream.in_flight.busy for routed in busy):
                await anyio.wait_all_tasks_blocked()
                await anyio.lowlevel.checkpoint()
            with pytest.raises(DownstreamUnavailable) as refused:
                await call(pool, "count", requester("c3", "carol"))
            status = pool.instances["fs"].status()
            tg.cancel_scope.cancel()
    assert '2 are running, each serving a call (its "maxInstances")' in str(refused.value)
    assert status["instances"] == 2 and status["instancesReclaimed"] == 0


async def test_an_owners_process_hears_the_configured_roots_never_a_clients() -> None:
    pool = pool_of("owner", settings={"roots": ["/srv/configured"]})
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            heard = await call(pool, "roots", requester("c1", "alice", roots=["file:///home/alice/project"]))
            tg.cancel_scope.cancel()
    assert heard == "file:///srv/configured=None"


async def test_auto_is_shared_until_the_server_asks_for_roots_then_a_client_with_roots_gets_its_own() -> None:
    pool = pool_of("auto")
    with_roots = requester("a", roots=["file:///srv/a"])
    without = requester("b")
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            a_roots = await call(pool, "roots", with_roots)  # roots_server asks when told roots changed: the probe
            b_roots = await call(pool, "roots", without)
            a_count = await call(pool, "count", with_roots)
            b_count = await call(pool, "count", without)
            tg.cancel_scope.cancel()
    assert pool.instances["fs"].primary.asks_roots
    assert a_roots == "file:///srv/a=None"
    assert b_roots.startswith(f"error {types.METHOD_NOT_FOUND}: Roots not supported"), b_roots
    assert a_count.split("instance=")[1].startswith("session-") and b_count.endswith("instance=shared")


async def test_a_client_with_roots_gets_its_own_process_started_before_its_first_call() -> None:
    pool = pool_of("auto")
    with_roots, without = requester("a", roots=["file:///srv/a"]), requester("b")
    instances = pool.instances["fs"]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            await instances.primary.roots_known.wait()  # the probe: roots_server asks when told roots changed
            pool.start_early(without)
            assert instances.status()["instancesStarted"] == 0  # no roots: it keeps the shared process
            pool.start_early(with_roots)
            pool.start_early(with_roots)  # again (its roots changed): the process it has is kept
            early = instances.status()["instancesStarted"]
            count = await call(pool, "count", with_roots)
            roots = await call(pool, "roots", with_roots)
            tg.cancel_scope.cancel()
    assert instances.primary.asks_roots
    assert early == 1 and instances.status()["instancesStarted"] == 1  # the first call took the one started early
    assert count.split("instance=")[1].startswith("session-") and roots == "file:///srv/a=None"


async def test_with_one_client_every_scope_is_that_clients_one_process() -> None:
    pool = pool_of("session", many=False)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            counted = await call(pool, "count", requester("only"))
            tg.cancel_scope.cancel()
    assert counted.endswith("instance=shared") and pool.instances["fs"].status()["instancesStarted"] == 0


async def test_a_session_process_stops_when_idle_and_when_its_connection_closes_and_a_holder_hears_why() -> None:
    pool = pool_of("session", idleSecs=300)
    instances = pool.instances["fs"]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await started(pool, tg)
            route = pool.route("fs__count")
            assert route is not None
            idle = await pool.for_client(route, requester("idle"))
            closing = await pool.for_client(route, requester("closing"))
            await call_tool(idle.downstream, "count", {}, None)
            await call_tool(closing.downstream, "count", {}, None)
            instances.stop_idle(time.monotonic() + 299)  # not yet
            assert instances.status()["instances"] == 2
            instances.stop_idle(time.monotonic() + 301)
            pool.connection_closed("closing")
            while instances.status()["instances"] or idle.downstream.state != "down":
                await idle.downstream.state_changed()
            with pytest.raises(DownstreamUnavailable) as gone:
                await call_tool(idle.downstream, "count", {}, None)
            again = await call(pool, "count", requester("idle"))
            tg.cancel_scope.cancel()
    assert "the server's process for this client connection stopped (idle for 300 s)" in str(gone.value)
    assert again.startswith("count=1 ")  # a new process for the next call
    assert instances.status()["instancesStarted"] == 3
