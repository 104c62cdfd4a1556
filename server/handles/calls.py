"""Proxied calls that may outlive the request that started them.

Every call of a proxied tool runs in the proxy's lifespan task group; the request only waits for it
(up to `asyncTimeoutSecs`). A call that finishes late, or whose output is over the token threshold,
is kept under a handle in its session, with its output stored whole in the session's directory.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types

from server.downstream.relay import Relay, RootsParams
from server.framing import dump_json
from server.handles import questions
from server.handles.meters import meters, outcome_of
from server.handles.outcome import Outcome

if TYPE_CHECKING:
    from server.handles.store import SessionStore

__all__ = ["Call", "CallRelay", "Progress", "Status", "render_output"]

Status = Literal["running", "ready", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class Progress:
    progress: float
    total: float | None
    message: str | None

    def describe(self) -> str:
        amount = f"{self.progress:g}/{self.total:g}" if self.total else f"{self.progress:g}"
        return f"progress {amount}" + (f" ({self.message})" if self.message else "")


@dataclass(eq=False)
class Call:
    """One proxied call: its identity, its state, and (once finished) its output."""

    handle: str
    public_name: str
    server: str
    tool: str
    arguments: dict[str, Any]
    started: float = field(default_factory=time.time)
    started_mono: float = field(default_factory=time.monotonic)
    status: Status = "running"
    finished_mono: float | None = None
    finished: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    progress: Progress | None = None
    result: types.CallToolResult | None = None
    answer: dict[str, Any] | None = None
    """The fast path's inline answer: the downstream's plain-text result object as it came (`result` is None)."""
    error: str | None = None
    text: str | None = None
    bytes: int = 0
    lines: int = 0
    tokens: int = 0
    tokens_exact: bool = True
    tokens_counted: bool = False  # a small inline result is never counted
    sha256: str = ""  # of a spooled output: "" until extraction asks for it (`SessionStore.sha256`)
    produced: int = 0  # bytes the tool produced; more than `bytes` when the output was cut or not stored
    cut: bool = False  # only the first maxOutputBytes were kept
    stored: bool = False
    fallback: str | None = None  # a truncated answer, when a big output could not be stored
    over_threshold: bool = False
    handed_out: bool = False
    ttl_ms: int | None = None  # set when the call was started as an MCP task
    seen: bool = False
    retrievals: int = 0
    session_id: str = ""
    origin: str = ""  # the connection that started it, in a session several share (server.handles.owners)
    owner: str | None = None  # whom its session's owner key names (`owners.owner_name`); None: the connection's
    batch_id: str = ""
    log: list[tuple[float, str, str]] = field(default_factory=list)
    observer: Callable[[Call, str], None] | None = None
    on_finish: Callable[[], None] | None = None
    """Called once, when the call finishes (the stdio fast path answers its request from here)."""
    home: SessionStore | None = None  # set on a mirror of another replica's call: where its output is
    outcome: Outcome | None = None
    """How it ended (set just before it finishes; None while it runs, and on a mirror)."""
    handoff: str | None = None
    """What handed it out: "time" (the time rule), "background", "size" or "task" (`Sessions.hand_out`)."""
    cancelled_by: str | None = None
    """Why it was cancelled, said by whoever cancelled it first (`cancel`)."""

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)

    def elapsed(self) -> float:
        end = self.finished_mono if self.finished_mono is not None else time.monotonic()
        return end - self.started_mono

    @property
    def finished_at(self) -> float | None:
        return None if self.finished_mono is None else self.started + (self.finished_mono - self.started_mono)

    def note(self, kind: str, detail: str = "") -> None:
        """Record an event of this call's life, and tell the observer (status API, history)."""
        self.log.append((time.time(), kind, detail))
        if self.observer is not None:
            self.observer(self, kind)

    def cancel(self, why: str) -> None:
        """Stop the call, saying why (the first reason given is kept: it is what stopped it)."""
        if self.cancelled_by is None and not self.finished.is_set():
            self.cancelled_by = why
        self.scope.cancel()

    def finish(self, status: Status) -> None:
        self.status = status
        self.finished_mono = time.monotonic()
        self.finished.set()
        if self.home is None:  # a mirror of another replica's call is counted there
            outcome = outcome_of(status, self.outcome, self.handed_out)
            meters.finished(self.server, self.tool, outcome, self.elapsed(), self.bytes if self.stored else 0)
        self.note("finished", status if self.error is None else f"{status}: {self.error.strip()[:500]}")
        if self.on_finish is not None:
            on_finish, self.on_finish = self.on_finish, None
            on_finish()

    def set_output(self, text: str, *, tokens: int | None, tokens_exact: bool, over: bool) -> None:
        data = text.encode("utf-8", "replace")
        self.text = text
        self.bytes = self.produced = len(data)
        self.lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.over_threshold = over
        if tokens is not None:
            self.set_tokens(tokens, tokens_exact)

    def set_stored_output(self, *, bytes: int, produced: int, lines: int, cut: bool, sha256: str = "") -> None:
        """What was measured of an output that went to its file without passing through memory."""
        self.text = None
        self.bytes, self.produced, self.lines, self.sha256, self.cut = bytes, produced, lines, sha256, cut

    def set_tokens(self, tokens: int, exact: bool) -> None:
        self.tokens, self.tokens_exact, self.tokens_counted = tokens, exact, True

    def tokens_or_none(self) -> int | None:
        return self.tokens if self.tokens_counted else None

    def tokens_label(self) -> str:
        return f"{self.tokens}" if self.tokens_exact else f"~{self.tokens}"


class CallRelay:
    """The relay a background-capable call gives its downstream: it follows the request while one waits.

    A sampling, elicitation or roots request the waiting request cannot carry (there is none any more,
    or its client cannot be sent requests) waits in the session's inbox (`server.handles.questions`);
    `lists_roots` says whether the session's client declared roots (else roots get the spec's error).
    """

    def __init__(self, call: Call, upstream: Relay | None, lists_roots: Callable[[], bool] = lambda: False) -> None:
        self._call = call
        self.upstream = upstream
        self._lists_roots = lists_roots

    def reaches_client(self) -> bool:
        return True  # what the request cannot carry waits for the session's next request

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._call.progress = Progress(progress, total, message)
        self._call.note("progress", self._call.progress.describe())
        if self.upstream is not None:
            await self.upstream.progress(progress, total, message)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self.upstream is not None:
            await self.upstream.log(params)

    async def sample(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        return questions.sampling_answer(await self._ask(params, "sampling"))

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        return questions.elicitation_answer(await self._ask(params, "elicitation"))

    async def list_roots(self, params: RootsParams) -> types.ListRootsResult | types.ErrorData:
        return questions.roots_answer(await self._ask(params, "roots"))

    async def _ask(self, params: questions.Params, kind: str) -> questions.Answer:
        call, upstream = self._call, self.upstream
        if upstream is None or not upstream.reaches_client():
            call.note("question", f"a {kind} request waits for an answer")
        session, tool, handle = call.session_id, call.public_name, call.handle
        roots = self._lists_roots()
        task = call.ttl_ms is not None  # an MCP task: its questions go through tasks/result
        answer = await questions.ask_or_wait(
            upstream, session, params, tool=tool, handle=handle, lists_roots=roots, task=task
        )
        call.note("answered", f"the {kind} request was answered")
        return answer


def render_output(result: types.CallToolResult) -> str:
    """The text a model would have seen: text items as they are, anything else as one line of JSON."""
    parts: list[str] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            parts.append(item.text)
        else:
            parts.append(dump_json(item, exclude_unset=False, exclude_none=True))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
