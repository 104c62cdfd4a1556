"""list_tool_outputs and cancel_tool_output: paging through a session's handles, and cancelling their calls."""

from __future__ import annotations

import uuid

import anyio

from extraction import count_tokens
from extraction.wording import plural
from server.errors import OwnToolError, clip
from server.handles import messages
from server.handles.calls import Call
from server.handles.mirrors import lookup, remote_calls
from server.handles.sessions import Session, Sessions

__all__ = ["CANCEL_WAIT_S", "cancel", "list_page"]

CANCEL_WAIT_S = 5.0
"""How long a cancel waits for the call to stop before it answers."""


def list_page(
    session: Session, calls: list[Call], *, origin: str, limit: int, cursor: str | None, threshold: int
) -> str:
    """One page of the session's handles: running first, then finished ones not yet looked at, then the rest,
    each group oldest first; never more than half the token threshold. The order is fixed when the first
    page is asked for, so paging goes through every handle once however statuses change meanwhile. Listing
    marks nothing read: the footer and wait_for_tool_output still offer an output only its size was shown of."""
    others: list[Call] = []
    if session.owner is not None:  # shared by several connections: this one's own, then recent ones of the others
        others = sorted((c for c in calls if c.origin != origin), key=lambda c: c.started, reverse=True)
        calls = [c for c in calls if c.origin == origin]
    if not calls:
        return "\n".join(["This session has no tool outputs yet.", *_others(others, limit, threshold)])
    if cursor is None:
        ordered = sorted(calls, key=lambda c: (c.status != "running", c.seen or c.status == "running", c.started))
        session.listing = (uuid.uuid4().hex[:8], [c.handle for c in ordered])
        start = 0
    else:
        listing_id, _, offset = cursor.partition(".")
        if listing_id != session.listing[0] or not offset.isdigit():
            raise OwnToolError(
                f'Invalid cursor "{clip(cursor)}": pass the one the last page named, or none to start again.'
            )
        start = int(offset)
    handles = session.listing[1]
    known = {c.handle: c for c in calls}
    page = [c for c in (known.get(h) for h in handles[start : start + limit]) if c is not None]
    lines = [f"- {messages.describe(c)}" for c in page]
    while len(lines) > 1 and count_tokens("\n".join(lines)) > threshold // 2:
        lines.pop()
    end = start + len(lines)  # listing marks nothing read: it shows sizes, never the text
    total = len(handles)
    head = (
        f"{plural(len(calls), 'output')} in this session:"
        if start == 0 and end >= total
        else f"{plural(total, 'output')} in this session (showing {start + 1}-{end}, running and unread first):"
    )
    more = total - end
    tail = [f'{more} more: call list_tool_outputs(cursor = "{session.listing[0]}.{end}") for the next page.']
    if more > 0:
        return "\n".join([head, *lines, *tail])
    return "\n".join([head, *lines, *_others(others, limit, threshold)])


def _others(others: list[Call], limit: int, threshold: int) -> list[str]:
    """Recent outputs of the owner's other sessions, newest first, marked, at most a page (after the last own page)."""
    if not others:
        return []
    lines = [messages.other_session_line(messages.describe(c)) for c in others[:limit]]
    while len(lines) > 1 and count_tokens("\n".join(lines)) > threshold // 2:
        lines.pop()
    shown = f"the {len(lines)} most recent" if len(lines) < len(others) else f"all {len(lines)}"
    return [f"Outputs of your other sessions ({shown}; each handle works here too):", *lines]


async def cancel(handle: str, session: Session, sessions: Sessions) -> str:
    """Cancel here a call of this replica; ask the owner of another replica's call (it ends as cancelled)."""
    if handle == "all":
        running = session.running()
        for call in running:
            call.cancel('cancel_tool_output(handle = "all") was called')
        remote = [c for c in await remote_calls(sessions, session) if c.status == "running"]
        asked = [c for c in remote if await sessions.backend.request_cancel(c.handle)]
        await _until_stopped(running)
        return f"Cancelled {plural(len(running) + len(asked), 'running output')}."
    found = (await lookup(sessions, session, [handle]))[0]
    if found is None:
        note = sessions.unknown_note(session, [handle])
        raise OwnToolError(f'Unknown handle "{clip(handle)}": it is not a handle of this session.{note}')
    call = found
    if call.status != "running":
        return f'Output "{call.handle}" is not running ({call.status}); nothing to cancel.'
    if call.home is not None:  # another replica runs it: its owner cancels it
        if not await sessions.backend.request_cancel(call.handle):
            return f'Output "{call.handle}" is not running any more; nothing to cancel.'
        return f'Cancelled {call.public_name} (handle: "{call.handle}").'
    call.cancel("cancel_tool_output was called for it")
    await _until_stopped([call])
    return f'Cancelled {call.public_name} (handle: "{call.handle}").'


async def _until_stopped(calls: list[Call]) -> None:
    """Wait (briefly) until cancelled calls have finished, so that the reply's footer no longer counts them
    as running."""
    with anyio.move_on_after(CANCEL_WAIT_S):
        for call in calls:
            await call.finished.wait()
