"""A pass-through call on the stdio fast path: the claimcheck in front makes the handles, this one forwards.

A call whose `_meta` holds `io.claimcheck/passthrough` (`server.downstream.chain`) is answered as the SDK's path
answers it (`forwarding.forward` with `passthrough`): no time rule, no size rule, no handle, no footer, no `Call`
record; but the downstream is called as bytes (`server.downstream.rawcall`) and nothing is parsed into models
on the way unless it must be. The answer:

- a plain-text result: as the downstream gave it, under the client's id;
- any other result: with the downstream's error note (`forwarding.inline_result`), shaped by the SDK's
  serializer;
- a result the downstream's transport spooled to a file: streamed from that file (`streamed.write_spooled`),
  never held whole, unless the spool kept its whole message (then read from it, at most 16 MiB);
- a failure of claimcheck's (the server is down, timed out, said an error): its error result, as on the SDK's
  path; anything unexpected: the internal error the SDK's dispatcher would answer.

The claimcheck in front sends a progress token; progress the downstream reports goes back under it, as
`notifications/progress` lines through the same writer, before the answer (the SDK's path relays it too).
A `notifications/cancelled` cancels the downstream call and the request is never answered, unless its answer
is already being written: a line cannot be taken back, so it is finished.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types

from server.downstream.pool import Route
from server.downstream.rawcall import RawResult, RawSent, call_raw, send_now
from server.downstream.spooled import SpooledOutput, materialize
from server.errors import ClaimcheckError
from server.handles.meters import meters
from server.proxy import Proxy
from server.upstream.line_writer import LineWriter
from server.upstream.plain_call import CallContext, Envelope, FastRelay, RequestId, line, result_line
from server.upstream.replies import inline_result, text_result
from server.upstream.streamed import streamable, write_spooled

__all__ = ["Passthrough", "PassthroughRelay"]

logger = logging.getLogger(__name__)


class PassthroughRelay(FastRelay):
    """The relay of a pass-through call: as `FastRelay`, and the downstream's progress goes to the client under
    the request's progress token, written as the SDK writes it."""

    def __init__(
        self,
        context: CallContext,
        min_log_level: types.LoggingLevel | None,
        writer: LineWriter,
        token: RequestId | None,
    ) -> None:
        super().__init__(context, min_log_level)
        self._writer = writer
        self._token = token

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._token is None:
            return
        params: dict[str, Any] = {"progressToken": self._token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        data = line({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        if self._writer.full():
            await self._writer.write(data)  # a client that does not read: the downstream waits, not memory
        else:
            self._writer.write_nowait(data)


class Passthrough:
    """One pass-through call taken by the fast path, from its line to its answer (see the module's doc). It runs
    in the proxy's lifespan task group, as every call does; `forget` is told once it is answered or cancelled."""

    __slots__ = ("context", "envelope", "forget", "proxy", "route", "scope", "state", "writer")

    def __init__(
        self,
        proxy: Proxy,
        writer: LineWriter,
        envelope: Envelope,
        route: Route,
        context: CallContext,
        forget: Callable[[Passthrough], None],
    ) -> None:
        self.proxy = proxy
        self.writer = writer
        self.envelope = envelope
        self.route = route
        self.context = context
        self.forget = forget
        self.state: Literal["calling", "answering", "done"] = "calling"
        self.scope = anyio.CancelScope()

    def start(self) -> None:
        args = dict(self.envelope.arguments) if self.envelope.arguments is not None else None
        sent = send_now(self.route.downstream, self.route.tool, args)  # the server works while the task starts
        meters.passed_through(self.route.downstream.name)
        self.proxy.sessions.spawn(functools.partial(self._run, args, sent))

    def cancel(self) -> None:
        """The client cancelled its request: as the SDK does, it is never answered, and the downstream call is
        cancelled; an answer already being written is finished."""
        if self.state != "calling":
            return
        self.scope.cancel()
        self._end()

    def _end(self) -> None:
        if self.state != "done":
            self.state = "done"
            self.forget(self)

    async def _run(self, args: dict[str, Any] | None, sent: RawSent | None) -> None:
        try:
            answer = await self._call(args, sent)
            if self.state != "calling":  # cancelled: never answered
                if isinstance(answer, _Streamed):
                    answer.spooled.release()
                return
            self.state = "answering"
            if isinstance(answer, bytes):
                self.writer.write_nowait(answer)
            else:
                await write_spooled(self.writer, self.envelope.id, answer.line, answer.placeholder, answer.spooled)
        finally:
            if sent is not None and not sent.waiter.done():
                sent.waiter.cancel()  # never waited for (cancelled first): its answer, when it comes, is dropped
            self._end()

    async def _call(self, args: dict[str, Any] | None, sent: RawSent | None) -> bytes | _Streamed:
        ident, version = self.envelope.id, self.context.protocol_version
        relay = PassthroughRelay(self.context, self.proxy.log_level, self.writer, self.envelope.progress_token)
        try:
            with self.scope:
                got = await call_raw(self.route.downstream, self.route.tool, args, relay, sent)
                return await self._answer(got)
            return b""  # cancelled
        except ClaimcheckError as exc:
            return result_line(ident, text_result(str(exc), is_error=True), version)
        except Exception:
            logger.exception("the fast path failed on a pass-through call of %s", self.route.public)
            error = {"code": types.INTERNAL_ERROR, "message": "Internal error"}
            return line({"jsonrpc": "2.0", "id": ident, "error": error})

    async def _answer(self, got: RawResult | types.CallToolResult) -> bytes | _Streamed:
        ident, version = self.envelope.id, self.context.protocol_version
        if isinstance(got, RawResult):
            if got.plain_text() is not None:
                return line({"jsonrpc": "2.0", "id": ident, "result": got.result})
            got = got.model()  # a spool's stand-in comes this way too
        spooled = self.proxy.pool.spooled.claim(got)
        if spooled is None:
            return result_line(ident, inline_result(self.route, got), version)
        if not streamable(spooled):
            whole = await anyio.to_thread.run_sync(materialize, spooled)
            return result_line(ident, inline_result(self.route, whole), version)
        placeholder = uuid.uuid4().hex
        shaped = inline_result(self.route, text_result(placeholder, is_error=spooled.is_error))
        return _Streamed(result_line(ident, shaped, version), placeholder, spooled)


@dataclass(frozen=True, slots=True)
class _Streamed:
    """An answer to stream: its line with `placeholder` where the output's text goes."""

    line: bytes
    placeholder: str
    spooled: SpooledOutput
