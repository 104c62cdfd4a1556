"""The relay a proxied call gives its downstream: progress, logs and questions, to the request while one waits."""

from __future__ import annotations

from collections.abc import Callable

import mcp_types as types

from server.downstream.relay import Relay, RootsParams
from server.handles import questions
from server.handles.calls import Call, Progress

__all__ = ["CallRelay"]


class CallRelay:
    """The relay a background-capable call gives its downstream: it follows the request while one waits.

    A sampling, elicitation or roots request the waiting request cannot carry (there is none any more,
    or its client cannot be sent requests) waits in the session's inbox (`server.handles.questions`);
    `lists_roots` says whether the session's client declared roots (else roots get the spec's error).
    """

    def __init__(
        self,
        call: Call,
        upstream: Relay | None,
        inbox: questions.Inbox,
        lists_roots: Callable[[], bool] = lambda: False,
    ) -> None:
        """`inbox`: the questions of the call's session, where what the request cannot carry waits."""
        self._call = call
        self._inbox = inbox
        self.upstream = upstream
        self._lists_roots = lists_roots

    def reaches_client(self) -> bool:
        return True  # what the request cannot carry waits for the session's next request

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._call.report(Progress(progress, total, message))
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
        tool, handle = call.public_name, call.handle
        roots = self._lists_roots()
        task = call.ttl_ms is not None  # an MCP task: its questions go through tasks/result
        answer = await questions.ask_or_wait(
            upstream, self._inbox, params, tool=tool, handle=handle, lists_roots=roots, task=task
        )
        call.note("answered", f"the {kind} request was answered")
        return answer
