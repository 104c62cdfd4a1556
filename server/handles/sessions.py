"""Client sessions and the background calls they own.

A session is one client: the stdio connection, or one MCP session of the HTTP/SSE transports (its
`Connection`). 2026-07-28 requests carry no session at all, so over HTTP claimcheck keys them by who
is asking: the `Authorization` header, the client's name, and an optional `Claimcheck-Session` header
for telling apart two copies of one client. Over stdio there is one client, in the default session.
Closing a session cancels its running calls and deletes its directory; handles of other sessions are
unknown to it.

A session with an owner (`server.handles.owners`: the user of the shared claimcheck, or the principal over
HTTP) is shared by every connection of that owner and outlives them: its calls run to completion, and each
finished output is kept `settings.keepOutputsSecs` after it was last touched once no connection is attached.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from pydantic import ValidationError

from extraction import estimate_tokens
from server import tracing
from server.config import Policy
from server.downstream.listing import describe
from server.downstream.relay import Relay, declares_roots
from server.downstream.render import render_output
from server.downstream.spooled import SpooledOutputs
from server.downstream.tool_call import DOWNSTREAM_MESSAGE_LIMIT, RawResult
from server.errors import ClaimcheckError, clip
from server.handles.call_relay import CallRelay
from server.handles.calls import Call, Description
from server.handles.messages import ended_session_note
from server.handles.messages import owned_handle_note as messages_owned_note
from server.handles.meters import Meters, outcome_of
from server.handles.mirrors import read_back
from server.handles.outcome import Failed
from server.handles.owners import SESSION_HEADER, Entrance, connection_of, link_of, owner_key, owner_name
from server.handles.session import Session, reads_links
from server.handles.settle import settle, store_text
from server.handles.shares import over_sessions
from server.handles.state import LocalBackend, StateBackend, snapshot
from server.handles.store import OutputStore, random_hex, session_of

__all__ = ["SESSION_HEADER", "Session", "Sessions"]

HANDOFFS = {
    "still running after the time rule": "time",
    "background: true": "background",
    "over the token threshold": "size",
    "started as a task": "task",
}
"""The kind of each reason `hand_out` is given (what the dashboard marks)."""
LOCAL_ONLY_NOTE = (
    "\n(The shared state cannot be reached just now, so this handle is known to this replica only until it is"
    " back: a request that a load balancer sends to another replica will not find it until then.)"
)
"""What a handle's answer adds when its state did not reach the shared state (Redis down)."""
SESSION_ENDED = "its session ended (the client closed it)"
"""Why a session's running calls are cancelled when it closes."""
ENDED_KEPT = 4096
"""How many ended sessions are remembered (by id and time) to explain their handles."""
_STATE_KEY = "claimcheck.session"

Invoke = Callable[[CallRelay], Awaitable[types.CallToolResult | RawResult]]

logger = logging.getLogger(__name__)


