"""One SQLite database written by many claimcheck processes at once (sub-agents start them side by side).

WAL lets readers run beside the one writer; a writer waits for another's lock in SQLite's busy handler for
up to `BUSY_TIMEOUT_S`, and takes the lock when its transaction begins (`BEGIN IMMEDIATE`), so a transaction
never has to upgrade a stale read to a write. What the busy handler does not cover — switching a new file
to WAL, recovering another process's log — fails at once with SQLITE_BUSY; `retrying` runs such work again
with backoff, for at most `RETRY_FOR_S`, instead of losing it.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = [
    "BUSY_TIMEOUT_S",
    "RETRY_FOR_S",
    "ThrottledWarning",
    "connect_shared",
    "is_busy",
    "retrying",
]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
RETRY_FOR_S = 60.0
_FIRST_BACKOFF_S = 0.005
_MAX_BACKOFF_S = 0.5
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_pause = time.sleep  # the backoff's wait (tests replace it to let a lock go at a known moment)
T = TypeVar("T")


def connect_shared(path: Path) -> sqlite3.Connection:
    """A connection for a database other processes write too: WAL, busy timeout, writes take the lock first."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level="IMMEDIATE", check_same_thread=False)
    try:
        retrying(lambda: db.execute("PRAGMA journal_mode=WAL"), "switch the history to WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL stays consistent; a power cut may lose the last rows
        db.execute("PRAGMA secure_delete=ON")  # what retention and trimming remove is overwritten, not left
    except BaseException:
        db.close()
        raise
    return db


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` says another connection holds a lock (worth trying again), not that something is wrong."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return "locked" in str(exc) or "busy" in str(exc)
    return code & 0xFF in _BUSY_CODES


def retrying(action: Callable[[], T], what: str, *, retry_for: float = RETRY_FOR_S) -> T:
    """`action()`, run again with growing, jittered pauses while the database is busy, for at most `retry_for`.

    Blocking: called in a worker thread. Other errors, and a lock still held after `retry_for`, are raised.
    """
    deadline = time.monotonic() + retry_for
    pause = _FIRST_BACKOFF_S
    attempts = 0
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            attempts += 1
            if not is_busy(exc) or time.monotonic() + pause > deadline:
                raise
            if attempts == 1 or attempts % 10 == 0:
                logger.debug("history busy (%s) on try %d to %s; trying again", exc, attempts, what)
        _pause(pause * random.uniform(0.5, 1.5))
        pause = min(pause * 2, _MAX_BACKOFF_S)


class ThrottledWarning:
    """One warning line (no traceback) for a failure that repeats, at most once every `every` seconds, with how
    many were left unsaid since: a full disk fails every commit of the history, and its log must stay readable."""

    def __init__(self, log: logging.Logger, every: float = 60.0) -> None:
        self._log = log
        self._every = every
        self._next = 0.0
        self._unsaid = 0

    def warn(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self._unsaid += 1
            return
        if self._unsaid:
            message += f" ({self._unsaid} more like it since the last report)"
        self._log.warning(message, *args)
        self._next, self._unsaid = now + self._every, 0
