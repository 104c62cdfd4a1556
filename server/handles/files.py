"""claimcheck's Read and Grep tools: the sandbox over the calling session's stored outputs.

Each file is opened through the store's one door (`SessionStore.open_output`: the session's own directory,
no links) and streamed by the sandbox; greps queue per principal (`server.handles.owners.principal_of`: a token,
an OAuth subject, or every client without a token as one), served in turn.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from extraction import count_tokens
from extraction.marks import grep_line, grep_snippet, read_line
from extraction.wording import plural
from fs_sandbox import GrepResult, Sandbox, SandboxError
from server.errors import ClaimcheckError, clip, problems
from server.handles.calls import Call
from server.handles.messages import cut_answer_note, not_ready_message
from server.handles.mirrors import lookup
from server.handles.own_registry import FILE_TOOL_REGISTRY, OWN_TOOLS_BY_NAME, GrepArgs, ReadArgs
from server.handles.sessions import Session, Sessions
from server.handles.store import StoreError

__all__ = ["FILE_TOOLS", "FileToolError", "run_file_tool"]

MAX_LINE_CHARS = 2000
_RESERVE_TOKENS = 200  # room for the header and the line saying what was left out
_MAX_TOKEN_BYTES = 128  # the longest cl100k token


class FileToolError(ClaimcheckError):
    """Read or Grep cannot answer; the message says why."""


FILE_TOOLS = frozenset(tool.name for tool in FILE_TOOL_REGISTRY)


async def run_file_tool(
    name: str,
    arguments: dict[str, Any] | None,
    *,
    session: Session,
    sessions: Sessions,
    sandbox: Sandbox,
    threshold: int,
) -> types.CallToolResult:
    try:
        args = OWN_TOOLS_BY_NAME[name].parse(arguments)
    except ValidationError as exc:
        raise FileToolError(f"Invalid arguments for {name}: {problems(exc)}") from None
    assert isinstance(args, ReadArgs | GrepArgs)
    call = await _check_handle(args.file, session, sessions)
    budget = max(100, threshold - _RESERVE_TOKENS)
    # Lines past this many characters can never fit in `budget` tokens (a token is at most 128 bytes), so the
    # sandbox leaves them out and counts them instead of sending them.
    max_chars = budget * _MAX_TOKEN_BYTES
    try:
        opened = await anyio.to_thread.run_sync(session.store.open_output, args.file)
    except StoreError as exc:
        raise FileToolError(f"{name} failed: {exc}") from None
    try:
        if isinstance(args, ReadArgs):
            result = await sandbox.read(
                opened,
                start=args.start,
                lines=args.lines,
                from_end=args.head_or_tail == "tail",
                max_line_chars=MAX_LINE_CHARS,
                max_chars=max_chars,
            )
            numbered = [
                read_line(number, _clip(text, length))
                for (number, text), length in zip(result.lines, result.lengths, strict=True)
            ]
            if not numbered:
                header = (
                    f"{args.file} has {plural(result.total_lines, 'line')}; none from line {args.start} "
                    f"({args.head_or_tail})."
                )
                return _text(_noted(header, call, "read"))
            text = _read_text(args.file, result.lines, numbered, result.total_lines, result.omitted, budget)
            return _text(_noted(text, call, "read"))
        begun = time.monotonic()
        found = await sandbox.grep(
            opened,
            args.regex,
            before=args.before,
            after=args.after,
            case_sensitive=args.case_sensitive,
            max_matches=args.max_matches,
            owner=session.principal,  # fair shares by principal, not by session
            max_line_chars=MAX_LINE_CHARS,
            max_chars=max_chars,
        )
        sessions.meters.grepped(time.monotonic() - begun)
    except SandboxError as exc:
        raise FileToolError(f"{name} failed: {exc}") from None
    finally:
        opened.close()
    return _text(_noted(_grep_text(args, found, budget), call, "searched"))


async def _check_handle(handle: str, session: Session, sessions: Sessions) -> Call:
    call = (await lookup(sessions, session, [handle]))[0]  # another replica's handle too (handles.mirrors)
    if call is None:
        note = sessions.unknown_note(session, [handle])
        why = f'Unknown file "{clip(handle)}": not a handle of this session. Call list_tool_outputs.'
        raise FileToolError(why + note)
    if call.status == "running":
        raise FileToolError(f'"{handle}" is still running; call wait_for_tool_output first.')
    if call.status != "ready" and not (call.status == "failed" and call.stored):  # a tool's stored error output
        raise FileToolError(f'"{handle}" has no output. ' + not_ready_message(call, call.error or "no details"))
    call.mark_seen()
    await sessions.ensure_stored(session, call)
    if not call.stored:
        raise FileToolError(f'The output of "{handle}" could not be stored, so it cannot be read as a file.')
    return call


def _noted(text: str, call: Call, what: str) -> str:
    """`text`, then the line saying the output was cut when stored (a "No matches" may be in the cut part), and the
    line saying it is a failed call's error (read as any output: a long one was stored)."""
    notes = [cut_answer_note(call, what)]
    if call.status == "failed":
        notes.append(f"[claimcheck] the call failed ({call.public_name}): this output is the error it gave.")
    return "\n".join([text, *filter(None, notes)])


