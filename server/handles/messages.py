"""The exact texts a model reads about handles; tests compare against these."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import mcp_types as types

from extraction.wording import plural
from server.errors import clip
from server.handles.calls import Call
from server.handles.questions import Question

FOOTER_ITEMS = 5

__all__ = [
    "Guide",
    "cut_answer_note",
    "describe",
    "ended_session_note",
    "failure",
    "footer",
    "not_ready_message",
    "not_stored_message",
    "question_message",
    "questions_footer",
    "resource_rest_note",
    "resource_running",
    "running_message",
    "size",
    "success",
    "too_large_message",
]


@dataclass(frozen=True, slots=True)
class Guide:
    """What the messages about an output suggest: `extract` when an LLM can answer it (an endpoint is
    configured, or the client samples), and the ways that need none, with examples from the output's start."""

    llm: bool
    json_top: str | None = None  # "object" or "array" when the output starts as JSON
    keys: tuple[str, ...] = ()  # its first keys (of the first element, for an array)
    array_key: str | None = None  # a top-level key whose value is an array
    word: str | None = None  # a frequent word of the output's start


def running_message(call: Call, llm: bool = True) -> str:
    if llm:
        then = f'When it is ready, call tool_output(handle = "{call.handle}", extract = "what to extract").'
    else:
        then = (
            f'When it is ready, search it with Grep(file = "{call.handle}", regex = "what you look for") or read it '
            f'with Read(file = "{call.handle}", start = 0, lines = 100); if it is JSON, '
            f'tool_output(handle = "{call.handle}", mode = "json") shows its shape.'
        )
    return (
        f'Tool {call.public_name} is running in the background (handle: "{call.handle}").\n'
        f'Call wait_for_tool_output(handles = ["{call.handle}"]) to wait for it, or go on with other work.\n' + then
    )


def size(call: Call, *, with_bytes: bool = True) -> str:
    """`<bytes> bytes, <lines> lines, <tokens> tokens` of a stored output, each count with its noun in the right
    number ("1 line"); an estimated token count is marked `~`."""
    tokens = plural(call.tokens, "token")
    counts = [plural(call.lines, "line"), tokens if call.tokens_exact else f"~{tokens}"]
    return ", ".join([plural(call.bytes, "byte"), *counts] if with_bytes else counts)


def too_large_message(call: Call, guide: Guide | None = None) -> str:
    """What a model is told about an output stored under a handle: `extract` first when an LLM can answer
    it; otherwise (and after it) Grep, Read, slice and, for JSON, the JSON view, with concrete examples."""
    guide = guide or Guide(llm=True)
    head = f"Tool output is too large ({size(call)}).\n"
    ways = _ways(call.handle, guide)
    if guide.llm:
        return (
            head + cut_note(call) + f'Call tool_output(handle = "{call.handle}", extract = "what to extract").\n'
            "Provide precise and detailed instructions in `extract` about what you are looking for.\n"
            "Without an LLM:\n" + ways
        )
    return head + cut_note(call) + "No LLM is available here, so read it with these:\n" + ways


def _ways(handle: str, guide: Guide) -> str:
    word = guide.word or "error"
    lines = []
    if guide.json_top is not None:
        keys = ", ".join(json.dumps(k, ensure_ascii=False) for k in guide.keys[:5])
        more = ", …" if len(guide.keys) > 5 else ""
        what = (
            f"an object with keys {keys}{more}"
            if guide.json_top == "object" and keys
            else f"an array of objects with keys {keys}{more}"
            if keys
            else f"an {guide.json_top}"
        )
        lines.append(
            f'- It is JSON ({what}): tool_output(handle = "{handle}", mode = "json") shows its shape, and '
            f'tool_output(handle = "{handle}", mode = "json", query = {json.dumps(_example_query(guide))}) '
            "selects from it with a JMESPath query."
        )
    lines.append(
        f'- Grep(file = "{handle}", regex = {json.dumps(word)}) finds the lines that match a regular expression.'
    )
    lines.append(f'- Read(file = "{handle}", start = 0, lines = 100) reads numbered lines.')
    lines.append(
        f'- tool_output(handle = "{handle}", mode = "slice", slice = {{"anchor": {json.dumps(word)}, "window": 2000}}) '
        "reads the characters around a match, however long its line."
    )
    return "\n".join(lines)


def _example_query(guide: Guide) -> str:
    """A JMESPath query that can be answered by streaming, built from the output's first keys."""

    def name(key: str) -> str:
        plain = key.isidentifier() and key.isascii()
        return key if plain else json.dumps(key)

    find = f"[?contains(to_string(@), '{_quote(guide.word)}')]"
    if guide.json_top == "array":
        return find
    if guide.array_key is not None:
        return name(guide.array_key) + find
    return name(guide.keys[0]) if guide.keys else "@"


def _quote(word: str | None) -> str:
    return (word or "error").replace("\\", "\\\\").replace("'", "\\'")


