"""claimcheck's own tools over a session's handles: tool_output, wait_for_tool_output, list and cancel."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from extraction import Extraction, Source, count_tokens, exceeds, truncate_source
from extraction import Mode as ExtractMode
from extraction.wording import plural
from server.config import Settings
from server.errors import OwnToolError, clip, problems
from server.handles import messages, questions
from server.handles.calls import Call
from server.handles.guide import guide_for
from server.handles.json_view import JsonViewError
from server.handles.json_view import query as json_query
from server.handles.json_view import shape as json_shape
from server.handles.mirrors import lookup, refresh, remote_calls
from server.handles.own_manage import cancel, list_page
from server.handles.own_registry import (
    HANDLE_TOOL_REGISTRY,
    OWN_TOOLS_BY_NAME,
    CancelArgs,
    ListArgs,
    Mode,
    ToolOutputArgs,
    WaitArgs,
)
from server.handles.resources import resource_link
from server.handles.retrieval import Opener, RetrievalError, SliceRequest, error_of, raw, slice_text, source_of
from server.handles.sessions import Session, Sessions
from server.handles.shares import waiting

__all__ = ["OWN_TOOLS", "ExtractFn", "OwnToolError", "Reporter", "run_own_tool"]

PROGRESS_EVERY_S = 5.0
UNKNOWN_SHOWN = 5
Reporter = Callable[[float, float | None, str | None], Awaitable[None]]
ExtractFn = Callable[[Call, Opener, str, ExtractMode], Awaitable[Extraction]]  # (call, its output, extract, mode)

OWN_TOOLS = frozenset(tool.name for tool in HANDLE_TOOL_REGISTRY)


async def run_own_tool(
    name: str,
    arguments: dict[str, Any] | None,
    *,
    session: Session,
    origin: str,
    sessions: Sessions,
    settings: Settings,
    threshold: int,
    report: Reporter,
    extract: ExtractFn,
    llm: bool = True,
) -> types.CallToolResult:
    """Answer one call of an own tool, asked from `origin` (`Entrance.origin`: in a session several connections
    share, its own calls come first); bad input raises `OwnToolError`. `llm`: whether `extract` can be answered
    for this client, so messages suggest it."""
    try:
        args = OWN_TOOLS_BY_NAME[name].parse(arguments)
    except ValidationError as exc:
        raise OwnToolError(f"Invalid arguments for {name}: {problems(exc)}") from None
    if isinstance(args, ToolOutputArgs):
        return await _tool_output(args, session, sessions, threshold, extract)
    if isinstance(args, WaitArgs):
        with waiting(sessions.live, session, settings.limits.waits):  # the principal's share, else OverShare
            return await _wait(args, session, origin, sessions, settings, report, llm)
    if isinstance(args, CancelArgs):
        return _text(await cancel(args.handle, session, sessions))
    assert isinstance(args, ListArgs)
    calls = [*session.handed_out(), *await remote_calls(sessions, session)]
    page = list_page(session, calls, origin=origin, limit=args.limit, cursor=args.cursor, threshold=threshold)
    return _text(page)


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


async def _tool_output(
    args: ToolOutputArgs, session: Session, sessions: Sessions, threshold: int, extract: ExtractFn
) -> types.CallToolResult:
    call = (await lookup(sessions, session, [args.handle]))[0]
    if call is None:
        handle = clip(args.handle)
        why = f'Unknown handle "{handle}": it is not a handle of this session. Call list_tool_outputs to see them.'
        why += sessions.unknown_note(session, [args.handle])
        raise OwnToolError(messages.failure("UNKNOWN", handle, args.mode, why))

    def fail(why: str, strategy: str = args.mode) -> OwnToolError:
        return OwnToolError(messages.failure(call.public_name, call.handle, strategy, why))

    conflict = _mode_given(args)
    if conflict is not None:
        raise fail(conflict)
    if call.status == "running":
        raise fail("The call is still running; call wait_for_tool_output to wait for it.")
    if call.status != "ready":
        raise fail(messages.not_ready_message(call, await error_of(call, session, sessions, threshold=threshold)))
    if args.mode in ("auto", "full-chunked", "read-grep", "excerpts") and not (args.extract or "").strip():
        raise fail(f'`extract` is required for mode "{args.mode}": say precisely what to extract.')
    call.retrieved()
    call.note("retrieved", f"tool_output mode={args.mode}")
    size = messages.size(call)
    try:  # every mode reads the output from its file, in pieces (server.handles.retrieval)
        opener = await source_of(call, session, sessions)
        if args.mode == "raw":
            async with opener() as source:
                body = await anyio.to_thread.run_sync(lambda: raw(source, size=size, threshold=threshold))
            return _text(messages.success(call.public_name, call.handle, "raw", body))
        if args.mode == "slice":
            if args.slice is None:
                raise RetrievalError("mode slice needs `slice`: {start, length} or {anchor, window, match_index}.")
            request = SliceRequest(**args.slice.model_dump())
            async with opener() as source:
                body = await anyio.to_thread.run_sync(lambda: slice_text(source, request, threshold=threshold))
            return _text(messages.success(call.public_name, call.handle, "slice", _noted(body, call, "read")))
        if args.mode == "json":
            async with opener() as source:
                body = await anyio.to_thread.run_sync(lambda: _json_view(source, args.query, call, threshold))
            return _text(messages.success(call.public_name, call.handle, "json", _noted(body, call, "read")))
        if args.mode == "truncate":
            async with opener() as source:
                body = await anyio.to_thread.run_sync(lambda: truncate_source(source, threshold=threshold))
            return _text(messages.success(call.public_name, call.handle, "truncate", body))
        assert args.extract is not None and args.mode in ("auto", "full-chunked", "read-grep", "excerpts")
        extraction = await extract(call, opener, args.extract, args.mode)
    except RetrievalError as exc:
        raise fail(str(exc)) from None
    return _text(messages.success(call.public_name, call.handle, extraction.strategy, extraction.body))


def _mode_given(args: ToolOutputArgs) -> str | None:
    """Read `query` or `slice` without a mode as the mode they belong to (models leave `mode` out); None, or why
    they cannot be read with the mode given (they were ignored)."""
    implied: tuple[tuple[str, Mode], ...] = (("query", "json"), ("slice", "slice"))
    for key, mode in implied:
        value = getattr(args, key)
        if value is None or (isinstance(value, str) and not value.strip()) or args.mode == mode:
            continue
        others = [other for other in ("extract", "query", "slice") if other != key and getattr(args, other)]
        if "mode" not in args.model_fields_set and not others:
            args.mode = mode
            continue
        why = f'`{key}` belongs to mode "{mode}"'
        with_others = f" with `{others[0]}`" if others else ""
        return (
            f'{why}, and this call asks for mode "{args.mode}"{with_others}: give mode "{mode}", or leave `{key}` out.'
        )
    return None


def _noted(body: str, call: Call, what: str) -> str:
    note = messages.cut_answer_note(call, what)
    return f"{note}\n{body}" if note else body


def _json_view(source: Source, query: str | None, call: Call, threshold: int) -> str:
    """The JSON view's answer: the shape without a query, else the query's result in JSON."""
    grep = f'search it with Grep(file = "{call.handle}", regex = "…")'
    try:
        if query is None or not query.strip():
            text, note = json_shape(source)
            head = "The shape of the JSON (query it with `query`, in JMESPath):"
        else:
            text, note = json_query(source, query, max_chars=threshold * 3, grep_hint=grep)
            head = f"The result of {clip(query, 200)!r}:"
    except JsonViewError as exc:
        raise RetrievalError(str(exc)) from None
    if exceeds(text, threshold):
        raise RetrievalError(f"The answer is over the {threshold}-token threshold: narrow the query, or {grep}.")
    return "\n".join([head, *([f"({note})"] if note else []), text])


class _ProgressRelay:
    """What a wait reports as its progress: the server's own (progress, total, message) while it waits for one call
    that reports some, else the seconds waited and a summary of the calls' progress. Sent only when it has grown:
    a request's progress must increase."""

    def __init__(self, report: Reporter, started: float) -> None:
        self._report = report
        self._started = started
        self._last = -1.0

    async def send(self, running: list[Call]) -> None:
        own = running[0].progress if len(running) == 1 else None
        if own is not None:
            message = f"{running[0].public_name}: {own.message}" if own.message else running[0].public_name
            value, total = own.progress, own.total
        else:
            shown = [f"{call.public_name} {p.describe()}" for call in running[:3] if (p := call.progress) is not None]
            message = f"waiting for {plural(len(running), 'running output')}" + (
                f" ({'; '.join(shown)})" if shown else ""
            )
            value, total = time.monotonic() - self._started, None
        if value > self._last:
            self._last = value
            await self._report(value, total, message)


