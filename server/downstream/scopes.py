"""Whose world a server's process is: one for all clients, one per owner, or one per client connection.

With one client (stdio) every server runs once, for that client, and hears its roots. With several (HTTP, SSE,
the shared claimcheck) a server's first process (the one the pool lists tools from) is shared by all of them,
so it is given only `settings.roots` and never a client's; a server whose `scope` is "owner" or "session" gets a
process of its own per owner or per client connection, started by the first call that needs it, stopped once
idle for `idleSecs` (or when its connection closes), and refused past `maxInstances` with a clear error. One
principal (never counted by its `Claimcheck-Session` headers or connections) may hold at most its share
(`maxInstancesPerPrincipal`); when all `maxInstances` are taken and another principal needs one, the process
idle the longest of another principal is stopped for it (never one that is serving a call). An
"auto" server (the default) is shared until it asks for roots; then a client that declares roots gets a process
of its own, which hears that client's roots and no one else's, and a client without roots keeps the shared one.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Protocol

import anyio
import anyio.abc
import mcp_types as types

from server.config_vars import for_instance
from server.downstream.connect import DownstreamSpec
from server.downstream.inflight import OutsideRoots
from server.downstream.relay import Relay, no_roots
from server.downstream.roots_applied import roots_applied
from server.downstream.server import ROOTS_PROBE_S, Downstream
from server.downstream.spool import SpoolPolicy
from server.errors import DownstreamUnavailable

__all__ = ["Instances", "MakeDownstream", "Requester", "fixed_roots"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Requester:
    """Who a call is for, as the scopes see it."""

    connection: str
    """The client's connection (its MCP session); a sessionless client's claimcheck session."""
    owner: str
    """The owner key of the client's handles, else its connection's key."""
    principal: str
    """Whose share its processes count in: its session's (`server.handles.owners.principal_of`)."""
    declares_roots: bool
    ask_roots: OutsideRoots | None = None
    """How to ask this client for its roots outside any request (its connection's own channel), if it can be."""


@dataclass(eq=False)
class _Instance:
    key: str
    downstream: Downstream
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    connection: str | None = None
    """The connection it serves, for a "session" instance: it stops when that connection closes."""
    used: float = field(default_factory=time.monotonic)
    why: str = "claimcheck stopped"
    ready: anyio.Event = field(default_factory=anyio.Event)
    """Set once it is up and has had its roots and the chance to apply them (or the wait for that ended)."""
    principal: str = ""

    def last_used(self) -> float:
        return max(self.used, self.downstream.in_flight.idle_since)


def fixed_roots(roots: list[str]) -> OutsideRoots:
    """The answer a shared process gets to `roots/list`: `settings.roots`, or the spec's error when there are none."""
    listed = types.ListRootsResult(roots=[types.Root(uri=f"file://{path}") for path in roots])  # type: ignore[arg-type]

    async def answer() -> types.ListRootsResult | types.ErrorData:
        return listed if roots else no_roots()

    return answer


class MakeDownstream(Protocol):
    """Makes a process of a scope (not started), given what the proxy gives its server's first one."""

    def __call__(
        self,
        spec: DownstreamSpec,
        *,
        spool: SpoolPolicy | None,
        outside_roots: OutsideRoots | None,
        fixed_roots: OutsideRoots | None,
    ) -> Downstream: ...


