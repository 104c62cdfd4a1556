"""The exact texts a model reads about handles (DESIGN §4–§5); tests compare against these."""

from __future__ import annotations

import json
from collections.abc import Sequence

import mcp_types as types

from server.errors import clip
from server.handles.calls import Call
from server.handles.questions import Question

FOOTER_ITEMS = 5

__all__ = [
    "describe",
    "failure",
    "footer",
    "not_stored_message",
    "question_message",
    "questions_footer",
    "running_message",
    "success",
    "too_large_message",
]


def running_message(call: Call) -> str:
    return (
        f'Tool {call.public_name} is running in the background (handle: "{call.handle}").\n'
        f'Call wait_for_tool_output(handles = ["{call.handle}"]) to wait for it, or go on with other work.\n'
        f'When it is ready, call tool_output(handle = "{call.handle}", extract = "what to extract").'
    )


def too_large_message(call: Call) -> str:
    return (
        f"Tool output is too large ({call.bytes} bytes, {call.lines} lines, {call.tokens_label()} tokens).\n"
        + cut_note(call)
        + f'Call tool_output(handle = "{call.handle}", extract = "what to extract").\n'
        "Provide precise and detailed instructions in `extract` about what you are looking for."
    )


def cut_note(call: Call) -> str:
    """A line saying what was kept of an output cut at maxOutputBytes; empty for a whole output."""
    if not call.cut:
        return ""
    return (
        f"Only the first part was kept: the tool produced {call.produced} bytes, and the stored output ends "
        "with a line saying where it was cut (maxOutputBytes).\n"
    )


def not_stored_message(call: Call, reason: str, shown: str) -> str:
    """The answer when an output could not be stored at all (a full disk): no handle, only its first part."""
    shown_bytes = len(shown.encode("utf-8", "replace"))
    return (
        f"Tool {call.public_name} produced {call.produced} bytes, but claimcheck could not store them ({reason}).\n"
        + (f'Its handle "{call.handle}" is marked failed. ' if call.handed_out else "No handle was kept. ")
        + f"Below are the first {shown_bytes} bytes only, cut there; for the rest, call the tool "
        "again once there is room on the disk, or ask it for less.\n\n"
        f"{shown}\n[claimcheck] cut here: {shown_bytes} of {call.produced} bytes shown; the rest was not stored."
    )


def success(tool: str, handle: str, strategy: str, body: str) -> str:
    return f"ABSTRACT FROM TOOL OUTPUT {tool} WITH HANDLE {handle}, STRATEGY:{strategy}:\n\n{body}"


def failure(tool: str, handle: str, strategy: str, why: str) -> str:
    return f"TOOL_OUTPUT FAILED FOR {tool} WITH HANDLE {handle}, STRATEGY:{strategy}:\n\n{why}"


