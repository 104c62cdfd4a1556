"""The requests forwarded to one downstream that are still waiting, and where the server's own requests go.

A downstream's log messages go to every waiting request's relay; its sampling, elicitation and
roots requests go to the newest one (the protocol does not say which call asked). Each is bounded by
that request's timeout: a question nobody answers in time gets an error the downstream can report, a
little before the request itself is cut, so the call ends with the downstream's own account of it.
A `roots/list` made outside any request (a server asks when it starts, or when told the roots
changed) goes to `outside_roots`, set by the proxy, bounded by the server's timeout.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import anyio
import mcp_types as types

from server.downstream.relay import Relay, RootsParams, no_roots

__all__ = ["InFlight", "OutsideRoots", "Waiting"]

Kind = Literal["sampling", "elicitation", "roots"]
OutsideRoots = Callable[[], Awaitable[types.ListRootsResult | types.ErrorData]]


@dataclass(eq=False)
class Waiting:
    """One forwarded request: its relay, when it was sent, and its questions to the client."""

    relay: Relay | None
    order: int
    started: float
    unanswered: Kind | None = None
    """The kind of its last request that nobody answered in time."""
    questions: set[anyio.CancelScope] = field(default_factory=set)
    """The scopes of its questions still waiting: they end with the request."""


class InFlight:
    """Forwarded requests of one downstream, each with the timeout `timeout`."""

    def __init__(
        self,
        server: str,
        timeout: float,
        *,
        outside_roots: OutsideRoots | None = None,
        fixed_roots: OutsideRoots | None = None,
    ) -> None:
        self.server = server
        self.timeout = timeout
        self._waiting: list[Waiting] = []
        self._order = itertools.count(1)
        self.outside_roots = outside_roots
        """Where a `roots/list` made outside any forwarded request goes; without it, it gets `no_roots()`."""
        self.fixed_roots = fixed_roots
        """When set, the answer to every `roots/list`: a process that serves several clients never hears one's
        roots (`server.downstream.scopes`)."""
        self.idle_since = time.monotonic()
        """When the last request ended (or the process was made): an instance idle long enough is stopped."""

    @property
    def busy(self) -> bool:
        return bool(self._waiting)

    @contextmanager
    def track(self, relay: Relay | None) -> Iterator[Waiting]:
        """Count a request as waiting for the block."""
        waiting = Waiting(relay, next(self._order), anyio.current_time())
        self._waiting.append(waiting)
        try:
            yield waiting
        finally:
            self._waiting.remove(waiting)
            self.idle_since = time.monotonic()
            for scope in waiting.questions:
                scope.cancel()  # the request is over: its questions need no answer any more

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        for waiting in list(self._waiting):
            if waiting.relay is not None:
                await waiting.relay.log(params)

    async def sample(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        waiting = self._newest()
        if waiting is None or waiting.relay is None:
            return _nobody("sampling")
        with self._bounded(waiting, "sampling"):
            return await waiting.relay.sample(params)
        return self._unanswered(waiting, "sampling")

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        waiting = self._newest()
        if waiting is None or waiting.relay is None:
            return _nobody("elicitation")
        with self._bounded(waiting, "elicitation"):
            return await waiting.relay.elicit(params)
        return self._unanswered(waiting, "elicitation")

    async def list_roots(self) -> types.ListRootsResult | types.ErrorData:
        """Through the newest request, like the other questions; but roots are the client's, not the call's: when
        that request ends first, the question goes on as one made outside any request."""
        if self.fixed_roots is not None:
            return await self.fixed_roots()
        waiting = self._newest()
        if waiting is not None and waiting.relay is not None:
            with self._bounded(waiting, "roots"):
                return await waiting.relay.list_roots(RootsParams())
            if waiting in self._waiting:
                return self._unanswered(waiting, "roots")
        if self.outside_roots is None:
            return no_roots()
        with anyio.move_on_after(self.timeout):
            return await self.outside_roots()
        return types.ErrorData(
            code=types.REQUEST_TIMEOUT,
            message=(
                "nobody answered the roots request: claimcheck held it for the client for the server's "
                f'timeout ({self.timeout:g} s, server "{self.server}")'
            ),
        )

    def _newest(self) -> Waiting | None:
        relayed = [waiting for waiting in self._waiting if waiting.relay is not None]
        return max(relayed, key=lambda waiting: waiting.order) if relayed else None

    @contextmanager
    def _bounded(self, waiting: Waiting, kind: Kind) -> Iterator[None]:
        """Until a little before the request's timeout (the downstream hears first, and can say so), or
        until the request ends."""
        margin = min(1.0, self.timeout / 10)
        with anyio.CancelScope(deadline=waiting.started + self.timeout - margin) as scope:
            waiting.questions.add(scope)
            try:
                yield
            finally:
                waiting.questions.discard(scope)

    def _unanswered(self, waiting: Waiting, kind: Kind) -> types.ErrorData:
        if waiting not in self._waiting:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"the call that made this {kind} request ended")
        waiting.unanswered = kind
        return types.ErrorData(
            code=types.REQUEST_TIMEOUT,
            message=(
                f"nobody answered the {kind} request: claimcheck held it for the client until the timeout "
                f'of the call ({self.timeout:g} s, server "{self.server}")'
            ),
        )


def _nobody(kind: Kind) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST, message=f"no client request is waiting on this server to take its {kind} request"
    )