class Instances:
    """The processes of one server beyond its first, each for one owner or one client connection."""

    def __init__(
        self, primary: Downstream, spec: DownstreamSpec, make: MakeDownstream, *, one_principal: bool = False
    ) -> None:
        """`one_principal`: every client is one principal, whose share is all of `maxInstances` unless
        `maxInstancesPerPrincipal` says otherwise."""
        self.primary = primary
        self._one_principal = one_principal
        self._spec = spec
        self._make = make
        self._live: dict[str, _Instance] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.started = 0  # instances made since start, for the status API
        self.reclaimed = 0  # stopped for another principal's call

    @property
    def scope(self) -> str:
        return self.primary.config.scope

    def key_for(self, requester: Requester) -> str | None:
        """The instance `requester`'s calls go to (None: the shared process)."""
        scope = self.scope
        if scope == "owner":
            return "owner:" + requester.owner
        if scope == "session" or (scope == "auto" and self.primary.asks_roots and requester.declares_roots):
            return "session:" + requester.connection
        return None

    def for_everyone(self) -> bool:
        """Whether every client's calls go to the shared process (the fast paths take only those). In the moment
        an "auto" server is given to ask for roots, a call the fast path takes goes to the shared process, which
        hears only the configured roots."""
        return self.scope == "shared" or (self.scope == "auto" and not self.primary.asks_roots)

    async def get(self, requester: Requester, tool: str, relay: Relay | None = None) -> Downstream:
        """The process for `requester`'s call, started now if it has none; past `maxInstances`, a
        DownstreamUnavailable that says so. An "auto" server just started is first given its moment to ask
        for roots (`Downstream.roots_known`), when the requester has roots to keep to itself; a process started
        now is waited for, its first roots question asked through `relay` (the request that caused it)."""
        primary = self.primary
        if self.scope == "auto" and requester.declares_roots and not primary.roots_known.is_set():
            with anyio.move_on_after(primary.connect_timeout + 2 * ROOTS_PROBE_S):
                await primary.first_attempt()
                if primary.state == "ready":
                    await primary.roots_known.wait()
        key = self.key_for(requester)
        if key is None:
            return self.primary
        instance = self._live.get(key)
        if instance is None:
            if self._tg is None:
                raise DownstreamUnavailable(self.primary.name, tool, "claimcheck is stopping")
            self._admit(key, requester.principal, tool)
            instance = self._start(key, requester)
            await self._started(instance.downstream, relay)
            instance.ready.set()
        elif not instance.ready.is_set():  # started early (`start_early`): its first call waits as the starter would
            await self._ready(instance, relay)
        instance.used = time.monotonic()
        return instance.downstream

    def start_early(self, requester: Requester) -> None:
        """A client whose roots are known came, or its roots changed: the process of its own that a server asking
        for roots gives it starts now, and has its roots before the client's first call (which waits for that)."""
        key = self.key_for(requester)
        if not (self.primary.asks_roots and requester.declares_roots) or key is None or not key.startswith("session:"):
            return
        if key in self._live or self._tg is None or len(self._live) >= self.primary.config.max_instances:
            return  # one running already, or none may start: the first call starts it, or says why not
        if sum(i.principal == requester.principal for i in self._live.values()) >= self._share():
            return  # past its share: the first call says so
        instance = self._start(key, requester)
        self._tg.start_soon(self._settle, instance)

    async def _settle(self, instance: _Instance) -> None:
        try:
            await self._started(instance.downstream, None)
        finally:
            instance.ready.set()

    async def _ready(self, instance: _Instance, relay: Relay | None) -> None:
        """Until an instance started early is ready; a roots question it asks meanwhile may go through `relay`."""
        downstream = instance.downstream
        with downstream.in_flight.track(relay), anyio.move_on_after(downstream.connect_timeout + ROOTS_PROBE_S):
            await instance.ready.wait()

    def _admit(self, key: str, principal: str, tool: str) -> None:
        """Room for one more process of `principal`: within its share, and within `maxInstances` (stopping
        another principal's process idle the longest when all are taken); else a DownstreamUnavailable."""
        config = self.primary.config
        share, idle = self._share(), f'one stops after {config.idle_secs:g} s idle ("idleSecs")'
        held = sum(1 for instance in self._live.values() if instance.principal == principal)
        if held >= share:
            raise DownstreamUnavailable(
                self.primary.name,
                tool,
                f"the server runs one process per {_unit(key)} and this principal has {held}, its share "
                f'("maxInstancesPerPrincipal" {share} of "maxInstances" {config.max_instances}); {idle}, '
                "or close a client, then try again",
            )
        if len(self._live) >= config.max_instances and not self._reclaim(principal):
            raise DownstreamUnavailable(
                self.primary.name,
                tool,
                f"the server runs one process per {_unit(key)} and {config.max_instances} are running, each "
                f'serving a call (its "maxInstances"); {idle} or when its call ends, then try again',
            )

    def _share(self) -> int:
        """How many processes one principal may hold (`maxInstancesPerPrincipal`)."""
        return self.primary.config.instances_per_principal(one_principal=self._one_principal)

    def _reclaim(self, principal: str) -> bool:
        """Stop the process of another principal that has been idle the longest (none serving a call)."""
        idle = [i for i in self._live.values() if i.principal != principal and not i.downstream.in_flight.busy]
        if not idle:
            return False
        oldest = min(idle, key=_Instance.last_used)
        self._stop(oldest, '"maxInstances" were all taken and another principal needed one; it was idle the longest')
        self.reclaimed += 1
        return True

    async def _started(self, downstream: Downstream, relay: Relay | None) -> None:
        """Until the new process is up, and has had its roots and the chance to apply them (a server that asks for
        them as it starts would otherwise serve the first call before the answer came, or before it applied it)."""
        with downstream.in_flight.track(relay), anyio.move_on_after(downstream.connect_timeout + ROOTS_PROBE_S):
            await downstream.first_attempt()
            if downstream.state == "ready" and self.primary.asks_roots:
                with anyio.move_on_after(ROOTS_PROBE_S):
                    await downstream.roots_answered.wait()
                if downstream.roots_answered.is_set():
                    await roots_applied(downstream, downstream.roots_mark)

    def _start(self, key: str, requester: Requester) -> _Instance:
        kind, _, who = key.partition(":")
        name = f"{kind}-{hashlib.sha256(who.encode()).hexdigest()[:16]}"  # stable for an owner across restarts
        session = key.startswith("session:")
        # A process of one client: its roots, asked in its calls or on its own channel; one owner's clients may be
        # in different projects: the configured roots only.
        downstream = self._make(
            replace(self._spec, config=for_instance(self._spec.config, name)),
            spool=self.primary.spool,
            outside_roots=requester.ask_roots if session else None,
            fixed_roots=None if session else self.primary.in_flight.fixed_roots,
        )
        connection = requester.connection if session else None
        instance = _Instance(key, downstream, connection=connection, principal=requester.principal)
        self._live[key] = instance
        self.started += 1
        assert self._tg is not None
        self._tg.start_soon(self._supervise, instance)
        logger.info("server %r: started a process for %s", self.primary.name, _unit(key))
        return instance

    async def _supervise(self, instance: _Instance) -> None:
        try:
            with instance.scope:
                await instance.downstream.run()
        finally:
            if self._live.get(instance.key) is instance:
                del self._live[instance.key]
            unit = _unit(instance.key)
            instance.downstream.retired(f"the server's process for this {unit} stopped ({instance.why})")

    def retire(self, why: str) -> None:
        """The server is being stopped for good (`Pool.reconfigure`): each process beyond the first says `why`."""
        for instance in self._live.values():
            instance.why = why

    def _stop(self, instance: _Instance, why: str) -> None:
        if self._live.get(instance.key) is instance:
            del self._live[instance.key]
        instance.why = why
        instance.scope.cancel()

    def connection_closed(self, connection: str) -> None:
        """A client connection closed: the process that was its own stops."""
        instance = self._live.get("session:" + connection)
        if instance is not None:
            self._stop(instance, "its client disconnected")

    def of_connection(self, connection: str) -> list[Downstream]:
        """The processes that hear `connection`'s roots: its own, if it has one."""
        instance = self._live.get("session:" + connection)
        return [] if instance is None else [instance.downstream]

    def status(self) -> dict[str, object]:
        """What the status API adds to the server's state: its scope and its processes beyond the first."""
        live, started = len(self._live), self.started
        return {
            "scope": self.scope,
            "instances": live,
            "instancesStarted": started,
            "instancesReclaimed": self.reclaimed,
        }

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host the instances, and stop each one idle for `idleSecs` (no request waiting on it)."""
        idle = self.primary.config.idle_secs
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                while True:
                    await anyio.sleep(max(0.05, min(30.0, idle / 4)))
                    self.stop_idle(time.monotonic())
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def stop_idle(self, now: float) -> None:
        idle = self.primary.config.idle_secs
        for instance in list(self._live.values()):
            last = instance.last_used()
            if not instance.downstream.in_flight.busy and now - last >= idle:
                self._stop(instance, f"idle for {idle:g} s")


def _unit(key: str) -> str:
    return "owner" if key.startswith("owner:") else "client connection"