def cut_note(call: Call) -> str:
    """A line saying what was kept of an output cut at maxOutputBytes; empty for a whole output."""
    if not call.cut:
        return ""
    return (
        f"Only the first part was kept: the tool produced {call.produced} bytes, and {call.bytes} bytes are "
        "stored, ending with a line saying where it was cut (maxOutputBytes).\n"
    )


def cut_answer_note(call: Call | None, what: str) -> str:
    """The line Grep, Read, slice and the JSON view add when the output they `what` (searched, read) was cut."""
    if call is None or not call.cut:
        return ""
    return (
        f"[claimcheck] this output was cut when stored: {call.bytes} of the {call.produced} bytes the tool "
        f"produced were kept (maxOutputBytes), and only those were {what}."
    )


def not_stored_message(call: Call, reason: str, shown: str, *, produced: int | None = None) -> str:
    """The answer when an output could not be stored at all (a full disk): no handle, only its first part.
    `produced`: what the tool produced, when the call is not settled yet."""
    shown_bytes = len(shown.encode("utf-8", "replace"))
    produced = call.produced if produced is None else produced
    return (
        f"Tool {call.public_name} produced {produced} bytes, but claimcheck could not store them ({reason}).\n"
        + (f'Its handle "{call.handle}" is marked failed. ' if call.handed_out else "No handle was kept. ")
        + f"Below are the first {shown_bytes} bytes only, cut there; for the rest, call the tool "
        "again once there is room on the disk, or ask it for less.\n\n"
        f"{shown}\n[claimcheck] cut here: {shown_bytes} of {produced} bytes shown; the rest was not stored."
    )


def clock(at: float) -> str:
    """A wall-clock time as the messages show it (local time, to the second)."""
    return time.strftime("%H:%M:%S", time.localtime(at))


def not_ready_message(call: Call, why: str) -> str:
    """What tool_output says of a call that failed or was cancelled: when, and why."""
    if call.status == "cancelled":
        at = call.finished_at
        when = f"after {_age(call.elapsed())}" + (f", at {clock(at)}" if at is not None else "")
        return f"The call was cancelled {when}: {why.strip().rstrip('.')}."
    return f"The call {call.status}: {why}"


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
        cut = f" (cut: {call.produced} bytes produced, only these kept)" if call.cut else ""
        stored = plural(call.bytes, "byte")
        return f"{head} after {_age(call.elapsed())}, {stored}{cut}, {size(call, with_bytes=False)}"
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
    count = plural(len(waiting), "question")
    verb = "waits" if len(waiting) == 1 else "wait"
    return f"[claimcheck] {count} {verb} for an answer: {items}. Call wait_for_tool_output to see them."


# Handles beyond one session: an owner's, kept after its connection ends.


def owned_handle_note(keep_secs: float, restarted_at: str | None) -> str:
    """What an unknown-handle error adds in a session whose handles outlive their connections."""
    note = f" Outputs are kept {keep_secs:g} s after their last use once no session of yours is open."
    if restarted_at:
        note += (
            f" The shared claimcheck was started anew at {restarted_at} because the previous one was stopped "
            "before its idle time: handles made before then are gone; call the tool again."
        )
    return note


def resource_running(call: Call) -> str:
    """What `resources/read` gives for an output still being made."""
    return (
        f"{call.public_name} is still running ({_age(call.elapsed())} so far), so its output is not ready. "
        "Subscribe to this resource to hear when it is, or call "
        f'wait_for_tool_output(handles = ["{call.handle}"]).'
    )


def resource_rest_note(call: Call, *, shown_chars: int, shown_lines: int) -> str:
    """What follows the head of an output read as a resource: how much is left, and how to read it."""
    h = call.handle
    lines = f"lines 1-{shown_lines}" if shown_lines else "part of line 1"
    return (
        f"\n[claimcheck] This is the head of a larger output: the first {shown_chars} characters ({lines}) of "
        f"{size(call)}. Read the rest with "
        f'Read(file = "{h}", start = {shown_lines}, lines = 200), search it with Grep(file = "{h}", regex = "…"), '
        f'or take characters with tool_output(handle = "{h}", mode = "slice", '
        f'slice = {{"start": {shown_chars}, "length": 4000}}).'
    )


SHARED_HINT = (
    "Without --shared, a handle lives only as long as the client session that made it. A client that opens a new "
    "session for each call (LangChain's MultiServerMCPClient by default, the Inspector CLI) needs "
    "`claimcheck serve --shared` (over HTTP: an Authorization header), which keeps handles across client sessions."
)


def ended_session_note(ended_at: float | None) -> str:
    """What an unknown-handle error adds when the handle's session has ended (`ended_at`), or may have (None)."""
    if ended_at is None:
        return f" If it came from an earlier client session: {SHARED_HINT[0].lower()}{SHARED_HINT[1:]}"
    return (
        f" The session that made it ended at {clock(ended_at)}, when its client closed it, and its running calls "
        f"were cancelled then. {SHARED_HINT}"
    )


def other_session_line(description: str) -> str:
    """A line of list_tool_outputs for an output another session of the same owner made."""
    return f"- (another session) {description}"
