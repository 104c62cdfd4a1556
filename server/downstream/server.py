"""One downstream MCP server: its connection, and its tools (and resources, prompts); calls to it are
`server.downstream.tool_call`'s.

A supervisor task owns the `Client` (anyio scopes must be left by the task that entered them). A
server that fails at start has no tools and is started again with backoff until it comes up; one
that dies after it was up keeps its tool list and is respawned by the next call to it
(`server.downstream.restarts`).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, Literal, Protocol

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from server.downstream.connect import TRANSPORTS, DownstreamSpec, Reach, Target
from server.downstream.inflight import InFlight, OutsideRoots
from server.downstream.listing import describe, every_page, offered_list
from server.downstream.processes import CONNECT_TIMEOUT_S
from server.downstream.refusal import Refusals
from server.downstream.restarts import Restarts
from server.downstream.roots_applied import RootsInPlace
from server.downstream.spool import SpoolPolicy
from server.downstream.stdio import StdioProcess
from server.version import VERSION

__all__ = ["CONNECT_TIMEOUT_S", "CatalogObserver", "Downstream", "State"]

logger = logging.getLogger(__name__)

GONE_REPORT_S = 10.0
"""How long a call that lost its server waits to say why (the supervisor stops the process: at most ~4 s)."""
ROOTS_PROBE_S = 1.0
"""How long a process several clients share is given to ask for roots once told they changed (`asks_roots`)."""

State = Literal["starting", "ready", "down", "failed"]
_IMPLEMENTATION = types.Implementation(name="claimcheck", version=VERSION)


class CatalogObserver(Protocol):
    """Hears about a downstream's resources and prompts (`server.downstream.offerings`)."""

    async def connected(self, downstream: Downstream) -> None: ...

    async def lists_changed(self, downstream: Downstream) -> None: ...

    async def resource_updated(self, downstream: Downstream, uri: str) -> None: ...


