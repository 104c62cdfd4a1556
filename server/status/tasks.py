"""Tool calls as the status API's tasks: one JSON shape for live calls, history rows and SSE events."""

from __future__ import annotations

import datetime as dt
from typing import Any

from server.handles.calls import Call
from server.status.summary import arguments_value, cap_text, error_summary

__all__ = ["EVENT_OF", "iso", "task_json"]

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
        "retrievals": call.retrievals,
        "live": True,
    }
