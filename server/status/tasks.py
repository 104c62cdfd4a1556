"""Tool calls as the status API's tasks: one JSON shape for live calls, history rows and SSE events."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

from server.handles.calls import Call
from server.status.summary import arguments_value, cap_text, error_summary

__all__ = ["EVENT_OF", "iso", "row_json", "task_json"]

EVENT_OF = {"ready": "task.completed", "failed": "task.error", "cancelled": "task.cancelled"}


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_json(call: Call, *, store_arguments: bool = True) -> dict[str, Any]:
    """A live call as the API shows it: errors and arguments capped as the history keeps them."""
    finished = call.finished_at
    progress = call.progress
    return {
        "handle": call.handle,
        "session": call.session_id,
        "owner": call.owner,
        "server": call.server,
        "tool": call.tool,
        "name": call.public_name,
        "arguments": arguments_value(call.arguments, store=store_arguments),
        "status": call.status,
        "startedAt": iso(call.started),
        "finishedAt": iso(finished),
        "durationMs": None if finished is None else round((finished - call.started) * 1000, 1),
        "bytes": call.bytes,
        "lines": call.lines,
        "tokens": call.tokens_or_none(),
        "cut": call.cut,  # only the first `bytes` of `producedBytes` were kept (maxOutputBytes)
        "producedBytes": call.produced if call.cut else call.bytes,
        "progress": None
        if progress is None
        else {"progress": progress.progress, "total": progress.total, "message": cap_text(progress.message)},
        "error": error_summary(call.error),
        "batchId": call.batch_id,
        "handedOut": call.handed_out,
        "handoff": call.handoff,  # what handed it out: "time", "background", "size", "task"; None while inline
        "retrievals": call.retrievals,
        "instance": os.getpid(),  # the claimcheck process that runs it
        "live": True,
    }


def row_json(row: tuple[Any, ...]) -> dict[str, Any]:
    """A history row (`history_schema.COLUMNS`) as the API shows a task."""
    (handle, session, server, tool, name, arguments, status, started, finished, size, lines, tokens,
     progress, error, batch, handed_out, retrievals, instance, produced, owner, handoff) = row  # fmt: skip
    progress_values = json.loads(progress) if progress else None
    return {
        "handle": handle,
        "session": session,
        "owner": owner,
        "server": server,
        "tool": tool,
        "name": name,
        "arguments": None if arguments is None else json.loads(arguments),
        "status": status,
        "startedAt": iso(started),
        "finishedAt": iso(finished),
        "durationMs": None if finished is None else round((finished - started) * 1000, 1),
        "bytes": size,
        "lines": lines,
        "tokens": tokens,
        "cut": produced is not None,
        "producedBytes": size if produced is None else produced,
        "progress": None
        if progress_values is None
        else dict(zip(("progress", "total", "message"), progress_values, strict=True)),
        "error": error,
        "batchId": batch,
        "handedOut": bool(handed_out),
        "handoff": handoff,
        "retrievals": retrievals,
        "instance": instance,
        "live": False,
    }
