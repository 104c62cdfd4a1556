"""Which claimcheck process ran a call, and when it ended: the history's `instances` table.

Each process that opens the history adds its row (pid, when it opened it); a clean close sets `ended`. A process
found gone without one (killed) is ended at the last thing it recorded, marked not clean. The dashboard says
from this why an output of a process that has exited cannot be shown.
"""

from __future__ import annotations

import os
import sqlite3

__all__ = ["SCHEMA", "Instance", "begin", "end", "end_gone", "find", "open_pids"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (pid INTEGER, started REAL, ended REAL, clean INTEGER, PRIMARY KEY (pid, started));
"""

Instance = tuple[int, float, float | None, bool]
"""(pid, started, ended or None while it runs, whether it ended cleanly)."""


def begin(db: sqlite3.Connection, started: float) -> None:
    db.execute("INSERT OR IGNORE INTO instances (pid, started) VALUES (?, ?)", (os.getpid(), started))


def end(db: sqlite3.Connection, started: float, at: float) -> None:
    db.execute("UPDATE instances SET ended = ?, clean = 1 WHERE pid = ? AND started = ?", (at, os.getpid(), started))


def end_gone(db: sqlite3.Connection, pid: int) -> None:
    """`pid` is gone without a clean close: its open rows end at the last thing it recorded."""
    db.execute(
        "UPDATE instances SET clean = 0, ended = COALESCE("
        "(SELECT MAX(logs.ts) FROM logs JOIN tasks ON logs.handle = tasks.handle "
        " WHERE tasks.instance = instances.pid AND logs.ts >= instances.started), started) "
        "WHERE pid = ? AND ended IS NULL",
        (pid,),
    )


def open_pids(db: sqlite3.Connection) -> list[int]:
    return [pid for (pid,) in db.execute("SELECT DISTINCT pid FROM instances WHERE ended IS NULL")]


def find(db: sqlite3.Connection, pid: int, at: float) -> Instance | None:
    """The process with `pid` that was running at `at` (the latest to start before it)."""
    row = db.execute(
        "SELECT pid, started, ended, clean FROM instances WHERE pid = ? AND started <= ? ORDER BY started DESC LIMIT 1",
        (pid, at),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2], bool(row[3]))
