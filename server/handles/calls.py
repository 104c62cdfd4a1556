"""Proxied calls that may outlive the request that started them.

Every call of a proxied tool runs in the proxy's lifespan task group; the request only waits for it
(up to `asyncTimeoutSecs`). A call that finishes late, or whose output is over the token threshold,
is kept under a handle in its session, with its output stored whole in the session's directory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

import anyio
import mcp_types as types

from server.handles.meters import Meters, outcome_of
from server.handles.outcome import NO_OUTPUT, Failed, Inline, Lost, Outcome, Output, Stored

if TYPE_CHECKING:
    from server.handles.store import SessionStore

__all__ = ["STATUSES", "Call", "Description", "Progress", "Status"]

Status = Literal["running", "ready", "failed", "cancelled"]
STATUSES: tuple[Status, ...] = get_args(Status)
"""Every status a call can have, in the order it may reach them."""


@dataclass(frozen=True, slots=True)
class Progress:
    progress: float
    total: float | None
    message: str | None

    def describe(self) -> str:
        amount = f"{self.progress:g}/{self.total:g}" if self.total else f"{self.progress:g}"
        return f"progress {amount}" + (f" ({self.message})" if self.message else "")


@dataclass(frozen=True, slots=True)
class Description:
    """What was asked, and by whom: fixed when the call is made (`Sessions.new_call`, or `state.mirror`)."""

    handle: str
    public_name: str
    server: str
    tool: str
    arguments: dict[str, Any]
    session_id: str = ""
    owner: str | None = None  # whom its session's owner key names (`owners.owner_name`); None: the connection's
    origin: str = ""  # the connection that started it, in a session several share (server.handles.owners)
    batch_id: str = ""
    ttl_ms: int | None = None  # when the call was started as an MCP task
    started: float = field(default_factory=time.time)
    started_mono: float = field(default_factory=time.monotonic)


class Call:
    """One proxied call: its `description` (frozen), how it ended (`outcome` and the measured `output`, set once,
    by `settle`), and a small lifecycle: progress, hand-out, reads, cancel. Every field is read-only from outside;
    the methods below are its only writers. The old flags (`result`, `answer`, `fallback`, `error`, `stored`,
    `over_threshold`) are views of the outcome and the output."""

    __slots__ = (
        "_cancelled_by",
        "_description",
        "_error",
        "_finished",
        "_finished_mono",
        "_handed_out",
        "_handoff",
        "_home",
        "_log",
        "_meters",
        "_observer",
        "_on_finish",
        "_outcome",
        "_output",
        "_progress",
        "_retrievals",
        "_scope",
        "_seen",
        "_status",
    )

    def __init__(
        self,
        description: Description,
        *,
        observer: Callable[[Call, str], None] | None = None,
        meters: Meters | None = None,
        home: SessionStore | None = None,
    ) -> None:
        self._description = description
        self._home = home
        self._finished = anyio.Event()
        self._scope = anyio.CancelScope()
        self._log: list[tuple[float, str, str]] = []
        self._observer = observer
        self._meters = meters  # where it is counted once it finishes (its proxy's); a mirror has none
        self._status: Status = "running"
        self._finished_mono: float | None = None
        self._outcome: Outcome | None = None
        self._output = NO_OUTPUT
        self._error: str | None = None
        self._progress: Progress | None = None
        self._handed_out = home is not None
        self._handoff: str | None = None
        self._cancelled_by: str | None = None
        self._seen = False
        self._retrievals = 0
        self._on_finish: Callable[[], None] | None = None

    @property
    def description(self) -> Description:
        return self._description

    @property
    def home(self) -> SessionStore | None:
        """Set on a mirror of another replica's call (`state.mirror`): where its output is. Only handed-out calls
        are shared, so a mirror is handed out."""
        return self._home

    @property
    def finished(self) -> anyio.Event:
        """Set once it has finished: its outcome is there to read."""
        return self._finished

    @property
    def scope(self) -> anyio.CancelScope:
        """What it runs in (`Sessions._run`); `cancel` cancels it."""
        return self._scope

    @property
    def log(self) -> list[tuple[float, str, str]]:
        """The events of its life (`note`): time, kind, detail."""
        return self._log

    @property
    def handle(self) -> str:
        return self._description.handle

    @property
    def public_name(self) -> str:
        return self._description.public_name

    @property
    def server(self) -> str:
        return self._description.server

    @property
    def tool(self) -> str:
        return self._description.tool

    @property
    def arguments(self) -> dict[str, Any]:
        return self._description.arguments

    @property
    def session_id(self) -> str:
        return self._description.session_id

    @property
    def owner(self) -> str | None:
        return self._description.owner

    @property
    def origin(self) -> str:
        return self._description.origin

    @property
    def batch_id(self) -> str:
        return self._description.batch_id

    @property
    def ttl_ms(self) -> int | None:
        return self._description.ttl_ms

    @property
    def started(self) -> float:
        return self._description.started

    @property
    def started_mono(self) -> float:
        return self._description.started_mono

    @property
    def arguments_json(self) -> str:
        return json.dumps(self._description.arguments, ensure_ascii=False, sort_keys=True)

    @property
    def status(self) -> Status:
        return self._status

    @property
    def outcome(self) -> Outcome | None:
        """How it ended (set just before it finishes; None while it runs, and while a mirror runs)."""
        return self._outcome

    @property
    def output(self) -> Output:
        return self._output

    @property
    def result(self) -> types.CallToolResult | None:
        """The small result answered as it came (`Inline`), for a mirror once read back; else None."""
        return self._outcome.result if isinstance(self._outcome, Inline) else None

    @property
    def answer(self) -> dict[str, Any] | None:
        """The fast path's inline answer: the downstream's plain-text result object as it came (`result` is None)."""
        return self._outcome.raw if isinstance(self._outcome, Inline) else None

    @property
    def fallback(self) -> str | None:
        """What is answered for a big output that could not be stored (`Lost`)."""
        return self._outcome.message if isinstance(self._outcome, Lost) else None

    @property
    def error(self) -> str | None:
        """Why it failed: a `Failed`'s reason, a `Lost`'s message, or the tool's own error (set by `settle`)."""
        return self._error

    @property
    def bytes(self) -> int:
        return self._output.bytes

    @property
    def produced(self) -> int:
        return self._output.produced

    @property
    def lines(self) -> int:
        return self._output.lines

    @property
    def tokens(self) -> int:
        return self._output.tokens

    @property
    def tokens_exact(self) -> bool:
        return self._output.tokens_exact

    @property
    def sha256(self) -> str:
        return self._output.sha256

    @property
    def cut(self) -> bool:
        return self._output.cut

    @property
    def stored(self) -> bool:
        return self._output.stored

    @property
    def over_threshold(self) -> bool:
        return self._output.over_threshold

    def tokens_or_none(self) -> int | None:
        return self._output.tokens if self._output.tokens_counted else None

    def tokens_label(self) -> str:
        return f"{self._output.tokens}" if self._output.tokens_exact else f"~{self._output.tokens}"

    @property
    def finished_mono(self) -> float | None:
        return self._finished_mono

    @property
    def finished_at(self) -> float | None:
        end = self._finished_mono
        return None if end is None else self._description.started + (end - self._description.started_mono)

    def elapsed(self) -> float:
        end = self._finished_mono if self._finished_mono is not None else time.monotonic()
        return end - self._description.started_mono

    @property
    def progress(self) -> Progress | None:
        return self._progress

    @property
    def handed_out(self) -> bool:
        return self._handed_out

    @property
    def handoff(self) -> str | None:
        """What handed it out: "time" (the time rule), "background", "size" or "task" (`Sessions.hand_out`)."""
        return self._handoff

    @property
    def cancelled_by(self) -> str | None:
        """Why it was cancelled, said by whoever cancelled it first (`cancel`)."""
        return self._cancelled_by

    @property
    def seen(self) -> bool:
        return self._seen

    @property
    def retrievals(self) -> int:
        return self._retrievals

    def note(self, kind: str, detail: str = "") -> None:
        """Record an event of this call's life, and tell the observer (status API, history)."""
        self._log.append((time.time(), kind, detail))
        if self._observer is not None:
            self._observer(self, kind)

    def report(self, progress: Progress) -> None:
        """The downstream's progress notification."""
        self._progress = progress
        self.note("progress", progress.describe())

    def hand_out(self, handoff: str | None) -> None:
        """It is answered with its handle (`Sessions.hand_out` notes why)."""
        self._handed_out = True
        if handoff is not None:
            self._handoff = handoff

    def mark_seen(self) -> None:
        """The model has been told of its output."""
        self._seen = True

    def retrieved(self) -> None:
        """Its output (or part of it) was given to the model."""
        self._seen = True
        self._retrievals += 1

    def then(self, on_finish: Callable[[], None] | None) -> None:
        """Call `on_finish` once, when the call finishes, instead of what was asked before (None: nothing). The stdio
        fast path answers its request from here."""
        self._on_finish = on_finish

    def cancel(self, why: str) -> None:
        """Stop the call, saying why (the first reason given is kept: it is what stopped it)."""
        if self._cancelled_by is None and not self._finished.is_set():
            self._cancelled_by = why
        self._scope.cancel()

    def settle(self, outcome: Outcome, status: Status, output: Output = NO_OUTPUT, *, error: str | None = None) -> bool:
        """Finish the call with its outcome, once: what its waiters and `on_finish` read is set before they wake.
        `error` defaults to a `Failed`'s reason and a `Lost`'s message. False (and nothing changes): it had finished,
        or it is a mirror (`follow` brings those up to their replica's state)."""
        if self._finished.is_set() or self._home is not None:
            return False
        if error is None and isinstance(outcome, Failed | Lost):
            error = outcome.reason if isinstance(outcome, Failed) else outcome.message
        self._outcome, self._output, self._error, self._status = outcome, output, error, status
        self._finished_mono = time.monotonic()
        self._finished.set()
        if self._meters is not None:  # a mirror's call is counted by its replica
            kind = outcome_of(status, outcome, self._handed_out)
            self._meters.finished(self.server, self.tool, kind, self.elapsed(), output.bytes if output.stored else 0)
        self.note("finished", status if error is None else f"{status}: {error.strip()[:500]}")
        if self._on_finish is not None:
            on_finish, self._on_finish = self._on_finish, None
            on_finish()
        return True

    def stored_afterwards(self, tokens: int, exact: bool, *, stored: bool) -> None:
        """A small output counted (and, `stored`, written under its handle) once its handle was handed out."""
        output = self._output.counted(tokens, exact)
        self._output = output._replace(stored=True) if stored else output

    def digested(self, sha256: str) -> None:
        """A spooled output's digest, taken when extraction first asks for it."""
        self._output = self._output._replace(sha256=sha256)

    def follow(
        self, status: Status, output: Output, *, inline: bool, error: str | None, finished: float | None
    ) -> None:
        """A mirror brought up to what its replica shared (`state.update`): its outcome is set once it is final."""
        if self._home is None:
            return
        self._status, self._output, self._error = status, output, error
        if status != "running" and not self._finished.is_set():
            if inline:
                self._outcome = Inline()  # its result is read back from the shared store (`show`)
            else:
                self._outcome = Stored(status != "ready") if output.stored else Failed(error or f"the call {status}")
            end = finished if finished is not None else time.time()
            self._finished_mono = self._description.started_mono + max(0.0, end - self._description.started)
            self._finished.set()

    def show(self, result: types.CallToolResult) -> None:
        """A mirror's small ready output, read back from the shared store (`mirrors.read_back`)."""
        if self._home is not None and isinstance(self._outcome, Inline):
            self._outcome = Inline(result)