def _age(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"


def _thousands(tokens: int) -> str:
    return f"{tokens / 1000:.0f}K" if tokens >= 1000 else str(tokens)


def describe(call: Call) -> str:
    """One line about a handle: status, timing, size or error, progress."""
    head = f'"{call.handle}" {call.public_name}: {call.status}'
    if call.status == "running":
        progress = f", {call.progress.describe()}" if call.progress else ""
        return f"{head}, {_age(call.elapsed())} so far{progress}"
    if call.status == "ready":
        return (
            f"{head} after {_age(call.elapsed())}, {call.bytes} bytes, {call.lines} lines, {call.tokens_label()} tokens"
        )
    first_line = (call.error or "").strip().splitlines()[0] if (call.error or "").strip() else "no details"
    return f"{head} after {_age(call.elapsed())}: {first_line[:300]}"


def footer(running: Sequence[Call], ready: Sequence[Call]) -> str | None:
    """The status line every result carries while outputs are running or ready and not yet looked at."""
    if not running and not ready:
        return None
    parts = []
    if running:
        items = _some([f'{c.public_name} "{c.handle}" ({_age(c.elapsed())})' for c in running])
        parts.append(f"{len(running)} running: {items}.")
    if ready:
        items = _some([f'{c.public_name} "{c.handle}" (~{_thousands(c.tokens)} tokens)' for c in ready])
        parts.append(f"{len(ready)} ready: {items}.")
    return "[claimcheck] " + " ".join(parts) + " Use wait_for_tool_output or tool_output."


def _some(items: list[str], shown: int = FOOTER_ITEMS) -> str:
    """The first `shown` items, and how many more there are (the footer must stay small)."""
    more = f", and {len(items) - shown} more (list_tool_outputs shows all)" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


QUESTION_PART_CHARS = 4000
"""The most characters of one part of a downstream's question (its message, a sampling turn) shown."""


def question_message(question: Question) -> str:
    """A downstream's question, as `wait_for_tool_output` shows it to the model, and how to answer it."""
    about = f'Tool {question.tool} (handle "{question.handle}")' if question.handle else f"The request {question.tool}"
    lines: list[str] = []
    params = question.params
    if isinstance(params, types.CreateMessageRequestParams):
        lines.append(f'{about} asks your model for a completion and waits (question "{question.id}"):')
        if params.system_prompt:
            lines.append(f"System prompt: {clip(params.system_prompt, QUESTION_PART_CHARS)}")
        for message in params.messages:
            blocks = message.content if isinstance(message.content, list) else [message.content]
            text = " ".join(b.text if isinstance(b, types.TextContent) else f"[{b.type}]" for b in blocks)
            lines.append(f"[{message.role}] {clip(text, QUESTION_PART_CHARS)}")
        lines.append(f"(in at most {params.max_tokens} tokens)")
        how = f'{{"question": "{question.id}", "text": "<your completion>"}}), or with "action": "decline"'
    elif isinstance(params, types.ElicitRequestParams):
        lines.append(f'{about} asks for input and waits (question "{question.id}"):')
        lines.append(clip(params.message, QUESTION_PART_CHARS))
        if isinstance(params, types.ElicitRequestURLParams):
            lines.append(f"URL to open: {clip(params.url, QUESTION_PART_CHARS)}")
            how = f'{{"question": "{question.id}", "action": "accept"}}) once done, or with "action": "decline"'
        else:
            schema = json.dumps(params.requested_schema, ensure_ascii=False)
            lines.append(f"Fields (JSON schema): {clip(schema, QUESTION_PART_CHARS)}")
            how = (
                f'{{"question": "{question.id}", "action": "accept", "content": {{<the fields>}}}}), '
                'or with "action": "decline" or "cancel"'
            )
    else:  # pragma: no cover - roots questions are for the client only (Inbox.for_model)
        return f'{about} asks for your client\'s roots (question "{question.id}").'
    if question.carried:
        lines.append("Your client was sent this question too; answer here only if it is not answered there.")
    lines.append(f"Answer with wait_for_tool_output(answer = {how}). Unanswered, it fails at the call's timeout.")
    return "\n".join(lines)


def questions_footer(waiting: Sequence[Question]) -> str | None:
    """The line every result carries while downstream questions wait for an answer."""
    if not waiting:
        return None
    items = _some([f'{q.tool} "{q.handle or q.id}" ({q.kind})' for q in waiting])
    count = len(waiting)
    return f"[claimcheck] {count} question(s) wait for an answer: {items}. Call wait_for_tool_output to see them."


# Handles beyond one session (issue 23).


def owned_handle_note(keep_secs: float, restarted_at: str | None) -> str:
    """What an unknown-handle error adds in a session whose handles outlive their connections."""
    note = f" Outputs are kept {keep_secs:g} s after their last use once no session of yours is open."
    if restarted_at:
        note += (
            f" The shared claimcheck was started anew at {restarted_at} because the previous one was stopped "
            "before its idle time: handles made before then are gone; call the tool again."
        )
    return note


def other_session_line(description: str) -> str:
    """A line of list_tool_outputs for an output another session of the same owner made."""
    return f"- (another session) {description}"