class Sessions:
    """Every live session of the process, and the task group their calls run in."""

    def __init__(
        self,
        store: OutputStore,
        task_group: anyio.abc.TaskGroup,
        max_output_bytes: int,
        *,
        spooled: SpooledOutputs,
        shared: bool = False,
        keep_outputs_secs: float = 600,
        live: set[Session] | None = None,
        backend: StateBackend | None = None,
        observer: Callable[[Call, str], None] | None = None,
        on_output: Callable[[Session, Call, bool], None] | None = None,
        meters: Meters | None = None,
        restarted_at: str | None = None,
        sessions_per_principal: int = 64,
    ) -> None:
        """`backend`: where handles live (default: this process), reading `live`, the set of live sessions this
        registry fills; `observer`: told of every call's events (the status API's hub); `on_output`: told when a
        handed-out call finishes, and (True) when a session's ready outputs change (`server.handles.output_watch`);
        `meters`: what its calls count into (`/metrics`); `sessions_per_principal`: `settings.limits.sessions`."""
        self.store = store
        self.meters = meters if meters is not None else Meters()
        self._tg = task_group
        self._max_output_bytes = max_output_bytes
        self._spooled = spooled  # the pool's: where the outputs of spooled results wait for `settle`
        self._default: Session | None = None
        self._owned: dict[str, Session] = {}  # by owner key (server.handles.owners)
        self.live: set[Session] = live if live is not None else set()
        self._observer = observer
        self._on_output = on_output
        self.shared = shared  # the shared claimcheck: every connection is the user's
        self.keep_outputs_secs = keep_outputs_secs
        self.sessions_per_principal = sessions_per_principal
        self.restarted_at = restarted_at  # the shared claimcheck took over from one that died (its time)
        self.backend: StateBackend = backend if backend is not None else LocalBackend(self.live)
        self._ended: OrderedDict[str, float] = OrderedDict()  # session id -> when it closed, the latest ENDED_KEPT
        task_group.start_soon(self._expire_forever)

    def ended_at(self, handle: str) -> float | None:
        """When the session of `handle` ended in this process, if it did (and is still remembered)."""
        session_id = session_of(handle)
        return self._ended.get(session_id) if session_id is not None else None

    def unknown_note(self, session: Session, handles: Sequence[str] = ()) -> str:
        """What an unknown-handle error adds: how long owned outputs live, and whether earlier ones are gone; in a
        session its connection owns, that the handle's session ended (or may have), and what keeps handles."""
        shared = self.backend.unknown_note()
        if session.owner is not None:
            return messages_owned_note(self.keep_outputs_secs, self.restarted_at) + shared
        ids = [session_of(handle) for handle in handles]
        ended = [self._ended[i] for i in ids if i is not None and i in self._ended]
        if ended:
            return ended_session_note(max(ended)) + shared
        if any(i is not None and i != session.id for i in ids):
            return ended_session_note(None) + shared
        return shared

    def for_request(self, ctx: ServerRequestContext[Any]) -> Session:
        """The session of the client that sent this request through the SDK, made or attached if need be."""
        return self.seat(ctx)[0]

    def seat(self, ctx: ServerRequestContext[Any]) -> tuple[Session, str]:
        """`for_request`'s session, and the origin of the request (`Entrance.origin`): for a request that
        starts calls or lists them."""
        entrance = Entrance(connection_of(ctx), owner_key(ctx, shared=self.shared), ctx.session, link_of(ctx))
        session = self.find(entrance, create=True)
        assert session is not None
        return session, entrance.origin

    def find(self, entrance: Entrance, *, create: bool = False) -> Session | None:
        """The one session lookup of every entrance (the SDK path, the stdio and HTTP fast paths): the session
        of the client `entrance` describes, which notes what the client declared. Without `create` (the fast
        paths, which have no request context), a session still to be made or attached is None: the SDK's path
        does that."""
        connection, owner = entrance.connection, entrance.owner
        state: dict[str, Any] | None = connection.state if connection is not None else None
        if owner is not None:
            session = self._owned.get(owner)
            if session is None or session.closed:
                if not create:
                    return None
                for idle in over_sessions(self._owned.values(), owner, self.sessions_per_principal):
                    del self._owned[idle.owner or ""]  # its principal opened one too many: the longest unused goes
                    self.spawn(functools.partial(self.close, idle))
                session = self._owned[owner] = self.open(owner)
            if state is not None and _STATE_KEY not in state:
                if not create:
                    return None
                state[_STATE_KEY] = session
                session.attached += 1
                connection.exit_stack.push_async_callback(self._detach, session)
            session.touched = time.time()
        elif state is None:
            if self._default is None or self._default.closed:
                if not create:
                    return None
                self._default = self.open()
            session = self._default
        else:
            session = state.get(_STATE_KEY)
            if session is None:
                if not create:
                    return None
                session = state[_STATE_KEY] = self.open()
                connection.exit_stack.push_async_callback(self.close, session)
        if not isinstance(session, Session) or (not create and (session.closed or session.owner != owner)):
            return None
        if entrance.client is not None:
            session.lists_roots = declares_roots(entrance.client)
            session.takes_links = reads_links(getattr(entrance.client, "protocol_version", None))
        session.last_request = time.monotonic()
        return session

    def roots_session(self) -> Session | None:
        """The session a server's `roots/list` outside any request goes to: the latest to send a request, of
        those whose client declared roots (over stdio, the one client)."""
        declared = [session for session in self.live if session.lists_roots and not session.closed]
        return max(declared, key=lambda session: session.last_request) if declared else None

    def open(self, owner: str | None = None) -> Session:
        """A new session; an owner's, with replicas, in the directory every replica computes for that owner."""
        key = _digest(owner)[:32] if owner is not None and self.backend.replicated else None
        session = Session(self.store.open_session(key), owner)
        self.live.add(session)
        return session

    def attached(self) -> int:
        """Connections open now on sessions that outlive them (the shared claimcheck's relays)."""
        return sum(session.attached for session in self._owned.values())

    async def _detach(self, session: Session) -> None:
        """A connection of an owned session closed: its calls go on, its outputs are kept (`_expire`)."""
        session.attached -= 1
        session.touched = time.time()

    async def _expire_forever(self) -> None:
        every = max(0.5, min(30.0, self.keep_outputs_secs / 4))
        while True:
            await anyio.sleep(every)
            await self.expire(time.time())

    async def expire(self, now: float) -> None:
        """Forget owned outputs untouched for keepOutputsSecs while no connection of their owner is open,
        and owned sessions left with nothing; running calls are kept to completion."""
        keep = self.keep_outputs_secs
        for owner, session in list(self._owned.items()):
            if session.attached > 0 or session.closed:
                continue
            for handle, call in list(session.calls.items()):
                last = max(call.log[-1][0] if call.log else call.started, session.touched)
                if call.finished.is_set() and now - last >= keep:
                    del session.calls[handle]
                    session.store.discard(handle)
                    self._output_changed(session, call, listed=call.handed_out and call.status == "ready")
            if not session.calls and now - session.touched >= keep:
                del self._owned[owner]
                await self.close(session)

    async def close(self, session: Session) -> None:
        """Cancel the session's running calls and delete its directory."""
        session.closed = True
        self.live.discard(session)
        self._ended[session.id] = time.time()
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)
        for call in session.calls.values():
            call.cancel(SESSION_ENDED)
        with anyio.move_on_after(5, shield=True):
            for call in list(session.calls.values()):
                await call.finished.wait()
        session.store.remove()

    async def close_all(self) -> None:
        for session in list(self.live):
            await self.close(session)

    def spawn(self, function: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `function` in the lifespan task group: it outlives the request that started it."""
        self._tg.start_soon(function)

    def new_call(
        self,
        session: Session,
        public_name: str,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        origin: str,
        ttl_ms: int | None = None,
    ) -> Call:
        """A call of `session`, described once: its handle, who started it (`origin`: `Entrance.origin`), its
        batch (the running calls it joins), and `ttl_ms` for a call started as an MCP task."""
        running = [other for other in session.calls.values() if other.status == "running"]
        description = Description(
            session.store.new_handle(),
            public_name,
            server,
            tool,
            arguments,
            session.id,
            owner_name(session.owner),
            origin,
            running[-1].batch_id if running else random_hex()[:12],
            ttl_ms,
        )
        return Call(description, observer=self._observer, meters=self.meters)

    def start(self, session: Session, call: Call, invoke: Invoke, policy: Policy, upstream: Relay | None) -> CallRelay:
        """Run `call` (made by `new_call`) in the lifespan task group; its relay follows `upstream` until detached."""
        relay = CallRelay(call, upstream, session.inbox, lambda: session.lists_roots)
        session.calls[call.handle] = call
        call.note("created", f"{call.server}/{call.tool}")
        self._tg.start_soon(self._traced if tracing.ENABLED else self._run, session, call, invoke, relay, policy)
        return relay

    async def _traced(self, session: Session, call: Call, invoke: Invoke, relay: CallRelay, policy: Policy) -> None:
        """`_run` in a span, with the downstream's call and the settling as its children (`server.tracing`)."""
        attributes = {"mcp.server": call.server, "gen_ai.tool.name": call.tool, "claimcheck.handle": call.handle}
        with tracing.span(f"claimcheck.call {call.server}/{call.tool}", attributes) as span:

            async def traced_invoke(relay: CallRelay) -> Any:
                with tracing.span("claimcheck.downstream", attributes):
                    return await invoke(relay)

            await self._run(session, call, traced_invoke, relay, policy)
            if span is not None:
                span.set_attribute("claimcheck.outcome", outcome_of(call.status, call.outcome, call.handed_out))

    async def _run(self, session: Session, call: Call, invoke: Invoke, relay: CallRelay, policy: Policy) -> None:
        with call.scope:
            try:
                result = await invoke(relay)
                if tracing.ENABLED:
                    with tracing.span("claimcheck.settle"):
                        await settle(session, call, result, policy, self._max_output_bytes, self._spooled)
                else:
                    await settle(session, call, result, policy, self._max_output_bytes, self._spooled)
            except ClaimcheckError as exc:
                _fail(call, str(exc))
            except Exception as exc:  # boundary: one call's answer must not end the process and every other call
                if isinstance(exc, ValidationError):  # the server's answer is no tool result: its fault, said below
                    logger.warning("server %r gave %r an answer that is no tool result", call.server, call.tool)
                else:
                    logger.exception("claimcheck failed on a call of %s", call.tool)
                if not call.finished.is_set():
                    reason = clip(" ".join(describe(exc).split()), DOWNSTREAM_MESSAGE_LIMIT)
                    _fail(call, f'Server "{call.server}" failed on tool "{call.tool}": an unusable answer ({reason})')
        if not call.finished.is_set():
            _fail(call, call.cancelled_by or "claimcheck stopped it", status="cancelled")
        if call.handed_out:
            self._output_changed(session, call, listed=call.status == "ready")
            with anyio.CancelScope(shield=True):
                await self.share(call)
        session.pulse()

    def _output_changed(self, session: Session, call: Call, *, listed: bool) -> None:
        if self._on_output is not None:
            self._on_output(session, call, listed)

    async def hand_out(self, call: Call, why: str) -> str:
        """Give the call a handle: its state is recorded (for every replica) before the handle is returned; what
        the answer adds when the shared state could not take it (the handle is this replica's alone until then)."""
        call.hand_out(HANDOFFS.get(why))
        call.note("handed-out", why)
        if call.finished.is_set():  # stored at once: its output is there to list from now
            session = next((s for s in self.live if s.calls.get(call.handle) is call), None)
            if session is not None:
                self._output_changed(session, call, listed=call.status == "ready")
        await self.share(call)
        return LOCAL_ONLY_NOTE if self.backend.unsent(call.handle) else ""

    async def share(self, call: Call) -> None:
        """Tell the backend this call's state as it is now."""
        await self.backend.put(snapshot(call, self.backend.replica))

    async def ensure_stored(self, session: Session, call: Call) -> None:
        """Store a finished small output once its handle has been handed out (for a mirror: read it back)."""
        if call.home is not None:
            await read_back(call)
            return
        if call.stored or call.result is None:
            return
        text = render_output(call.result)
        tokens, exact = await anyio.to_thread.run_sync(estimate_tokens, text)
        failure = await store_text(session, call, text)
        call.stored_afterwards(tokens, exact, stored=failure is None)
        await self.share(call)


def _digest(owner: str) -> str:
    return hashlib.sha256(owner.encode("utf-8", "replace")).hexdigest()


def _fail(call: Call, reason: str, *, status: Literal["failed", "cancelled"] = "failed") -> None:
    call.settle(Failed(reason), status)
