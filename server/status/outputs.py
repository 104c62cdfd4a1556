"""A stored output as the dashboard shows it: its size, whether it was cut, its first lines, and Grep over it.

For the local user who holds the status API's token. The file is read through the one door
(`SessionStore.open_output`) and fs_sandbox's bounded Read and Grep, exactly as the agent's `Read` and
`Grep` read it; every answer is bounded (lines, characters per line, characters in all), whatever the
output's size. Looking at an output here does not count as the agent having seen it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from fs_sandbox import GrepLine, Sandbox, SandboxError
from server.handles.calls import Call
from server.handles.sessions import Session, Sessions
from server.handles.store import StoreError

__all__ = ["GREP_MATCHES_MAX", "HEAD_LINES_MAX", "OutputUnavailable", "OutputView"]

HEAD_LINES_MAX = 200
GREP_MATCHES_MAX = 100
LINE_CHARS = 500
"""Each line shown is cut here (its full length is given)."""
ANSWER_CHARS = 64_000
"""The most characters of lines in one answer."""
GREP_OWNER = "status-dashboard"
"""The dashboard's greps queue as one owner beside the agents' sessions (fs_sandbox serves owners in turn)."""


class OutputUnavailable(Exception):
    """The handle has no output to show (unknown here, running, failed, or not stored); the message says which."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


class OutputView:
    """Reads the stored outputs of the live sessions for the status API."""

    def __init__(self, sessions: Callable[[], Sessions | None], sandbox: Callable[[], Sandbox | None]) -> None:
        self._sessions = sessions
        self._sandbox = sandbox

    def session_ended(self, handle: str) -> float | None:
        """When the session of `handle` ended in this process, if it did."""
        sessions = self._sessions()
        return sessions.ended_at(handle) if sessions is not None else None

    async def head(self, handle: str, lines: int) -> dict[str, Any]:
        """The output's size and state, and its first `lines` lines (at most `HEAD_LINES_MAX`)."""
        session, call, sandbox = await self._stored(handle)
        opened = await self._open(session, handle)
        try:
            read = await sandbox.read(
                opened, lines=min(lines, HEAD_LINES_MAX), max_line_chars=LINE_CHARS, max_chars=ANSWER_CHARS
            )
        except SandboxError as exc:
            raise OutputUnavailable(f"could not read the output: {exc}", 500) from None
        finally:
            opened.close()
        shown = [
            {"number": number, "text": text, "length": length}
            for (number, text), length in zip(read.lines, read.lengths, strict=True)
        ]
        return {**_about(call), "totalLines": read.total_lines, "head": shown, "omitted": read.omitted}

    async def grep(self, handle: str, regex: str, *, max_matches: int, case_sensitive: bool) -> dict[str, Any]:
        """The same Grep the agent has: matching lines with a line of context each side."""
        session, call, sandbox = await self._stored(handle)
        opened = await self._open(session, handle)
        try:
            found = await sandbox.grep(
                opened,
                regex,
                before=1,
                after=1,
                case_sensitive=case_sensitive,
                max_matches=min(max_matches, GREP_MATCHES_MAX),
                owner=GREP_OWNER,
                max_line_chars=LINE_CHARS,
                max_chars=ANSWER_CHARS,
            )
        except SandboxError as exc:
            raise OutputUnavailable(f"Grep failed: {exc}", 400) from None
        finally:
            opened.close()
        blocks = [[_line(line) for line in block] for block in found.blocks]
        return {
            **_about(call),
            "regex": regex,
            "matches": found.matches,
            "more": found.more,
            "blocks": blocks,
            "omittedLines": found.omitted_lines,
        }

    async def _stored(self, handle: str) -> tuple[Session, Call, Sandbox]:
        sessions, sandbox = self._sessions(), self._sandbox()
        if sessions is None or sandbox is None:
            raise OutputUnavailable("claimcheck is not serving", 503)
        for session in list(sessions.live):
            call = session.call(handle)
            if call is None:
                continue
            if call.status == "running":
                raise OutputUnavailable("the call is still running")
            if call.status != "ready" and not (call.status == "failed" and call.stored):
                raise OutputUnavailable(f"the call {call.status}: it has no output")
            await sessions.ensure_stored(session, call)
            if not call.stored:
                raise OutputUnavailable("its output could not be stored")
            return session, call, sandbox
        raise OutputUnavailable("no live session holds this output (it is gone with its session)", 404)

    async def _open(self, session: Session, handle: str) -> Any:
        try:
            return await anyio.to_thread.run_sync(session.store.open_output, handle)
        except StoreError as exc:
            raise OutputUnavailable(str(exc), 404) from None


def _line(line: GrepLine) -> dict[str, Any]:
    """One line of a Grep answer; a long match line has a snippet (with its column) around each match."""
    snippets = [{"column": snip.column, "text": snip.text} for snip in line.snippets]
    shown = {"number": line.number, "text": line.text, "length": line.length, "match": line.is_match}
    return {**shown, "snippets": snippets}


def _about(call: Call) -> dict[str, Any]:
    return {
        "handle": call.handle,
        "name": call.public_name,
        "status": call.status,
        "bytes": call.bytes,
        "produced": call.produced,
        "cut": call.cut,
        "lines": call.lines,
        "tokens": call.tokens_or_none(),
    }
