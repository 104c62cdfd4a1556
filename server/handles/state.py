"""Where handles live: the `StateBackend` seam, and the in-process `LocalBackend` that is the default.

The replica that starts a call runs it to the end and holds its rich `Call`; the backend holds what every
replica must be able to answer about a handle (`HandleState`): its status, sizes, owner and error. With
`LocalBackend` that is this process's own registry (`Sessions`), so nothing changes for stdio or a single
HTTP process; `server.handles.redis_state.RedisBackend` shares it between replicas.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio

from server.errors import ClaimcheckError
from server.handles.calls import Call, Description, Status
from server.handles.outcome import Output

if TYPE_CHECKING:
    from server.handles.session import Session
    from server.handles.store import SessionStore

__all__ = [
    "TERMINAL",
    "HandleState",
    "LocalBackend",
    "StateBackend",
    "StateUnavailable",
    "mirror",
    "snapshot",
]

TERMINAL = frozenset({"ready", "failed", "cancelled"})


class StateUnavailable(ClaimcheckError):
    """The shared state (Redis) could not be reached; what needs it fails with this, and nothing waits forever."""


@dataclass(frozen=True, slots=True)
class HandleState:
    """What any replica may know about one handed-out handle."""

    handle: str
    session: str
    owner: str  # the replica that runs the call
    tool: str  # its public name
    server: str
    status: Status
    started: float
    finished: float | None = None
    bytes: int = 0
    lines: int = 0
    tokens: int = 0
    tokens_exact: bool = True
    stored: bool = False
    inline: bool = False  # small enough that a wait returns it whole
    error: str | None = None
    progress: str | None = None
    origin: str = ""  # the connection, or for sessionless requests the owner, that started it

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


class StateBackend(Protocol):
    """Where handles live: in this process, or in Redis for replicas."""

    replica: str
    replicated: bool  # whether other replicas share these handles
    poll_secs: float  # how often a waiter reads again without being told (pub/sub is at-most-once)

    async def put(self, state: HandleState) -> None:
        """Record a handle's state before its handle (or task) is returned; a final status is never undone."""
        ...

    async def get(self, handles: Sequence[str]) -> list[HandleState | None]:
        """The states of `handles` (None: not known), read together; `StateUnavailable` when it cannot be read."""
        ...

    async def of_session(self, session: str) -> list[HandleState]:
        """Every known handle of a session, oldest first."""
        ...

    async def running(self, limit: int) -> tuple[list[HandleState], int]:
        """The newest `limit` running handles of every replica (newest first), and how many are running."""
        ...

    async def request_cancel(self, handle: str) -> bool:
        """Ask the owner to cancel a running call; False when it is not running."""
        ...

    def changed(self) -> anyio.Event:
        """An event set at the next change this replica hears of (a hint: waiters read again and poll)."""
        ...

    def unsent(self, handle: str) -> bool:
        """Whether this handle's state has not reached the shared state yet (it is known here alone)."""
        ...

    def unknown_note(self) -> str:
        """What an unknown-handle error adds about the shared state (a restart the replicas are still writing
        their handles back after), or ""."""
        ...


class LocalBackend:
    """Today's in-process registry behind the seam: every handle lives in this process's `Sessions`."""

    replicated = False
    poll_secs = 5.0

    def __init__(self, live: AbstractSet[Session]) -> None:
        """`live`: the live sessions (`Sessions.live`), read here, written by the registry alone."""
        self.replica = "local"
        self._live = live
        self._changed = anyio.Event()

    async def put(self, state: HandleState) -> None:
        if state.done:
            self._changed.set()
            self._changed = anyio.Event()

    def unsent(self, handle: str) -> bool:
        return False

    def unknown_note(self) -> str:
        return ""

    async def get(self, handles: Sequence[str]) -> list[HandleState | None]:
        calls = {h: c for s in self._live for h, c in s.calls.items() if c.handed_out}
        return [snapshot(calls[h], self.replica) if h in calls else None for h in handles]

    async def of_session(self, session: str) -> list[HandleState]:
        found = [s for s in self._live if s.id == session]
        return [snapshot(c, self.replica) for s in found for c in s.handed_out()]

    async def running(self, limit: int) -> tuple[list[HandleState], int]:
        calls = [c for s in self._live for c in s.handed_out() if c.status == "running"]
        calls.sort(key=lambda c: c.started, reverse=True)
        return [snapshot(c, self.replica) for c in calls[:limit]], len(calls)

    async def request_cancel(self, handle: str) -> bool:
        for session in self._live:
            call = session.calls.get(handle)
            if call is not None and call.status == "running":
                call.cancel("cancel_tool_output was called for it from another session")
                return True
        return False

    def changed(self) -> anyio.Event:
        return self._changed


def snapshot(call: Call, owner: str) -> HandleState:
    """The shareable state of a call of this replica."""
    small = call.result is not None and not call.over_threshold
    return HandleState(
        handle=call.handle,
        session=call.session_id,
        owner=owner,
        tool=call.public_name,
        server=call.server,
        status=call.status,
        started=call.started,
        finished=call.finished_at,
        bytes=call.bytes,
        lines=call.lines,
        tokens=call.tokens,
        tokens_exact=call.tokens_exact,
        stored=call.stored,
        inline=small,
        error=call.error,
        progress=call.progress.describe() if call.progress else None,
        origin=call.origin,
    )


def mirror(state: HandleState, store: SessionStore) -> Call:
    """A read-only `Call` standing for a handle another replica runs: its description, and its outcome once final
    (`update`); its output is read from the shared `store`."""
    started_mono = time.monotonic() - (time.time() - state.started)
    description = Description(
        state.handle,
        state.tool,
        state.server,
        state.tool,
        {},
        session_id=state.session,
        origin=state.origin,
        started=state.started,
        started_mono=started_mono,
    )
    call = Call(description, home=store)
    update(call, state)
    return call


def update(call: Call, state: HandleState) -> None:
    """Bring a mirror up to `state`; it finishes (with its outcome) once the state is final."""
    output = Output(
        bytes=state.bytes,
        lines=state.lines,
        tokens=state.tokens,
        tokens_exact=state.tokens_exact,
        tokens_counted=True,
        stored=state.stored,
        over_threshold=not state.inline,
    )
    call.follow(state.status, output, inline=state.inline, error=state.error, finished=state.finished)