def _grep_text(args: GrepArgs, found: GrepResult, budget: int) -> str:
    if not found.matches:
        case = "case-sensitive" if args.case_sensitive else "case-insensitive"
        return f"No matches for {args.regex!r} in {args.file} ({case})."
    more = "; more exist (raise maxMatches or narrow the pattern)" if found.more else ""
    header = f"{plural(found.matches, 'matching line')} for {args.regex!r} in {args.file}{more}"
    lines: list[str] = []
    for index, block in enumerate(found.blocks):
        if index:
            lines.append("───")
        for line in block:
            if not line.snippets:
                lines.append(grep_line(line.number, _clip(line.text, line.length), match=line.is_match))
                continue
            # A long line: each match in a window of its own, with the column (characters into the line).
            for snippet in line.snippets:
                text = ("…" if snippet.cut_before else "") + snippet.text + ("…" if snippet.cut_after else "")
                lines.append(grep_snippet(line.number, snippet.column, text))
            if line.more_in_line:
                lines.append(f"{line.number:>6}   [more matches on this line of {line.length} characters not shown]")
    return _capped(header, lines, budget, left_out=found.omitted_lines + found.omitted_blocks)


def _read_text(
    file: str, lines: Sequence[tuple[int, str]], numbered: list[str], total: int, omitted: int, budget: int
) -> str:
    """The lines of a Read that fit in `budget` tokens, under a header naming the lines actually shown."""
    first = lines[0][0]
    header = f"{file}: lines {first}-{lines[-1][0] + omitted} of {total}"  # the longest it can be
    kept = _fitting(numbered, budget - count_tokens(header))
    shown = (
        f"{file}: lines {first}-{lines[kept - 1][0]} of {total}" if kept else f"{file}: none of {plural(total, 'line')}"
    )
    left = len(numbered) - kept + omitted
    if not left:
        return "\n".join([shown + ":", *numbered[:kept]])
    start = lines[kept][0] if kept < len(lines) else lines[-1][0] + 1
    tail = (
        f"[... {plural(left, 'more line')} left out to stay under {budget} tokens (lines {start}-{start + left - 1}); "
        f"Read on from line {start} or ask for fewer lines ...]"
    )
    return "\n".join([shown + ":", *numbered[:kept], tail])


def _fitting(lines: Sequence[str], budget: int) -> int:
    """How many of `lines`, from the first, fit in `budget` tokens (one more token each for its newline)."""
    used = 0
    for index, line in enumerate(lines):
        used += count_tokens(line) + 1
        if used > budget:
            return index
    return len(lines)


def _capped(header: str, lines: Iterable[str], budget: int, *, left_out: int = 0) -> str:
    """`header` and as many `lines` as fit in `budget` tokens, then a line saying what was left out.

    `left_out` more lines (and block separators) were never sent, being past what could fit.
    """
    kept: list[str] = []
    used = count_tokens(header)
    pending = list(lines)
    for line in pending:
        cost = count_tokens(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    left = len(pending) - len(kept) + left_out
    tail = (
        [f"[... {plural(left, 'more line')} left out to stay under {budget} tokens; ask for fewer lines ...]"]
        if left
        else []
    )
    return "\n".join([header + ":", *kept, *tail])


def _clip(text: str, length: int) -> str:
    """A line the sandbox cut at MAX_LINE_CHARS, marked with how much of it is not shown."""
    if length <= len(text):
        return text
    return f"{text}… (+{length - len(text)} characters)"


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
