"""All downstream servers, and the catalogue of tools a client sees."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import anyio.abc
import mcp_types as types

from server.config import Config, Policy, resolve_policy
from server.config_vars import PRIMARY_INSTANCE, for_instance
from server.downstream.chain import OWN, PROXIED, mark, mark_of
from server.downstream.connect import DownstreamSpec
from server.downstream.inflight import OutsideRoots
from server.downstream.naming import public_name, tool_allowed
from server.downstream.relay import Relay
from server.downstream.scopes import Instances, Requester, fixed_roots
from server.downstream.server import CONNECT_TIMEOUT_S, CatalogObserver, Downstream
from server.downstream.spool import SpoolPolicy
from server.downstream.spooled import SpooledOutputs
from server.downstream.tool_index import ToolSearch

__all__ = ["Pool", "Route", "specs_from_config"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a public tool name goes."""

    public: str
    downstream: Downstream
    tool: str
    definition: types.Tool
    policy: Policy
    background_param: str | None
    """The argument that sends this call to the background, unless the tool has its own of that name."""


def specs_from_config(config: Config) -> list[DownstreamSpec]:
    """The enabled servers of a config, in file order."""
    return [DownstreamSpec(name, server) for name, server in config.mcp_servers.items() if not server.disabled]


class Pool:
    """Starts every downstream at once, keeps the routing table current, and says when it changes.

    Listing waits for the servers at most `startupWaitSecs`: then the tools of those that are ready
    are served, and each server that comes up later is announced as a list change (and, `serving`, a warning says
    so). `spooled` holds the
    large outputs the servers' spools made until their calls claim them; they expire while the pool runs
    and are released when it stops.
    """

    def __init__(
        self,
        config: Config,
        specs: Sequence[DownstreamSpec] | None = None,
        *,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        serving: bool = True,
        many_clients: bool = False,
        one_principal: bool = False,
        spool_root: Path | None = None,
        outside_roots: Callable[[str], OutsideRoots] | None = None,
        observer: CatalogObserver | None = None,
    ) -> None:
        """`many_clients`: several clients will come (HTTP, SSE, the shared claimcheck): a server's first process is
        everyone's, so it hears only `settings.roots`, and each server's `scope` applies (`server.downstream.scopes`);
        servers a reloaded config adds get the same. `one_principal`: every client is one principal (clients
        without tokens, the shared claimcheck's user), whose share of a server's processes is all of them by
        default. What each server's first process gets besides: the directory
        its long messages spool to (`spool_root`, the store's), and where its `roots/list`
        outside any request goes (`outside_roots`, by server name), and who hears it connect and its lists change
        (`observer`)."""
        self.config = config
        self.serving = serving  # False for `claimcheck tools`: no client waits, so a late server is not announced
        self.many_clients = many_clients
        self.one_principal = one_principal
        self.spooled = SpooledOutputs()
        self._spool_root = spool_root
        self._outside_roots = outside_roots
        self._observer = observer
        self.connect_timeout = connect_timeout
        self.downstreams: list[Downstream] = []
        self.instances: dict[str, Instances] = {}  # by server name: its processes beyond the first
        for spec in specs if specs is not None else specs_from_config(config):
            primary, self.instances[spec.name] = self._member(spec)
            self.downstreams.append(primary)
        self._tg: anyio.abc.TaskGroup | None = None
        self._scopes: dict[str, anyio.CancelScope] = {}  # by server name: what stops it alone
        self.routes: dict[str, Route] = {}
        self.tool_search = ToolSearch(config.settings)  # the catalog behind find_tools: one per process
        self.listeners: list[Callable[[], Awaitable[None]]] = []
        self._listable = anyio.Event()
        self._settled = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run every supervisor; `task_status.started()` comes at once, `listable()` once each tried or
        `startupWaitSecs` passed, `settled()` once each tried."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self.spooled.run)
            for downstream in self.downstreams:
                await self._launch(downstream)
            task_status.started()
            wait = self.config.settings.startup_wait_secs
            with anyio.move_on_after(wait):
                await self._every_first_attempt()
            self._rebuild()
            self._listable.set()
            for late in (d for d in self.downstreams if not d.tried and self.serving):
                logger.warning(
                    "server %r is not ready after %g s; clients get the other servers' tools now and its own "
                    "in a list change when it starts",
                    late.name,
                    wait,
                )
            await self._every_first_attempt()
            self._settled.set()

    def _member(self, spec: DownstreamSpec) -> tuple[Downstream, Instances]:
        """The first process of a server, and its scope's other processes (none started)."""
        first = replace(spec, config=for_instance(spec.config, PRIMARY_INSTANCE))
        settings = self.config.settings
        spool = None
        if self._spool_root is not None:  # with its rules off too: a plain pass-through holds no message whole
            whole = not resolve_policy(settings, spec.config).async_enabled  # answered as it came: kept as it came
            spool = SpoolPolicy(self._spool_root, settings.max_output_bytes, self.spooled, whole=whole)
        primary = Downstream(
            first,
            self._tools_changed,
            connect_timeout=self.connect_timeout,
            spool=spool,
            outside_roots=self._outside_roots(spec.name) if self._outside_roots is not None else None,
            fixed_roots=fixed_roots(settings.roots) if self.many_clients else None,
            observer=self._observer,
        )

        def make(
            spec: DownstreamSpec,
            *,
            spool: SpoolPolicy | None,
            outside_roots: OutsideRoots | None,
            fixed_roots: OutsideRoots | None,
        ) -> Downstream:
            return Downstream(
                spec,
                _nothing,
                connect_timeout=self.connect_timeout,
                spool=spool,
                outside_roots=outside_roots,
                fixed_roots=fixed_roots,
            )

        return primary, Instances(primary, spec, make, one_principal=self.one_principal)

    async def _launch(self, downstream: Downstream) -> None:
        assert self._tg is not None
        self._scopes[downstream.name] = scope = anyio.CancelScope()
        await self._tg.start(self._supervise, downstream, self.instances[downstream.name], scope)

    async def _supervise(
        self,
        downstream: Downstream,
        instances: Instances,
        scope: anyio.CancelScope,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        with scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(downstream.run)
                await tg.start(instances.run)
                task_status.started()

    async def reconfigure(
        self,
        config: Config,
        stop: Mapping[str, str],
        start: Sequence[DownstreamSpec],
    ) -> list[Downstream]:
        """Apply a reloaded config: stop the servers named in `stop` (each with why, which calls still holding it
        are told), start those of `start` (one that replaces a stopped server of its name takes
        its place in the order), leave every other server and its calls alone, and tell the listeners if the
        tools changed. Returns the servers started."""
        # A stopped server's `instances` entry stays (until one of its name replaces it): a call that found its
        # route just before is then told why, not a KeyError.
        for name, why in stop.items():
            stopped = next(d for d in self.downstreams if d.name == name)
            stopped.retired(why)
            self.instances[name].retire(why)
            if (scope := self._scopes.pop(name, None)) is not None:
                scope.cancel()
        new: dict[str, Downstream] = {}
        for spec in start:
            new[spec.name], self.instances[spec.name] = self._member(spec)
        started = list(new.values())
        kept = [new.pop(d.name, d) for d in self.downstreams if d.name not in stop or d.name in new]
        self.downstreams[:] = kept + list(new.values())
        self.config = config
        if self._tg is not None:
            for downstream in started:
                await self._launch(downstream)
        if self._listable.is_set():
            await self._tools_changed()
        return started

    async def _every_first_attempt(self) -> None:
        for downstream in self.downstreams:
            await downstream.first_attempt()

    async def listable(self) -> None:
        """Wait until every server has connected or failed once, or `startupWaitSecs` have passed."""
        await self._listable.wait()

    async def settled(self) -> None:
        """Wait until every server has connected or failed once (however long that takes)."""
        await self._settled.wait()

    def starting(self, name: str) -> Downstream | None:
        """The server not ready yet whose prefix `name` carries, if any (for a clearer unknown-tool error)."""
        separator = self.config.settings.tool_separator
        for downstream in self.downstreams:
            prefix = self._prefix(downstream)
            if downstream.state != "ready" and prefix and name.startswith(prefix + separator):
                return downstream
        return None

    def route(self, name: str) -> Route | None:
        return self.routes.get(name)

    async def for_client(self, route: Route, requester: Requester, relay: Relay | None = None) -> Route:
        """`route` with the process that serves `requester` (started now if it is the first call that needs it,
        which asks its roots through `relay`)."""
        if not self.many_clients:  # the one client's roots, in place before its call (`RootsInPlace`)
            await route.downstream.roots_in_place.wait(route.downstream)
            return route
        downstream = await self.instances[route.downstream.name].get(requester, route.public, relay)
        if downstream is route.downstream:
            return route
        await downstream.roots_in_place.wait(downstream)  # its own process: its roots, changed or not, in place
        return replace(route, downstream=downstream)

    def for_everyone(self, route: Route) -> bool:
        """Whether `route`'s calls go to its server's first process whoever makes them (the fast paths' own); with
        one client, not while its roots are being put in place (the SDK's path waits for that: `for_client`)."""
        if not self.many_clients:
            return route.downstream.roots_in_place.settled
        return self.instances[route.downstream.name].for_everyone()

    def connection_closed(self, connection: str) -> None:
        for instances in self.instances.values():
            instances.connection_closed(connection)

    def start_early(self, requester: Requester) -> None:
        """A client with roots came or changed them: each server that gives it a process of its own starts that
        process now (`Instances.start_early`), so that its first call does not wait for a start."""
        if self.many_clients:
            for instances in self.instances.values():
                instances.start_early(requester)

    def hearing_roots_of(self, connection: str | None) -> list[Downstream]:
        """The processes to tell when `connection`'s roots change: with one client, every server; else the
        processes that are that connection's own (None: the one client's, so none)."""
        if not self.many_clients:
            return list(self.downstreams)
        if connection is None:
            return []
        return [d for instances in self.instances.values() for d in instances.of_connection(connection)]

    def tools(self) -> list[types.Tool]:
        return [route.definition for route in self.routes.values()]

    async def _tools_changed(self) -> None:
        if not self._listable.is_set():
            return
        before = {name: route.definition for name, route in self.routes.items()}
        self._rebuild()
        if before != {name: route.definition for name, route in self.routes.items()}:
            for listener in list(self.listeners):
                await listener()

    def _rebuild(self) -> None:
        settings = self.config.settings
        separator = settings.tool_separator
        routes: dict[str, Route] = {}
        for downstream in self.downstreams:
            prefix = self._prefix(downstream)
            policy = resolve_policy(settings, downstream.config)
            for tool in downstream.tools.values():
                if not tool_allowed(tool.name, downstream.config.tools) or mark_of(tool, OWN):
                    continue  # filtered out, or the handle tools of a claimcheck behind this one
                public = public_name(prefix, separator, tool.name, settings.tool_name_max)
                if public in routes:
                    logger.warning(
                        "tool %r of server %r hides behind %r of server %r; give one of them a prefix",
                        tool.name,
                        downstream.name,
                        routes[public].tool,
                        routes[public].downstream.name,
                    )
                    continue
                # claimcheck runs any call as an MCP task, and a tool that requires one without it
                execution = types.ToolExecution(task_support="optional")
                definition = tool.model_copy(update={"name": public, "output_schema": None, "execution": execution})
                background: str | None = None
                if policy.async_enabled:
                    added_behind = (mark_of(tool, PROXIED) or {}).get("background")
                    if added_behind == settings.background_param:  # a claimcheck behind added it: it is ours
                        background = added_behind
                    else:
                        definition, background = _with_background(definition, settings.background_param)
                definition = mark(definition, PROXIED, {"background": background})
                routes[public] = Route(public, downstream, tool.name, definition, policy, background)
        self.routes = routes

    def _prefix(self, downstream: Downstream) -> str:
        prefix = downstream.config.prefix
        return downstream.name if prefix is None else prefix


async def _nothing() -> None:
    """A scoped server's other processes: the tools clients see are its first process's."""


def _with_background(tool: types.Tool, param: str) -> tuple[types.Tool, str | None]:
    """`tool` with an optional boolean `param` added to its input schema, unless it has one already."""
    schema = dict(tool.input_schema)
    properties = dict(schema.get("properties") or {})
    if param in properties:
        return tool, None
    properties[param] = {
        "type": "boolean",
        "description": "claimcheck: true runs the call in the background and returns a handle at once.",
    }
    schema["properties"] = properties
    return tool.model_copy(update={"input_schema": schema}), param
