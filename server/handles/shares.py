"""Fair shares of claimcheck's own work, counted by principal (`server.handles.owners.principal_of`), never by
session: however many `Claimcheck-Session` headers or connections a principal uses, its sessions together hold
at most `settings.limits` of running calls (those with a `Call`, and those without one: `passing`) and of
sessions (past the latter, its least recently used idle session ends: `over_sessions`). Every client without a
token is one principal (`owners.ANONYMOUS`), whether its session is its connection's or its own. One over its share
gets an `OverShare` naming the setting and when one frees.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from server.errors import OverShare
from server.handles.owners import principal_of
from server.handles.session import Session

__all__ = ["check_calls", "of_principal", "over_sessions", "passing", "waiting"]


def of_principal(live: Iterable[Session], session: Session) -> list[Session]:
    """The live sessions of `session`'s principal, `session` among them."""
    principal = session.principal
    return [session, *(other for other in live if other is not session and other.principal == principal)]


def check_calls(live: Iterable[Session], session: Session, limit: int, stored_limit: int | None = None) -> None:
    """Room for one more call of `session`'s principal: fewer than `limit` running (foreground or background),
    and (`stored_limit`) fewer than that many bytes of outputs stored on disk."""
    running = stored = 0
    for mine in of_principal(live, session):
        running += mine.passing
        for call in mine.calls.values():
            if call.status == "running":
                running += 1
            elif stored_limit is not None and call.stored:
                stored += call.bytes
    if running >= limit:
        raise OverShare(
            f'This principal has {running} calls running, at most {limit} ("limits.calls"); one frees when one of '
            "them ends (cancel_tool_output ends one), then call again."
        )
    if stored_limit is not None and stored >= stored_limit:
        raise OverShare(
            f'This principal stores {_mib(stored)} of outputs, at most {_mib(stored_limit)} ("limits.storedBytes"); '
            "an output is removed when its session ends, or keepOutputsSecs after it was last read once no "
            "connection of its session is open; then call again."
        )


@contextmanager
def passing(live: Iterable[Session], session: Session, limit: int) -> Iterator[None]:
    """One call of `session`'s principal that starts no `Call` (a pass-through for a claimcheck in front, a plain
    call to a server whose rules are off), while it runs: counted with its running calls against `limit`
    (`limits.calls`), past which an `OverShare`. Such a call stores nothing, so `limits.storedBytes` does not
    refuse it."""
    check_calls(live, session, limit)
    session.passing += 1
    try:
        yield
    finally:
        session.passing -= 1


@contextmanager
def waiting(live: Iterable[Session], session: Session, limit: int) -> Iterator[None]:
    """One `wait_for_tool_output` of `session`'s principal, while it waits; past `limit` waiting at once, an
    `OverShare` (each wait is cheap, but a principal's are bounded like the rest of its work)."""
    held = sum(mine.waiting for mine in of_principal(live, session))
    if held >= limit:
        raise OverShare(
            f'This principal has {held} wait_for_tool_output calls waiting, at most {limit} ("limits.waits"); one '
            "frees when one of them returns (at most waitMaxSecs), then call again."
        )
    session.waiting += 1
    try:
        yield
    finally:
        session.waiting -= 1


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def over_sessions(owned: Iterable[Session], owner: str, limit: int) -> list[Session]:
    """The sessions to end before `owner` opens one more, so that its principal holds at most `limit`: the least
    recently used of its sessions with no call running and no connection attached. Sessions with calls running
    are never ended (`limits.calls` bounds them instead), so the list may be shorter than the excess."""
    principal = principal_of(owner)
    mine = [s for s in owned if not s.closed and s.principal == principal]
    excess = len(mine) + 1 - limit
    if excess <= 0:
        return []
    idle = [s for s in mine if s.attached == 0 and not any(c.status == "running" for c in s.calls.values())]
    idle.sort(key=lambda s: s.touched)
    return idle[:excess]
