"""The requests the fast path writes to a stdio server as bytes, and the lines that go back to them.

`server.downstream.stdio` offers each line it reads to the channel while a raw request waits: the response
to a raw request (told apart by its id), progress on one, and the server's log messages (relayed here so
they keep their order with the response) are taken; everything else goes to the SDK's session as always. A
request that can stream its answer while it is read (`follows`: a pass-through) is answered with the output of
a long tool result as it grows (`take_growing`), before the message has ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from server.downstream.spool import MessageSpool
from server.downstream.spooled import GrowingOutput

__all__ = ["RawAnswer", "RawChannel"]

logger = logging.getLogger(__name__)

RawAnswer = tuple[bytes, dict[str, Any]] | SessionMessage | GrowingOutput | None
"""What a raw request gets back: the response line and its parsed form, a spooled stand-in of a long
response (the SDK's message), a long tool result's output as it is spooled (only to a request in `follows`),
or None when the connection closed first."""


class RawChannel:
    """Requests the fast path writes as bytes, and the responses that go back to them instead of the session.

    Ids of raw requests come from a range far above the SDK client's counter (which starts at 0), exact as
    JSON numbers in every language, so a response is told apart by its id alone."""

    BASE = 1 << 50

    def __init__(
        self, on_log: Callable[[types.LoggingMessageNotificationParams], Awaitable[None]] | None = None
    ) -> None:
        self.on_log = on_log
        self.waiting: dict[int, asyncio.Future[RawAnswer]] = {}
        self.progress: dict[int, Callable[[float, float | None, str | None], Awaitable[None]]] = {}
        self.follows: set[int] = set()
        """Waiting requests that take a long tool result's output while it grows (`take_growing`)."""
        self.send: Callable[[bytes], Awaitable[None]] | None = None
        self.send_nowait: Callable[[bytes], bool] | None = None
        self.closed = False
        self._next = self.BASE

    def new_id(self) -> int:
        self._next += 1
        return self._next

    async def take_line(self, line: bytes) -> bool:
        """Hand `line` to its raw request if it is the response to one, or progress reported on one."""
        try:
            parsed = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past what json's C scanner recurses
            return False
        if not isinstance(parsed, dict):
            return False
        ident = parsed.get("id")
        if "method" in parsed:
            if parsed["method"] == "notifications/progress" and "id" not in parsed:
                return await self._progress(parsed.get("params"))
            if parsed["method"] == "notifications/message" and "id" not in parsed:
                return await self._log(parsed.get("params"))
            return False
        if type(ident) is not int or ident not in self.waiting:
            return False
        self._deliver(ident, (line, parsed))
        return True

    async def _log(self, params: Any) -> bool:
        """A log message, relayed here while a raw request waits: through the session it could arrive after
        the response it came before, when the request has stopped relaying."""
        if self.on_log is None:
            return False
        try:
            message = types.LoggingMessageNotificationParams.model_validate(params, by_name=False)
        except ValueError:
            return False  # the session reports it as it does any malformed message
        try:
            await self.on_log(message)
        except Exception:
            logger.exception("relaying a log message failed")
        return True

    async def _progress(self, params: Any) -> bool:
        token = params.get("progressToken") if isinstance(params, dict) else None
        report = self.progress.get(token) if type(token) is int else None
        progress, total, message = (params.get(k) for k in ("progress", "total", "message"))
        if report is None or not _number(progress) or not (total is None or _number(total)):
            return False  # the session's own (or not well-formed: the SDK says so, as for any request)
        try:
            await report(progress, total, message if isinstance(message, str) else None)
        except Exception:  # a relay's failure must not end the connection's reading
            logger.exception("relaying progress failed")
        return True

    def take_message(self, message: SessionMessage | Exception) -> bool:
        """Hand a spooled stand-in to its raw request if it is the response to one."""
        if not isinstance(message, SessionMessage):
            return False
        inner = message.message
        if not isinstance(inner, types.JSONRPCResponse) or type(inner.id) is not int or inner.id not in self.waiting:
            return False
        self._deliver(inner.id, message)
        return True

    def take_growing(self, spooler: MessageSpool) -> bool:
        """Hand a long tool result's output, as it grows, to its request, if that request follows one."""
        ident = spooler.followable_id()
        if type(ident) is not int or ident not in self.follows:
            return False
        waiter = self.waiting.get(ident)
        if waiter is None or waiter.done():
            return False
        self._deliver(ident, spooler.follow())
        return True

    def _deliver(self, ident: int, answer: RawAnswer) -> None:
        waiter = self.waiting.pop(ident)
        if not waiter.done():  # else the request gave up meanwhile
            waiter.set_result(answer)

    def close(self) -> None:
        """The connection is gone: every waiting request hears None."""
        self.closed = True
        for ident in list(self.waiting):
            self._deliver(ident, None)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
