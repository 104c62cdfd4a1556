"""The running proxy: configuration, the downstream pool and offerings, and the clients to tell about changes."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)

from extraction import Extractor, Policy
from fs_sandbox import Sandbox
from server import tracing
from server.config import Config, ExtractionSettings, api_port, load_config, no_servers, state_dir
from server.downstream.connect import DownstreamSpec
from server.downstream.offerings import Offerings
from server.downstream.pool import Pool, specs_from_config
from server.downstream.relay import RootsParams, no_roots
from server.downstream.server import CONNECT_TIMEOUT_S
from server.errors import StartupError
from server.handles import questions
from server.handles.calls import Call
from server.handles.meters import Meters
from server.handles.output_watch import OutputWatch
from server.handles.session import Session
from server.handles.sessions import Sessions
from server.handles.state import LocalBackend, StateBackend
from server.handles.store import OutputStore, StoreError
from server.reload import Changes, ConfigWatch, changes
from server.version import VERSION

if TYPE_CHECKING:
    from server.status.history import History

__all__ = ["Proxy", "Starter"]

logger = logging.getLogger(__name__)


class Proxy:
    """Everything an upstream connection shares with the others: made and run by `Proxy.start`, which yields it
    complete (its pool running, its sessions, sandbox, store and status API made)."""

    def __init__(
        self,
        config: Config,
        store: OutputStore,
        *,
        specs: Sequence[DownstreamSpec] | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        api_token: str | None = None,
        shared: bool = False,
        many_clients: bool = False,
        anonymous: bool = False,
        relay_count: Callable[[], int] | None = None,
        restarted_at: str | None = None,
        serving: bool = True,
        config_path: Path | None = None,
        load: Callable[[Path], Config] = load_config,
    ) -> None:
        """`config`: resolved (`server.config.resolved`), the command line merged in; `load` reads `config_path`
        again the same way. `store`: where outputs are kept (`Proxy.start` opens it, and removes it at the end).
        `serving`: False where no client is served (`claimcheck tools`), so nothing warns of what clients see.
        `many_clients`: several clients will come (`Pool` with `many_clients`); `anonymous`: they come without
        tokens (no tokens file, no `--auth-token-env`, no OAuth), so all are one principal. The shared
        claimcheck's: `relay_count`, its relays attached now, and `restarted_at`, when it took over from one that
        died."""
        self.config = config
        self.shared = shared  # the user's shared claimcheck (serve --shared): every connection is the user's
        self.relay_count = relay_count
        self._restarted_at = restarted_at
        self.api_token = api_token  # the status API's token: given (--auth-token-env), else made when the API starts
        self.offerings = Offerings(config.settings.tool_separator, self)
        self.pool = Pool(
            config,
            specs,
            connect_timeout=connect_timeout,
            serving=serving,
            many_clients=many_clients,
            one_principal=shared or (anonymous and config.settings.auth is None),
            spool_root=store.run_root,
            outside_roots=lambda server: partial(self._roots_outside, server),
            observer=self.offerings,
        )
        self.offerings.follow(self.pool.downstreams)
        self.bus = InMemorySubscriptionBus()
        self.output_watch = OutputWatch()  # who hears of the sessions' outputs as resources
        self.meters = Meters()  # what this proxy's calls count, for `/metrics`
        self.log_level: types.LoggingLevel | None = None
        self._sessions: list[ServerSession] = []
        self._live: set[Session] = set()  # the live sessions, which `sessions` fills once it is made
        self._client_sessions: Sessions | None = None  # made in `_running`, in its task group
        self._store = store
        limits = config.settings.limits  # Grep's fair shares count by principal (server.handles.files)
        self.sandbox = Sandbox(
            store.run_root, per_owner=limits.greps, workers_per_owner=limits.grep_workers, setting="limits.greps"
        )
        self.api_url: str | None = None  # the status API's, once it is served (None: it is off)
        self._warmed = anyio.Event()
        self.extractor = Extractor(_policy(config.settings.extraction))
        self.pool.listeners.append(self.announce_tools_changed)
        # the file the config came from, watched while running: a change is applied without a restart
        self.config_watch = ConfigWatch(config_path, self.reload, load=load) if config_path is not None else None

    @classmethod
    @asynccontextmanager
    async def start(cls, config: Config, **options: Any) -> AsyncIterator[Proxy]:
        """The proxy of `config` (with the options of the constructor), running for the block; leaving it stops
        every server and call. The one way to a proxy: what it yields is complete."""
        settings = config.settings
        root = Path(settings.root) if settings.root else None
        try:
            store = OutputStore.shared_by_replicas(root) if settings.state.url else OutputStore.create(root)
        except StoreError as exc:
            raise StartupError(f"{exc}; set settings.root to a directory this user can write") from None
        try:
            proxy = cls(config, store, **options)
            async with proxy._running():
                if not any(not server.disabled for server in config.mcp_servers.values()):
                    where = options.get("config_path") or "the config"
                    logger.warning("%s; serving only claimcheck's own tools until it does", no_servers(where))
                yield proxy
        finally:
            store.close()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        """Run the pool and the output store for the block; leaving it stops every server and call.

        The downstreams start first: they are what the first `tools/list` waits for. What claimcheck needs only
        later (the history's maintenance, serving the status API) is done in the background once that listing
        can be answered, off its path; `warmed()` says when it is done. The tokenizer's vocabulary waits for the
        first output that needs it.
        """
        settings = self.config.settings
        state_url = settings.state.url
        store, sandbox, warmed = self._store, self.sandbox, self._warmed
        traced = tracing.ENABLED  # OTEL_* ask for traces: the SDK and exporter are imported now, not before
        if traced:
            tracing.setup()
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self.pool.run)
                live = self._live
                backend: StateBackend = LocalBackend(live)
                redis = None
                if state_url:  # replicas: handles in Redis (redis is imported only here)
                    from server.handles.redis_state import RedisBackend

                    backend = redis = RedisBackend(state_url, settings.state, live)
                    await tg.start(redis.run)
                port = api_port(settings)
                status = await self._start_api(tg, port, backend) if port is not None else None
                self._client_sessions = Sessions(
                    store,
                    tg,
                    settings.max_output_bytes,
                    spooled=self.pool.spooled,
                    shared=self.shared,
                    keep_outputs_secs=settings.keep_outputs_secs,
                    live=live,
                    backend=backend,
                    observer=status.observe if status is not None else None,
                    on_output=self.output_watch.changed,
                    meters=self.meters,
                    restarted_at=self._restarted_at,
                    sessions_per_principal=settings.limits.sessions,
                )
                tg.start_soon(self.output_watch.run, self.bus.publish)
                self.api_url = status.url if status is not None else None
                tg.start_soon(self._warm_up, status.history if status is not None else None, warmed)
                if self.config_watch is not None:
                    await tg.start(self.config_watch.run)
                try:
                    yield
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._client_sessions.close_all()
                        await sandbox.aclose()
                        if redis is not None:
                            await redis.aclose()
                    tg.cancel_scope.cancel()
        finally:
            if traced:
                await anyio.to_thread.run_sync(tracing.shutdown)  # what is left is exported

    async def reload(self, new: Config) -> Changes:
        """Apply a config read again (`server.reload`): servers whose entry changed restart (their calls in flight
        fail, saying so, as in a crash), added ones start, removed ones stop (their calls fail, saying so); every
        other server, call and handle is untouched. Global settings keep their running values."""
        found = changes(self.config, new)
        self.config = self.config.model_copy(update={"mcp_servers": new.mcp_servers})
        if not found.servers:
            return found
        why = {name: f'its entry in the config changed, so claimcheck restarted "{name}"' for name in found.changed}
        why |= {name: f'"{name}" was removed from the config, so claimcheck stopped it' for name in found.removed}
        start = [spec for spec in specs_from_config(self.config) if spec.name in found.changed + found.added]
        await self.pool.reconfigure(self.config, why, start)
        await self.offerings.servers_changed(self.pool.downstreams)
        return found

    async def warmed(self) -> None:
        """Wait until the start-up work kept off the first listing's path is done (the status API answers)."""
        await self._warmed.wait()

    async def _warm_up(self, history: History | None, warmed: anyio.Event) -> None:
        """The history's maintenance, once the first listing can be answered. The tokenizer's vocabulary is not
        loaded here: it is 41 MiB that many processes (a sub-agent's, a chain's inner one) never need, and the
        first output that does need it loads it in about 0.1 s (`extraction.tokens`)."""
        await self.pool.listable()
        if history is not None:
            await history.ready()
        warmed.set()

    async def _start_api(self, tg: anyio.abc.TaskGroup, port: int, backend: StateBackend) -> _Api:
        """History, the event hub and the status API, all in this event loop, made before the sessions (the hub
        hears of their every call).

        At once: the database opened (its files private), calls recorded from now on, the port bound and the
        discovery file written. After the first listing: the history's maintenance, then the API answers.
        """
        from server.handles.redis_state import RedisBackend
        from server.status.api import StatusApi, serve_api  # starlette and sqlite only when the API is on
        from server.status.cluster import ClusterView
        from server.status.cluster_feed import ClusterFeed
        from server.status.events import EventHub
        from server.status.history import History
        from server.status.metrics import PrometheusText
        from server.status.outputs import OutputView

        settings = self.config.settings
        directory = state_dir(settings)
        history = History(directory / "history.sqlite3", settings.history)
        try:
            await anyio.to_thread.run_sync(history.open)
        except (OSError, sqlite3.Error) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise StartupError(
                f"cannot keep the call history in the state directory {directory}: {why}; set settings.stateDir to "
                "a directory this user can write, or turn the status API off (--no-api)"
            ) from None
        feed = None
        if backend.replicated and isinstance(backend, RedisBackend):  # every replica's calls, through Redis
            feed = ClusterFeed(backend.shared(), backend.replica, lambda: api.local_stats())
        hub = EventHub(history, feed)
        tg.start_soon(partial(history.run, after=self.pool.listable))
        api = StatusApi(
            hub,
            version=VERSION,
            heartbeat_secs=settings.api.heartbeat_secs,
            usage=self.usage_totals,
            servers=self.server_states,
            token=self.api_token,
            allow_origins=settings.api.allow_origins,
            relays=self.relay_count,
            outputs=OutputView(lambda: self._client_sessions, lambda: self.sandbox),
            time_rule_secs=settings.async_timeout_secs,
            cluster=ClusterView(backend, settings.tool_separator, feed) if backend.replicated else None,
            metrics=PrometheusText(self.meters, self.server_states, self.handles_alive),
        )
        self.api_token = api.token
        if feed is not None:
            await tg.start(feed.run)
        url: str = await tg.start(partial(serve_api, api, port, directory, begin=history.ready))
        return _Api(history, hub.observe, url)

    def usage_totals(self) -> dict[str, int]:
        """Extraction usage summed over the live sessions."""
        sessions = self._live
        return {
            "calls": sum(s.usage.calls for s in sessions),
            "inputTokens": sum(s.usage.input_tokens for s in sessions),
            "outputTokens": sum(s.usage.output_tokens for s in sessions),
        }

    def handles_alive(self) -> int:
        """Handles held by the live sessions (handed out, not yet dropped)."""
        sessions = self._live
        return sum(call.handed_out for session in sessions for call in session.calls.values())

    def server_states(self) -> list[dict[str, Any]]:
        """Each downstream's state (ready, starting, down, failed), for the status API."""
        return [
            downstream.status() | self.pool.instances[downstream.name].status() for downstream in self.pool.downstreams
        ]

    @property
    def sessions(self) -> Sessions:
        if self._client_sessions is None:
            raise RuntimeError("the proxy is not running")
        return self._client_sessions

    async def _roots_outside(self, server: str) -> types.ListRootsResult | types.ErrorData:
        """A server's `roots/list` outside any request: to the latest client that declared roots, through its
        session's inbox (its standing channel, or its next request that can carry it)."""
        session = self._client_sessions.roots_session() if self._client_sessions is not None else None
        if session is None:
            return no_roots()
        answer = await questions.ask_or_wait(
            None, session.inbox, RootsParams(), tool=f'server "{server}"', handle=None, lists_roots=True
        )
        return questions.roots_answer(answer)

    def roots_changing(self, connection: str | None) -> None:
        """The roots of the client on `connection` (None: the one client) changed: its calls read from now on wait
        until the servers that hear its roots were asked for them again and had the chance to apply them."""
        for downstream in self.pool.hearing_roots_of(connection):
            downstream.roots_changing()

    async def roots_changed(self, connection: str) -> None:
        """The roots of the client on `connection` changed (or a client that has roots came): the servers that hear
        its roots, and are up, hear of it (with one client, every server). Its calls wait for that from before
        the first await: a call read after this notification is not served with the roots before it."""
        self.roots_changing(connection)
        async with anyio.create_task_group() as tg:
            for downstream in self.pool.hearing_roots_of(connection):
                tg.start_soon(downstream.roots_changed)

    def add_session(self, session: ServerSession) -> None:
        """Remember a handshake-era client so it hears about list changes."""
        self._sessions.append(session)

    def only_client(self) -> ServerSession | None:
        """The one handshake-era client once it has finished its handshake (stdio has one), else None."""
        return self._sessions[0] if len(self._sessions) == 1 else None

    async def announce_tools_changed(self) -> None:
        """Tell every client: handshake-era ones by notification, 2026-era ones through `subscriptions/listen`."""
        await self._announce(ServerSession.send_tool_list_changed, ToolsListChanged())

    async def announce_resources_changed(self) -> None:
        await self._announce(ServerSession.send_resource_list_changed, ResourcesListChanged())

    async def announce_prompts_changed(self) -> None:
        await self._announce(ServerSession.send_prompt_list_changed, PromptsListChanged())

    async def announce_resource_updated(self, uri: str) -> None:
        """Tell the clients that follow `uri`: handshake-era subscribers, and listen streams that name it."""
        subscriptions = self.offerings.subscriptions
        for key, session in subscriptions.followers(uri):
            try:
                await session.send_resource_updated(uri)
            except Exception:  # boundary: a client that went away must not stop the others hearing
                logger.debug("dropping a subscriber that can no longer be notified", exc_info=True)
                await subscriptions.forget(key)
        await self.bus.publish(ResourceUpdated(uri=uri))

    async def _announce(self, send: Callable[[ServerSession], Awaitable[None]], event: ServerEvent) -> None:
        for session in list(self._sessions):
            try:
                await send(session)
            except Exception:  # boundary: a client that went away must not stop the others hearing
                logger.debug("dropping a client session that can no longer be notified", exc_info=True)
                self._sessions.remove(session)
        await self.bus.publish(event)


Starter = Callable[..., AbstractAsyncContextManager[Proxy]]
"""`Proxy.start` with the config and options of a command, given what a transport adds (`many_clients=True` and
`anonymous`, the shared claimcheck's `shared=True` and relay count): how a transport gets its running proxy."""


@dataclass(frozen=True, slots=True)
class _Api:
    """The status API started: its history, what hears of every call, and its URL."""

    history: History
    observe: Callable[[Call, str], None]
    url: str


def _policy(settings: ExtractionSettings) -> Policy:
    return Policy(
        max_chunks=settings.max_chunks,
        max_chunks_hard=settings.max_chunks_hard,
        overlap_percent=settings.overlap_percent,
        avg_line_bytes_threshold=settings.avg_line_bytes_threshold,
        concurrency=settings.concurrency,
        retries=settings.retries,
        max_turns=settings.max_turns,
    )
