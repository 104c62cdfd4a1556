"""Keeping the history small and to its promise: rows of older versions trimmed, old rows removed.

Blocking functions over one open connection; `History` runs them in a worker thread at start and hourly.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time

from server.config import HistorySettings
from server.status.summary import (
    ARGUMENT_BYTES,
    ERROR_BYTES,
    NOTE_ROOM,
    TEXT_BYTES,
    cap_arguments_text,
    cap_text,
    error_summary,
)

__all__ = ["apply_retention", "trim_oversized"]

logger = logging.getLogger(__name__)

_DAY = 86_400.0


def trim_oversized(db: sqlite3.Connection, settings: HistorySettings) -> int:
    """Cut what an older claimcheck stored whole (errors, arguments, progress, log details); how many rows changed.

    With `storeArguments: false` the arguments already stored are removed too.
    """
    changed = 0
    rows = db.execute(
        "SELECT handle, error, arguments, progress FROM tasks "
        "WHERE length(CAST(error AS BLOB)) > ? OR length(CAST(arguments AS BLOB)) > ? "
        "OR length(CAST(progress AS BLOB)) > ?",
        (ERROR_BYTES + NOTE_ROOM, ARGUMENT_BYTES + NOTE_ROOM, TEXT_BYTES + NOTE_ROOM + 100),
    ).fetchall()
    for handle, error, arguments, progress in rows:
        db.execute(
            "UPDATE tasks SET error = ?, arguments = ?, progress = ? WHERE handle = ?",
            (error_summary(error), None if arguments is None else cap_arguments_text(arguments), _progress(progress),
             handle),
        )  # fmt: skip
        changed += 1
    if not settings.store_arguments:
        changed += db.execute("UPDATE tasks SET arguments = NULL WHERE arguments IS NOT NULL").rowcount
    details = db.execute(
        "SELECT rowid, detail FROM logs WHERE length(CAST(detail AS BLOB)) > ?", (TEXT_BYTES + NOTE_ROOM,)
    ).fetchall()
    for rowid, detail in details:
        db.execute("UPDATE logs SET detail = ? WHERE rowid = ?", (cap_text(detail, TEXT_BYTES, "detail"), rowid))
    return changed + len(details)


def _progress(progress: str | None) -> str | None:
    if progress is None:
        return None
    try:
        value, total, message = json.loads(progress)
    except (ValueError, TypeError):
        return None  # not ours to understand: drop it rather than keep it whole
    return json.dumps([value, total, cap_text(message)])


def apply_retention(db: sqlite3.Connection, settings: HistorySettings, *, now: float | None = None) -> int:
    """Remove finished calls older than `maxAgeDays` and all but the newest `maxRows` calls, with their logs."""
    cutoff = (time.time() if now is None else now) - settings.max_age_days * _DAY
    old = "SELECT handle FROM tasks WHERE started < ? AND status != 'running'"
    db.execute(f"DELETE FROM logs WHERE handle IN ({old})", (cutoff,))
    removed: int = db.execute(f"DELETE FROM tasks WHERE handle IN ({old})", (cutoff,)).rowcount
    surplus = "SELECT handle FROM tasks ORDER BY started DESC LIMIT -1 OFFSET ?"
    db.execute(f"DELETE FROM logs WHERE handle IN ({surplus})", (settings.max_rows,))
    removed += db.execute(f"DELETE FROM tasks WHERE handle IN ({surplus})", (settings.max_rows,)).rowcount
    if removed:
        logger.info("history: removed %d calls past the retention limits", removed)
    return removed