class Downstream:
    """A supervised connection to one downstream server."""

    def __init__(
        self,
        spec: DownstreamSpec,
        on_tools_changed: Callable[[], Awaitable[None]],
        *,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        spool: SpoolPolicy | None = None,
        outside_roots: OutsideRoots | None = None,
        fixed_roots: OutsideRoots | None = None,
        observer: CatalogObserver | None = None,
    ) -> None:
        """`spool`: where this server's long messages go; `outside_roots`, `fixed_roots`: see `InFlight` (the
        first process of a server gets the proxy's, later, and an instance of a scope gets them here); `observer`:
        who hears that it connected and that its lists changed (a server's first process: the proxy's
        `Offerings`)."""
        self.name = spec.name
        self.config = spec.config
        self.tools: dict[str, types.Tool] = {}
        self.resources: dict[str, types.Resource] = {}
        self.templates: dict[str, types.ResourceTemplate] = {}
        self.prompts: dict[str, types.Prompt] = {}
        self.capabilities: types.ServerCapabilities | None = None
        self.observer = observer
        self.state: State = "starting"
        self.last_error: str | None = None
        self.restarts = 0
        self.process: StdioProcess | None = None
        self.spool = spool
        self._spec = spec
        self._on_tools_changed = on_tools_changed
        self.connect_timeout = connect_timeout if spec.connect_timeout is None else spec.connect_timeout
        self._client: Client | None = None
        self._wanted = anyio.Event()
        self._wanted.set()
        self._state_changed = anyio.Event()
        self._first_done = anyio.Event()
        self._broken = anyio.Event()
        self.in_flight = InFlight(self.name, self.config.timeout, outside_roots=outside_roots, fixed_roots=fixed_roots)
        self.backoff = Restarts()
        self._ever_up = False
        self.asks_roots = False
        """Whether the server has asked for roots: an "auto" scoped server then runs per client that has roots."""
        self.roots_known = anyio.Event()
        """Set once it asked for roots, or did not within `ROOTS_PROBE_S` of being told they changed."""
        self.roots_answered = anyio.Event()
        """Set once its first `roots/list` was answered."""
        self.roots_mark = 0
        """Its count of stderr lines when that answer was made (`server.downstream.roots_applied`)."""
        self.roots_in_place = RootsInPlace()
        self._roots_refused_early = False  # a roots question answered with an error before it was up
        self._retired: str | None = None
        self._refusals: Refusals | None = None  # over HTTP: the 401/403 the server answered
        self._reach = Reach(self.config)
        """How it is reached: its config's kind, or SSE for a `url` of no `type` that answers only over SSE."""

    # -- supervisor -------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect and stay connected until the link breaks; then wait for the next call to reconnect,
        or, for a server that has never come up, try again after a growing delay."""
        while True:
            await self._wanted.wait()
            self.state, self._broken = "starting", anyio.Event()
            self._state_changed.set()  # a change of state too (`state_changed`), though not a tried attempt
            self._state_changed = anyio.Event()
            was_up = False
            try:
                with anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout) as scope:
                    async with AsyncExitStack() as stack:
                        target = await self._target(stack)
                        client = await stack.enter_async_context(self._client_for(target))
                        await self._refresh_tools(client, announce=False)
                        await self._refresh_catalog(client, announce=False)
                        scope.deadline = math.inf
                        self._client, self.state, self.last_error, was_up = client, "ready", None, True
                        self._ever_up, self.backoff.failed_starts = True, 0
                        self._changed()
                        await self._on_tools_changed()
                        if self.observer is not None:
                            await self.observer.connected(self)
                        async with anyio.create_task_group() as tg:
                            if self.process is not None:
                                tg.start_soon(self._watch, self.process)
                            if self.in_flight.fixed_roots is not None and not self.roots_known.is_set():
                                tg.start_soon(self._probe_roots)
                            elif self._roots_refused_early:  # a client may have come meanwhile: ask again
                                self._roots_refused_early = False
                                tg.start_soon(self.roots_changed)
                            await self._broken.wait()
                            tg.cancel_scope.cancel()
                if scope.cancelled_caught and not was_up:
                    self.last_error = f"no answer to initialize and tools/list within {self.connect_timeout:g} s"
            except Exception as exc:  # boundary: any failure of one server must leave the others running
                self.last_error = self.where(describe(exc))
                if not was_up and self._sse_next():
                    continue  # at once: the same attempt, over the transport the URL may mean
            if self.process is not None and (self.process.ended_itself or not was_up):
                self.last_error = self.process.why_down(self.last_error or "it stopped")
            self._client = None
            if was_up:
                self.state, self._wanted = "down", anyio.Event()
                self.restarts += 1
                self.backoff.crashed()
                logger.warning("server %r went away (%s); it restarts on its next call", self.name, self.last_error)
                self._changed()
            elif self._ever_up:
                self.state, self._wanted = "down", anyio.Event()
                logger.error("server %r could not restart: %s", self.name, self.last_error)
                self._changed()
            else:
                await self._retry_later()

    async def _retry_later(self) -> None:
        """A server that has never come up is "failed" until its next try, which comes on its own."""
        self.state = "failed"
        delay = self.backoff.start_failed()
        logger.error("server %r could not start: %s; trying again in %g s", self.name, self.last_error, delay)
        self._changed()
        await anyio.sleep(delay)
        self.backoff.retry_at = None

    def where(self, reason: str) -> str:
        """`reason` with the URL it concerns, for a server reached over HTTP."""
        url = self.config.url
        if url is None or self._spec.target is not None or url in reason:
            return reason
        return f"{url}: {reason}"

    def status(self) -> dict[str, Any]:
        """What the status API and `claimcheck tools` say about this server."""
        retry = self.backoff.retry_in()
        return {
            "name": self.name,
            "state": self.state,
            "tools": len(self.tools),
            "lastError": self.last_error,
            "restarts": self.restarts,
            "failedStarts": self.backoff.failed_starts,
            "retryInSecs": None if retry is None else round(retry, 1),
        }

    async def first_attempt(self) -> None:
        """Wait until the first connection attempt has succeeded or failed."""
        await self._first_done.wait()

    async def state_changed(self) -> None:
        """Wait for the next change of `state`."""
        await self._state_changed.wait()

    @property
    def tried(self) -> bool:
        """Whether the first connection attempt has succeeded or failed."""
        return self._first_done.is_set()

    def _changed(self) -> None:
        self._first_done.set()
        self._state_changed.set()
        self._state_changed = anyio.Event()

    async def _watch(self, process: StdioProcess) -> None:
        await process.closed.wait()
        self.last_error = "the process exited"
        self._broken.set()

    async def _target(self, stack: AsyncExitStack) -> Target:
        if self._spec.target is not None:
            return self._spec.target()
        opened = await TRANSPORTS[self._reach.kind](self.config, self.spool, self.in_flight.log, stack)
        self.process, self._refusals = opened.process, opened.refusals
        if opened.refusals is not None:  # a 401/403 fails the attempt naming the header to check
            stack.push_async_exit(opened.refusals.explaining(self.name, self.config))
        return opened.target

    def _sse_next(self) -> bool:
        """Whether to try again at once, over SSE (`Reach`)."""
        if self._spec.target is not None:
            return False
        status = self._refusals.status if self._refusals is not None else None
        again, self.last_error = self._reach.after_failure(self.last_error or "", status)
        if again:
            logger.info("server %r: %s answered %d as streamable HTTP; trying SSE", self.name, self.config.url, status)
        return again

    def _client_for(self, target: Target) -> Client:
        return Client(
            target,
            mode="legacy",  # "auto" probes server/discover and stalls 10 s on servers that ignore it
            client_info=_IMPLEMENTATION,
            message_handler=self._on_message,
            logging_callback=self.in_flight.log,
            sampling_callback=self._on_sampling,
            elicitation_callback=self._on_elicitation,
            list_roots_callback=self._on_list_roots,  # declared always: see `relay.no_roots`
            cache=None,
        )

    async def _refresh_tools(self, client: Client, *, announce: bool = True) -> None:
        tools: dict[str, types.Tool] = {t.name: t for t in await every_page(client.list_tools, "tools")}
        changed = tools != self.tools
        self.tools = tools
        if changed and announce:
            await self._on_tools_changed()

    async def _refresh_catalog(
        self, client: Client, *, announce: bool = True, resources: bool = True, prompts: bool = True
    ) -> None:
        """Resources, templates and prompts, where the server offers them (`downstream.offerings` routes them)."""
        self.capabilities = offered = client.server_capabilities
        before = (self.resources, self.templates, self.prompts)
        if resources:
            listed = await offered_list(self.name, client.list_resources, "resources", offered.resources)
            self.resources = {r.uri: r for r in listed}
            listed = await offered_list(
                self.name, client.list_resource_templates, "resource_templates", offered.resources
            )
            self.templates = {t.uri_template: t for t in listed}
        if prompts:
            listed = await offered_list(self.name, client.list_prompts, "prompts", offered.prompts)
            self.prompts = {p.name: p for p in listed}
        if announce and before != (self.resources, self.templates, self.prompts) and self.observer is not None:
            await self.observer.lists_changed(self)

    # -- notifications and requests from the downstream ---------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self._client is not None:
            await self._refresh_tools(self._client)
        elif isinstance(message, types.ResourceListChangedNotification) and self._client is not None:
            await self._refresh_catalog(self._client, prompts=False)
        elif isinstance(message, types.PromptListChangedNotification) and self._client is not None:
            await self._refresh_catalog(self._client, resources=False)
        elif isinstance(message, types.ResourceUpdatedNotification) and self.observer is not None:
            await self.observer.resource_updated(self, message.params.uri)
        elif isinstance(message, Exception):
            logger.warning("server %r sent something unreadable: %s", self.name, message)

    async def _on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        return await self.in_flight.sample(params)

    async def _on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self.in_flight.elicit(params)

    async def _on_list_roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        self.asks_roots = True
        self.roots_known.set()
        self.roots_in_place.asked()
        try:
            answer = await self.in_flight.list_roots()
        finally:
            self.roots_mark = self.process.stderr.written if self.process is not None else 0
            self.roots_in_place.answered(self.roots_mark)
        self.roots_answered.set()
        self._roots_refused_early |= isinstance(answer, types.ErrorData) and self._client is None
        return answer

    async def _probe_roots(self) -> None:
        """Several clients share this process: it is told once that the roots changed, so that a server that
        follows roots asks now (most ask when they start, too), before a client's call must choose its process."""
        await self.roots_changed()
        with anyio.move_on_after(ROOTS_PROBE_S):
            await self.roots_known.wait()
        self.roots_known.set()

    def roots_changing(self) -> None:
        """The client's roots changed: a server that asks for roots asks again once told, and the client's calls wait
        for that from now on (`RootsInPlace`), even a call read before the server could be told (`roots_changed`)."""
        if self._client is not None and not self._broken.is_set() and self.asks_roots:
            self.roots_in_place.expect(anyio.current_time() + ROOTS_PROBE_S)

    async def roots_changed(self) -> None:
        """Tell the server, if it is up, that the client's roots changed (roots: `server.downstream.relay.no_roots`)."""
        if self._client is None or self._broken.is_set():
            return
        self.roots_changing()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are deprecated at 2026-07-28 only
                await self._client.send_roots_list_changed()
        except Exception as exc:  # boundary: a server that went away hears on its next start
            logger.debug("could not tell server %r that the roots changed: %s", self.name, exc)

    # -- what a call meets (`server.downstream.tool_call`) ---------------------------------------

    async def connected(self) -> Client | str:
        """The live client, (re)connecting first if the server is down; else why it cannot be reached."""
        requested = False
        while True:
            if self._client is not None and not self._broken.is_set():
                return self._client
            if self._retired is not None:
                return self._retired
            if self.state == "failed":
                return f"the server {self.backoff.not_started(self.last_error)}"
            if self.state == "down" and (crashing := self.backoff.crashing(self.last_error)) is not None:
                return f"the server {crashing}"
            if self.state == "down":
                if requested:
                    return f"the server could not restart ({self.last_error})"
                requested = True
                self._wanted.set()
            await self._state_changed.wait()

    @property
    def broken(self) -> bool:
        """The connection failed; the next call reconnects first (`connected`)."""
        return self._broken.is_set()

    def mark_broken(self, why: str) -> None:
        self.last_error = why
        self._broken.set()

    @property
    def retired_why(self) -> str | None:
        """Why this process was stopped for good (`retired`), else None: what a call that still holds it hears."""
        return self._retired

    @property
    def refusals(self) -> Refusals | None:
        """Over HTTP: the 401/403 the server answered, which a failed call names."""
        return self._refusals

    async def why_gone(self) -> str:
        """Why the server went away, once its supervisor knows (its process' exit status and last stderr
        lines); at most `GONE_REPORT_S` later, else a guess."""
        with anyio.move_on_after(GONE_REPORT_S):
            while self.state == "ready":
                await self._state_changed.wait()
        if self.state == "ready" or not self.last_error:
            return "it may have crashed"
        return self.last_error

    async def close(self) -> None:
        self._broken.set()

    def retired(self, why: str) -> None:
        """The supervisor of this process was stopped for good (an instance of a scoped server): a call that
        still holds it hears `why`."""
        self._retired = self.last_error = why
        self._client, self.state = None, "down"
        self._changed()
