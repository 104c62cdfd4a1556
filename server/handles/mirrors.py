"""Handles another replica runs, seen from this one: read-only `Call` mirrors of their shared state.

Own tools look a handle up here when this replica does not run it (`lookup`), read running mirrors again
while they wait (`refresh`), and list the session's handles of every replica (`remote_calls`). With the
default `LocalBackend` there are no other replicas, and each of these answers from this process alone.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio
import mcp_types as types

from server.handles.calls import Call
from server.handles.questions import either
from server.handles.session import Session
from server.handles.state import HandleState, StateBackend, StateUnavailable, mirror, update
from server.handles.store import StoreError


class Sessions(Protocol):
    """What mirrors need of the session registry (`server.handles.sessions.Sessions`): where handles live."""

    backend: StateBackend


__all__ = ["lookup", "read_back", "refresh", "remote_calls", "until_finished"]

logger = logging.getLogger(__name__)


async def lookup(sessions: Sessions, session: Session, handles: list[str]) -> list[Call | None]:
    """The calls of `handles` in this session: this replica's own, else mirrors of other replicas' calls
    (read again from the backend each time); None for a handle the session does not have."""
    found: list[Call | None] = [session.call(h) for h in handles]
    remote = [h for h, call in zip(handles, found, strict=True) if call is None and session.store.owns(h)]
    if not remote or not sessions.backend.replicated:
        return found
    states = dict(zip(remote, await sessions.backend.get(remote), strict=True))
    pairs = zip(handles, found, strict=True)
    return [call if call is not None else _mirror(session, h, states.get(h)) for h, call in pairs]


async def refresh(sessions: Sessions, calls: list[Call]) -> None:
    """Read the mirrors among `calls` again from the backend (a read that fails keeps what was known)."""
    mirrors = [call for call in calls if call.home is not None and not call.finished.is_set()]
    if not mirrors:
        return
    try:
        states = await sessions.backend.get([c.handle for c in mirrors])
    except StateUnavailable as exc:
        logger.debug("%s (read again at the next poll)", exc)
        return
    for call, state in zip(mirrors, states, strict=True):
        if state is not None:  # a restarted Redis may not have it again yet: keep what was known
            update(call, state)


async def until_finished(sessions: Sessions, call: Call) -> None:
    """Return when `call` has finished: this replica's by its event, a mirror by reading it again when told
    and every `pollSecs`."""
    while not call.finished.is_set():
        if call.home is None:
            await call.finished.wait()
            return
        with anyio.move_on_after(sessions.backend.poll_secs):
            await either(call.finished, sessions.backend.changed())
        await refresh(sessions, [call])


async def remote_calls(sessions: Sessions, session: Session) -> list[Call]:
    """Mirrors of every handle of this session that another replica runs or ran."""
    if not sessions.backend.replicated:
        return []
    states = await sessions.backend.of_session(session.id)
    return [c for s in states if s.handle not in session.calls if (c := _mirror(session, s.handle, s))]


async def read_back(call: Call) -> None:
    """A mirror's small ready output, read from the shared store so that a wait can show it inline."""
    if call.home is None or call.status != "ready" or not call.stored or call.over_threshold or call.result:
        return
    try:  # under the threshold, so small
        text = await call.home.read_text(call.handle)
    except StoreError:
        return
    call.show(types.CallToolResult(content=[types.TextContent(type="text", text=text)]))


def _mirror(session: Session, handle: str, state: HandleState | None) -> Call | None:
    if state is None or state.session != session.id:
        return None
    known = session.mirrors.get(handle)
    if known is None:
        known = session.mirrors[handle] = mirror(state, session.store)
    else:
        update(known, state)
    return known