async def _wait(
    args: WaitArgs,
    session: Session,
    origin: str,
    sessions: Sessions,
    settings: Settings,
    report: Reporter,
    llm: bool,
) -> types.CallToolResult:
    """Wait for outputs; return early for a question not shown yet (`server.handles.questions`)."""
    inbox = session.inbox
    answered = questions.deliver(inbox, args.answer.model_dump(exclude_none=True)) if args.answer else None
    if args.handles:  # none, or an empty list (as models write "all"): every running or unread call
        wanted = list(dict.fromkeys(args.handles))  # a handle named twice is waited for once
        found = await lookup(sessions, session, wanted)
        unknown = [h for h, call in zip(wanted, found, strict=True) if call is None]
        if unknown:
            shown = ", ".join(f'"{clip(h)}"' for h in unknown[:UNKNOWN_SHOWN])
            more = f", and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
            note = sessions.unknown_note(session, unknown)
            handles = "handle" if len(unknown) == 1 else "handles"
            raise OwnToolError(f"Unknown {handles} for this session: {shown}{more}. Call list_tool_outputs.{note}")
        targets = [call for call in found if call is not None]
    else:
        targets = [c for c in session.handed_out() if c.status == "running" or not c.seen]
        targets = [c for c in targets if c.origin == origin] or targets
        targets += [c for c in await remote_calls(sessions, session) if c.status == "running"]
    if not targets and not inbox.for_model():
        return _text(_after(answered, "No outputs are running in this session, and none is waiting to be read."))
    limit = min(args.timeout_secs if args.timeout_secs is not None else settings.wait_max_secs, settings.wait_max_secs)
    started = time.monotonic()
    reported = started - PROGRESS_EVERY_S  # the first round reports at once
    remote = any(call.home is not None for call in targets)  # other replicas' calls: read again, and poll
    relay = _ProgressRelay(report, started)
    with anyio.move_on_after(limit):
        while not any(call.finished.is_set() for call in targets) and not inbox.unshown():
            if not remote or time.monotonic() - reported >= PROGRESS_EVERY_S:
                reported = time.monotonic()
                await relay.send([call for call in targets if not call.finished.is_set()])
            with anyio.move_on_after(sessions.backend.poll_secs if remote else PROGRESS_EVERY_S):
                await questions.either(session.changed(), inbox.changed(), sessions.backend.changed())
            await refresh(sessions, targets)
    done = [call for call in targets if call.finished.is_set()]
    still = [call for call in targets if not call.finished.is_set()]
    asked = inbox.for_model()
    for question in asked:
        question.shown = True
    asking = [types.TextContent(type="text", text=messages.question_message(q)) for q in asked]
    if not done:
        none = "The output did not" if len(targets) == 1 else f"None of the {len(targets)} outputs"
        lines = [f"{none} finish within {limit:g} s. Still running:"]
        if asked:
            waits = "waits" if len(asked) == 1 else "wait"
            lines = [f"{plural(len(asked), 'question')} {waits} for an answer (below). Still running:"]
        text = _after(answered, "\n".join([*lines, *(f"- {messages.describe(call)}" for call in still)]))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text), *asking])
    for call in done:
        await sessions.ensure_stored(session, call)
    guides = {c.handle: await guide_for(c, session, llm=llm) for c in done if c.status == "ready" and c.stored}
    result = _report_finished(done, still, settings, guides, links=session.takes_links)
    head, *rest = result.content
    if answered and isinstance(head, types.TextContent):
        head = types.TextContent(type="text", text=_after(answered, head.text))
    return result.model_copy(update={"content": [head, *rest, *asking]})


