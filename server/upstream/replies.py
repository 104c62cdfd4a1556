"""What a proxied call's answer is made of, on every path: the result types, the status footer, and the
response line a fast path writes. The SDK's surface (`server.upstream.surface`) and the fast-path engine
(`server.upstream.engine`) both build their answers here, so neither imports the other and both answer alike.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types

from server.downstream.pool import Route
from server.downstream.tool_call import RawResult
from server.errors import ClaimcheckError
from server.handles import messages
from server.handles.calls import Call
from server.handles.sessions import Session
from server.upstream.plain_call import Envelope, line, result_line

__all__ = [
    "error_line",
    "error_result",
    "footer_lines",
    "inline_result",
    "response_line",
    "text_result",
    "with_footer",
    "with_lines",
]

logger = logging.getLogger(__name__)


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def error_result(text: str) -> types.CallToolResult:
    """The isError result every failure inside claimcheck becomes."""
    return text_result(text, is_error=True)


def inline_result(route: Route, result: types.CallToolResult) -> types.CallToolResult:
    """A downstream's result as the client gets it inline: an error result says where it came from."""
    if not result.is_error:
        return result
    note = f'[claimcheck] the error above came from tool "{route.tool}" of server "{route.downstream.name}".'
    return result.model_copy(update={"content": [*result.content, types.TextContent(type="text", text=note)]})


def footer_lines(session: Session, about: Call | None, *, questions: bool = True) -> list[str]:
    """The status lines a result gets: the session's running or unread outputs besides `about`, and the
    questions its calls wait to have answered; none while there are none."""
    others = [call for call in session.handed_out() if call is not about]
    running = [call for call in others if call.status == "running"]
    ready = [call for call in others if call.status == "ready" and not call.seen]
    waiting = session.inbox.for_model() if questions else []
    return [text for text in (messages.footer(running, ready), messages.questions_footer(waiting)) if text]


def with_footer(
    result: types.CallToolResult, session: Session, about: Call | None, *, questions: bool = True
) -> types.CallToolResult:
    """`result` plus the status line, while the session has running or unread outputs besides `about`,
    and a line about the questions its calls wait to have answered (unless `result` shows them)."""
    return with_lines(result, footer_lines(session, about, questions=questions))


def with_lines(result: types.CallToolResult, lines: list[str]) -> types.CallToolResult:
    """`result` with `lines` (a footer's, `footer_lines`) after its content, each a text item."""
    if not lines:
        return result
    extra = [types.TextContent(type="text", text=text) for text in lines]
    return result.model_copy(update={"content": [*result.content, *extra]})


def response_line(
    envelope: Envelope,
    session: Session,
    result: types.CallToolResult | RawResult,
    about: Call | None,
    context: Any,
    *,
    footer: bool,
) -> bytes:
    """The response line of a fast-path call's answer: a handshake-era client's plain result as the downstream gave
    it; any other, with the session's footer (`footer`: the footer is on; as `with_footer` adds it), shaped by the
    SDK's own serializer as its path would (for a sessionless client, by the SDK's runner, framed by
    `context.wire`)."""
    lines = footer_lines(session, about) if footer else []
    wire = context.wire
    if isinstance(result, RawResult) and not lines and wire is None:
        return line({"jsonrpc": "2.0", "id": envelope.id, "result": result.result})
    if isinstance(result, RawResult) and wire is not None and (texts := result.texts()) is not None:
        sent = "isError" in result.result
        answer: bytes | None = wire.text_result(envelope.id, texts + lines, sent, context.protocol_version)
        if answer is not None:  # as `wire.result` writes it, without validating and shaping it again
            return answer
    model = with_lines(result.model() if isinstance(result, RawResult) else result, lines)
    if wire is not None:
        return bytes(wire.result(envelope.id, model, context.protocol_version))
    return result_line(envelope.id, model, context.protocol_version)  # as the SDK's path shapes it


def error_line(envelope: Envelope, exc: Exception, context: Any) -> bytes:
    """The response line of a call that failed in a way nobody expected: the internal error the SDK's dispatcher
    would answer (for a sessionless client, as its wire writes it). A `ClaimcheckError` is an error result
    instead (`error_result`)."""
    assert not isinstance(exc, ClaimcheckError)
    if context.wire is not None:
        return bytes(context.wire.error(envelope.id, exc))
    error = {"code": types.INTERNAL_ERROR, "message": "Internal error"}
    return line({"jsonrpc": "2.0", "id": envelope.id, "error": error})
