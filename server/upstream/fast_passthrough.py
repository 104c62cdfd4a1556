"""A pass-through call on a fast path (stdio, or HTTP with a session): the claimcheck in front makes the handles,
this one forwards.

A call whose `_meta` holds `io.claimcheck/passthrough` (`server.downstream.chain`) is answered as the SDK's path
answers it (`forwarding.forward` with `passthrough`): no time rule, no size rule, no handle, no footer, no `Call`
record (it counts in its principal's share of running calls while it runs: `shares.passing`); but the downstream is
called as bytes (`server.downstream.tool_call`) and nothing is parsed into models on the way unless it must be.
The answer:

- a plain-text result: as the downstream gave it, under the client's id;
- any other result: with the downstream's error note (`forwarding.inline_result`), shaped by the SDK's
  serializer;
- a result the downstream's transport spooled to a file: streamed from that file (`Streamed`: over stdio
  `streamed.write_spooled`, over HTTP `streamed.spooled_pieces`), never held whole, unless the spool kept its
  whole message (then read from it, at most 16 MiB);
- a long tool result still being spooled, once its answer is sure to be the file's text (its message passed
  the 16 MiB the spool keeps whole): streamed while the file grows (`Followed`: `streamed.write_followed`, or
  `streamed.followed_pieces`), so the claimcheck in front decodes it while this one reads it;
- a failure of claimcheck's (the server is down, timed out, said an error): its error result, as on the SDK's
  path; anything unexpected: the internal error the SDK's dispatcher would answer.

A plain call to a server whose rules are off (`"async": false`, `--no-async`), from a client of the handshake
era, is made the same way (as the SDK's path makes it: `forwarding.forward`), and its answer carries the client's
status footer as the SDK's path adds it.

The claimcheck in front sends a progress token; progress the downstream reports goes back under it, as
`notifications/progress` lines through the same writer, before the answer (the SDK's path relays it too; over
HTTP the request's own channel sends it, `PassthroughRelay` being stdio's).
A `notifications/cancelled` cancels the downstream call and the request is never answered, unless its answer
is already being written: a line cannot be taken back, so it is finished (one written while its output grows
is ended at once, as an error). The request itself is the engine's
(`server.upstream.engine.FastRequest`); this module says what a pass-through answers and how its progress goes.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types

from server.downstream.pool import Route
from server.downstream.relay import RequestRelay
from server.downstream.spooled import GrowingOutput, SpooledOutput, materialize
from server.downstream.tool_call import RawResult, RawSent, call_tool
from server.errors import ClaimcheckError
from server.handles.sessions import Session
from server.handles.shares import passing
from server.proxy import Proxy
from server.upstream.line_writer import LineWriter
from server.upstream.plain_call import CallContext, Envelope, FastRelay, RequestId, line, result_line
from server.upstream.replies import footer_lines, inline_result, text_result, with_lines
from server.upstream.streamed import Followed, streamable

__all__ = ["PassthroughRelay", "Streamed", "pass_through"]

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


@dataclass(frozen=True, slots=True)
class Streamed:
    """An answer to stream: its line with `placeholder` where the spooled output's text goes."""

    ident: RequestId
    line: bytes
    placeholder: str
    spooled: SpooledOutput

    def parts(self) -> tuple[RequestId, bytes, str, SpooledOutput]:
        """Its fields, in the order `streamed.write_spooled` and `streamed.spooled_pieces` take them."""
        return self.ident, self.line, self.placeholder, self.spooled


async def pass_through(
    proxy: Proxy,
    route: Route,
    envelope: Envelope,
    context: CallContext,
    relay: RequestRelay,
    sent: RawSent | None,
    *,
    session: Session,
) -> bytes | Streamed | Followed:
    """Call the downstream and say what to answer: a line, or an output to stream (whole, or as it grows).
    `session`: the client's, whose principal's share of running calls (`limits.calls`) the call counts in while it
    runs (`shares.passing`); the answer to a plain call to a server whose rules are off carries its footer as the
    SDK's path adds it (a pass-through's does not: the claimcheck in front adds its own)."""
    ident, version = envelope.id, context.protocol_version
    args = dict(envelope.arguments) if envelope.arguments is not None else None
    settings = proxy.config.settings
    footed = session if settings.status_footer and not envelope.passthrough else None  # whose footer it carries
    try:
        with passing(proxy.sessions.live, session, settings.limits.calls):
            got = await call_tool(route.downstream, route.tool, args, relay, raw=True, sent=sent, follow=True)
        footer = footer_lines(footed, None) if footed is not None else []
        if isinstance(got, GrowingOutput):
            return _followed(route, ident, version, got, footer)
        if isinstance(got, RawResult) and got.plain_text() is not None and not footer:
            return line({"jsonrpc": "2.0", "id": ident, "result": got.result})
        return await _answer(proxy, route, ident, version, got, footer)
    except ClaimcheckError as exc:
        footer = footer_lines(footed, None) if footed is not None else []
        return result_line(ident, with_lines(text_result(str(exc), is_error=True), footer), version)
    except Exception:
        logger.exception("the fast path failed on a pass-through call of %s", route.public)
        error = {"code": types.INTERNAL_ERROR, "message": "Internal error"}
        return line({"jsonrpc": "2.0", "id": ident, "error": error})


def _followed(route: Route, ident: RequestId, version: str, growing: GrowingOutput, footer: list[str]) -> Followed:
    """The answer to write while `growing` grows: the three lines it may be, shaped as `_answer` shapes them, each
    with the `footer` lines."""
    try:
        placeholder = uuid.uuid4().hex
        lines = (
            result_line(ident, with_lines(inline_result(route, text_result(placeholder)), footer), version),
            result_line(
                ident, with_lines(inline_result(route, text_result(placeholder, is_error=True)), footer), version
            ),
            result_line(ident, with_lines(text_result(placeholder, is_error=True), footer), version),
        )
        return Followed.of(placeholder, lines, growing, stall_s=route.downstream.config.timeout)
    except BaseException:
        growing.release()
        raise


async def _answer(
    proxy: Proxy,
    route: Route,
    ident: RequestId,
    version: str,
    got: RawResult | types.CallToolResult,
    footer: list[str],
) -> bytes | Streamed:
    if isinstance(got, RawResult):
        got = got.model()  # a spool's stand-in comes this way too
    spooled = proxy.pool.spooled.claim(got)
    if spooled is None:
        return result_line(ident, with_lines(inline_result(route, got), footer), version)
    if not streamable(spooled):
        whole = await anyio.to_thread.run_sync(materialize, spooled)
        return result_line(ident, with_lines(inline_result(route, whole), footer), version)
    placeholder = uuid.uuid4().hex
    shaped = with_lines(inline_result(route, text_result(placeholder, is_error=spooled.is_error)), footer)
    return Streamed(ident, result_line(ident, shaped, version), placeholder, spooled)