def _after(answered: str | None, text: str) -> str:
    return f"{answered}\n{text}" if answered else text


def _report_finished(
    done: list[Call], still: list[Call], settings: Settings, guides: dict[str, messages.Guide], *, links: bool
) -> types.CallToolResult:
    """The finished outputs, whole where they fit, else their guides, within the token threshold: the summary
    first, then outputs and guides while they fit; what does not fit is named in one line."""
    content: list[types.ContentBlock] = []
    summary = [f"{len(done)} finished" + (f", {len(still)} still running" if still else "") + ":"]
    lines = [f"- {messages.describe(call)}" for call in [*done, *still]]
    shown = len(lines)
    while shown > 1 and count_tokens("\n".join(lines[:shown])) > settings.async_token_threshold // 2:
        shown = shown * 3 // 4
    summary.extend(lines[:shown])
    if shown < len(lines):
        summary.append(f"- and {len(lines) - shown} more: list_tool_outputs shows them")
    reserve = count_tokens(_unfit(done, settings.async_token_threshold)) if done else 0  # the most it can say
    budget = settings.async_token_threshold - count_tokens("\n".join(summary)) - reserve
    unguided: list[Call] = []
    for call in done:
        call.mark_seen()
        if call.status == "ready" and call.result is not None and call.tokens <= budget:
            budget -= call.tokens
            call.retrieved()
            content.append(types.TextContent(type="text", text=f'Output of {call.public_name} ("{call.handle}"):'))
            content.extend(call.result.content)
        elif call.status == "ready":
            text = messages.too_large_message(call, guides.get(call.handle))
            cost = count_tokens(text)
            if cost > budget:
                unguided.append(call)
                continue
            budget -= cost
            content.append(types.TextContent(type="text", text=text))
            if links:
                content.append(resource_link(call))
    if unguided:
        content.append(types.TextContent(type="text", text=_unfit(unguided, settings.async_token_threshold)))
    return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(summary)), *content])


def _unfit(calls: list[Call], threshold: int) -> str:
    """The line naming finished outputs whose guide did not fit under the token threshold."""
    names = ", ".join(f'"{call.handle}"' for call in calls[:UNKNOWN_SHOWN])
    more = f", and {len(calls) - UNKNOWN_SHOWN} more" if len(calls) > UNKNOWN_SHOWN else ""
    return (
        f"{plural(len(calls), 'more finished output')} did not fit under the token threshold ({threshold}): "
        f"{names}{more}. Read each with tool_output(handle = …), Read or Grep."
    )
