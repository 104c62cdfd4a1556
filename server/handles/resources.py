"""Stored outputs as MCP resources: a handle's URI, the `resource_link` a reply carries, the session's listing,
and a bounded view of an output for `resources/read`.

An output is `claimcheck://output/<handle>`. It is listed and read only through the session of the client that
asks (`Sessions.for_request`, then `mirrors.lookup`, as the own tools do): the URI names a handle, and a handle
of another session is unknown. Reading gives the output's head under the token threshold and says how to read
the rest; nothing here reads a whole large output.
"""

from __future__ import annotations

import anyio
import mcp_types as types

from extraction import Source, count_tokens, head_tokens, read_all, read_chars, source_exceeds
from server.errors import ClaimcheckError, clip
from server.handles import messages
from server.handles.calls import Call
from server.handles.mirrors import lookup
from server.handles.retrieval import RetrievalError, error_of, source_of
from server.handles.session import Session
from server.handles.sessions import Sessions

__all__ = [
    "MIME_TYPE",
    "SCHEME",
    "OutputUnknown",
    "handle_of",
    "link_result",
    "listed",
    "read_output",
    "resource_link",
    "resource_of",
    "uri_of",
]

SCHEME = "claimcheck://output/"
MIME_TYPE = "text/plain"  # what is stored is the text the model would have seen
_NOTE_MARGIN = 8  # tokens kept free besides the note's own: its text and the head's end may merge differently
_MAX_TOKEN_BYTES = 128


class OutputUnknown(ClaimcheckError):
    """A `claimcheck://output/` URI that names no output of the asking session."""


def uri_of(handle: str) -> str:
    return SCHEME + handle


def handle_of(uri: str) -> str | None:
    """The handle a claimcheck output URI names; None for any other URI."""
    return uri[len(SCHEME) :] if uri.startswith(SCHEME) else None


def _fields(call: Call) -> dict[str, object]:
    ready = call.status == "ready" and call.finished.is_set()
    return {
        "uri": uri_of(call.handle),
        "name": f"{call.public_name} output {call.handle.rsplit('/', 1)[-1][:8]}",
        "title": f"Output of {call.public_name}",
        "description": messages.describe(call),
        "mime_type": MIME_TYPE,
        "size": call.bytes if ready else None,
    }


def resource_of(call: Call) -> types.Resource:
    return types.Resource(**_fields(call))  # type: ignore[arg-type]  # the fields are Resource's own


def resource_link(call: Call) -> types.ResourceLink:
    return types.ResourceLink(type="resource_link", **_fields(call))  # type: ignore[arg-type]


def link_result(session: Session, call: Call, result: types.CallToolResult) -> types.CallToolResult:
    """`result` (a reply that hands out `call`'s handle) with a `resource_link` to its output after the text,
    for a client that reads links."""
    if not session.takes_links:
        return result
    return result.model_copy(update={"content": [*result.content, resource_link(call)]})


def listed(session: Session) -> list[types.Resource]:
    """The session's outputs that are ready, oldest first."""
    ready = [call for call in session.handed_out() if call.status == "ready"]
    return [resource_of(call) for call in sorted(ready, key=lambda c: c.started)]


async def read_output(uri: str, session: Session, sessions: Sessions, *, threshold: int) -> types.ReadResourceResult:
    """What `resources/read` gives for an output: the whole of it under the threshold, else its head and how to
    read the rest; a running, failed or cancelled one says so. `OutputUnknown` for anything not the session's."""
    handle = handle_of(uri)
    call = (await lookup(sessions, session, [handle]))[0] if handle else None
    if call is None or handle is None:
        note = sessions.unknown_note(session, [handle] if handle else [])
        raise OutputUnknown(f'Unknown resource "{clip(uri)}": it is not an output of this session.{note}')
    if call.status == "running":
        text = messages.resource_running(call)
    elif call.status != "ready":
        text = messages.not_ready_message(call, await error_of(call, session, sessions, threshold=threshold))
    else:
        try:
            opener = await source_of(call, session, sessions)
            async with opener() as source:
                text = await anyio.to_thread.run_sync(lambda: head_view(source, call, threshold=threshold))
        except RetrievalError as exc:
            text = str(exc)
        call.note("retrieved", "resources/read")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=MIME_TYPE, text=text)])


def head_view(source: Source, call: Call, *, threshold: int) -> str:
    """The whole output when it is under `threshold` tokens, else its head (whole lines where it has them)
    under the threshold, and how much is left and how to read it; blocking."""
    if not source_exceeds(source, threshold):
        return read_all(source)  # under the threshold, so small
    widest = messages.resource_rest_note(call, shown_chars=call.bytes, shown_lines=call.lines)  # its longest numbers
    budget = max(1, threshold - count_tokens(widest) - _NOTE_MARGIN)
    span = budget * _MAX_TOKEN_BYTES // 16 + budget  # as much as head_tokens looks at
    piece, _ = read_chars(source, 0, span, span)
    head = head_tokens(piece or "", budget)
    cut = head.rfind("\n")
    if cut >= len(head) // 2:  # end at a line's end, unless that drops more than half
        head = head[: cut + 1]
    return head + messages.resource_rest_note(call, shown_chars=len(head), shown_lines=head.count("\n"))
