"""Call history in SQLite: metadata only (never output content), written in the background, kept across restarts.

The MCP path only queues a row (`record`); one writer task commits queued rows in batches from a worker
thread. Many claimcheck processes may write the same file at once (`shared_db`: WAL, busy timeout, retries):
a batch that meets a lock waits and is tried again, never dropped. Making a `History` does no I/O; the
database is opened by `open` (or the first read), maintained and written by `run`, which can wait for the
first answer to go out first. Errors and arguments are capped (`summary`), the file and its directory are
private, and retention runs at start and hourly.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from server.config import HistorySettings
from server.handles.calls import Call
from server.platform import pid_alive
from server.status import instances
from server.status.history_schema import COLUMNS, SCHEMA, UPSERT, TaskQuery, add_columns
from server.status.private import private_dir, private_file
from server.status.retention import apply_retention, trim_oversized
from server.status.shared_db import ThrottledWarning, connect_shared, retrying
from server.status.summary import TEXT_BYTES, arguments_column, cap_text, error_summary
from server.status.tasks import row_json

__all__ = ["RETENTION_EVERY_SECS", "History", "TaskQuery"]

logger = logging.getLogger(__name__)

RETENTION_EVERY_SECS = 3600.0


class History:
    def __init__(
        self,
        path: Path,
        settings: HistorySettings | None = None,
        *,
        coalesce_secs: float = 0.05,
        retention_every_secs: float = RETENTION_EVERY_SECS,
    ) -> None:
        self.path = path
        self.settings = settings if settings is not None else HistorySettings()
        self.coalesce_secs = coalesce_secs
        self.retention_every_secs = retention_every_secs
        self._send, self._receive = anyio.create_memory_object_stream[Any](100_000)
        self._retention_passed: anyio.Event | None = None  # made in `run`, where there is an event loop
        self._ready: anyio.Event | None = None
        self._flush_wanted: anyio.Event | None = None  # made in the event loop, by `flush` or `_write`
        self._lock = threading.Lock()  # one connection, used by one worker thread at a time
        self._db: sqlite3.Connection | None = None
        self._closed = False
        self.started = time.time()  # this process's row in `instances`
        self._write_failed = ThrottledWarning(logger)

    def open(self) -> None:
        """Open the database (private file, WAL, schema) unless it is open; blocking, safe to call again."""
        with self._lock:
            self._open_locked()

    def _open_locked(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if self._closed:
            raise sqlite3.ProgrammingError("the history is closed")
        path = self.path
        private_dir(path.parent)
        for existing in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
            if existing == path or existing.exists():
                private_file(existing)  # SQLite gives its -wal and -shm files the database file's mode
        db = connect_shared(path)
        try:
            retrying(lambda: db.executescript(SCHEMA + instances.SCHEMA), "create the history's tables")
            retrying(lambda: add_columns(db), "add the columns of newer versions")
            retrying(lambda: self._close_orphans(db), "end the calls of instances that are gone")
            retrying(lambda: _in_transaction(db, instances.begin, self.started), "record this instance")
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._open_locked()
            with db:
                yield db

    def close(self) -> None:
        """Close the connection (a history never used is opened first, so its file exists with its tables)."""
        if not self._closed:
            self.open()
        self._disconnect()

    def _disconnect(self) -> None:
        with self._lock:
            if self._db is not None:
                db = self._db
                try:
                    retrying(lambda: _in_transaction(db, instances.end, self.started, time.time()), "end this instance")
                except sqlite3.Error:
                    logger.warning("could not record this instance's end in %s", self.path, exc_info=True)
                self._db.close()
            self._db, self._closed = None, True

    def _close_orphans(self, db: sqlite3.Connection) -> None:
        """Calls left running by an instance that is gone ended with it."""
        running = db.execute("SELECT DISTINCT instance FROM tasks WHERE status = 'running'").fetchall()
        gone = [(instance,) for (instance,) in running if instance != os.getpid() and not pid_alive(instance)]
        if gone:
            with db:
                db.executemany(
                    "UPDATE tasks SET status = 'cancelled', error = 'claimcheck stopped before the call finished' "
                    "WHERE status = 'running' AND instance = ?",
                    gone,
                )
        ended = [pid for pid in instances.open_pids(db) if pid != os.getpid() and not pid_alive(pid)]
        with db:
            for pid in ended:
                instances.end_gone(db, pid)

    def maintain(self) -> None:
        """At start: trim rows an older version stored whole (then compact the file), and apply retention."""
        trimmed = retrying(self._trim, "trim the history")
        if trimmed:
            logger.info("history: cut %d rows that held more than metadata", trimmed)
            retrying(lambda: self._outside_transaction("VACUUM"), "compact the history")
            self._outside_transaction("PRAGMA wal_checkpoint(TRUNCATE)")  # nor in the log
        self.retain()

    def _trim(self) -> int:
        with self._connect() as db:
            return trim_oversized(db, self.settings)

    def _outside_transaction(self, statement: str) -> None:
        with self._lock:
            self._open_locked().execute(statement)

    def retain(self) -> None:
        """Remove calls past `maxAgeDays` and `maxRows`, and shrink the write-ahead log."""
        removed = retrying(self._apply_retention, "apply the history's retention")
        if removed:
            self._outside_transaction("PRAGMA wal_checkpoint(TRUNCATE)")  # done as far as other readers allow

    def _apply_retention(self) -> int:
        with self._connect() as db:
            return apply_retention(db, self.settings)

    async def retention_pass(self) -> None:
        """Wait until the next hourly retention pass has finished (for tests and tools); needs `run`."""
        if self._retention_passed is None:
            raise RuntimeError("the history's writer is not running")
        await self._retention_passed.wait()

    async def _retain_periodically(self) -> None:
        while True:
            await anyio.sleep(self.retention_every_secs)
            try:
                await anyio.to_thread.run_sync(self.retain)
            except sqlite3.Error as exc:
                logger.warning("could not apply the history's retention to %s: %s", self.path, exc)
            passed, self._retention_passed = self._retention_passed, anyio.Event()
            if passed is not None:
                passed.set()

    def record(self, call: Call, kind: str) -> None:
        """Queue the call's current state and its newest log entry; never waits."""
        progress = call.progress
        row = (
            call.handle, call.session_id, call.server, call.tool, call.public_name,
            arguments_column(call.arguments, store=self.settings.store_arguments), call.status, call.started,
            call.finished_at, call.bytes, call.lines, call.tokens_or_none(),
            None if progress is None else json.dumps([progress.progress, progress.total, cap_text(progress.message)]),
            error_summary(call.error), call.batch_id, int(call.handed_out), call.retrievals, os.getpid(),
            call.produced if call.cut else None, call.owner, call.handoff,
        )  # fmt: skip
        ts, log_kind, detail = call.log[-1] if call.log else (call.started, kind, "")
        entry = (call.handle, ts, log_kind, cap_text(detail, TEXT_BYTES, "detail") or "")
        try:
            self._send.send_nowait(("row", row, entry))
        except anyio.WouldBlock:
            logger.warning("history queue full; dropping an update of %s", call.handle)

    async def flush(self) -> None:
        """Wait until everything queued so far is committed."""
        done = anyio.Event()
        await self._send.send(("flush", done))
        self._flush_event().set()
        await done.wait()

    def _flush_event(self) -> anyio.Event:
        if self._flush_wanted is None:
            self._flush_wanted = anyio.Event()
        return self._flush_wanted

    async def run(
        self,
        *,
        after: Callable[[], Awaitable[None]] | None = None,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Once `after()` returns (start-up work waits for the first answer), open and maintain the database, then
        write until cancelled, with hourly retention. What is queued when it is cancelled, even while it still
        waits for `after`, is committed. Started (and `ready`) once the database is maintained."""
        pending: list[Any] = []
        try:
            if after is not None:
                await after()
            await anyio.to_thread.run_sync(self.open)
            try:
                await anyio.to_thread.run_sync(self.maintain)
            except sqlite3.Error as exc:
                logger.warning("could not trim the history in %s: %s", self.path, exc)
            self._retention_passed = anyio.Event()
            self._ready_event().set()
            task_status.started()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._retain_periodically)
                await self._write(pending)
        finally:
            with anyio.CancelScope(shield=True):  # the retention pass has ended: the connection is ours to close
                pending.extend(self._drain())
                await anyio.to_thread.run_sync(self._commit, pending)
                _release(pending)
                await anyio.to_thread.run_sync(self._disconnect)

    async def ready(self) -> None:
        """Wait until `run` has opened and maintained the database (reads are then as fast as they get)."""
        await self._ready_event().wait()

    def _ready_event(self) -> anyio.Event:
        if self._ready is None:  # made by whichever comes first, `run` or `ready`, in the event loop
            self._ready = anyio.Event()
        return self._ready

    async def _write(self, pending: list[Any]) -> None:
        """Commit queued rows in batches until cancelled; what is queued then stays in `pending`."""
        async for first in self._receive:
            pending.append(first)
            if first[0] != "flush":  # gather a burst into one commit, without waking for each row
                with anyio.move_on_after(self.coalesce_secs):
                    await self._flush_event().wait()
            if self._flush_wanted is not None and self._flush_wanted.is_set():
                self._flush_wanted = None
            pending.extend(self._drain())
            committing = pending[:]
            pending.clear()  # a cancel during the commit must not commit it twice
            try:
                await anyio.to_thread.run_sync(self._commit, committing)
            finally:
                _release(committing)

    def _drain(self) -> list[Any]:
        items = []
        while True:
            try:
                items.append(self._receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                return items

    def _commit(self, batch: list[Any]) -> None:
        rows = {item[1][0]: item[1] for item in batch if item[0] == "row"}  # the newest state of each call
        logs = [item[2] for item in batch if item[0] == "row" and item[2][2]]
        if not rows:
            return

        def write() -> None:
            with self._connect() as db:
                db.executemany(UPSERT, rows.values())
                db.executemany("INSERT INTO logs (handle, ts, kind, detail) VALUES (?, ?, ?, ?)", logs)

        try:
            retrying(write, f"write {len(rows)} history rows")
        except (sqlite3.Error, OSError) as exc:  # the history cannot be opened, or the disk is full: calls go on
            self._write_failed.warn(
                "could not write %d history rows to %s: %s; calls go on, and the history misses them "
                "(said at most once a minute)",
                len(rows),
                self.path,
                exc,
            )

    # ---- reads (blocking; the API runs them in a worker thread)

    def tasks(self, query: TaskQuery, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        where, values = query.where()
        with self._connect() as db:
            total = db.execute(f"SELECT COUNT(*) FROM tasks{where}", values).fetchone()[0]
            rows = db.execute(
                f"SELECT {COLUMNS} FROM tasks{where} ORDER BY started DESC LIMIT ? OFFSET ?", [*values, limit, offset]
            ).fetchall()
        return [row_json(row) for row in rows], int(total)

    def get(self, handle: str) -> dict[str, Any] | None:
        with self._connect() as db:
            row = db.execute(f"SELECT {COLUMNS} FROM tasks WHERE handle = ?", (handle,)).fetchone()
        return None if row is None else row_json(row)

    def instance_of(self, task: dict[str, Any]) -> instances.Instance | None:
        """The process that ran a task of `tasks`/`get`, as the `instances` table knows it."""
        pid, started = task.get("instance"), task.get("startedAt")
        if not isinstance(pid, int) or not isinstance(started, str):
            return None
        at = dt.datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
        with self._connect() as db:
            found = instances.find(db, pid, at)
            if found is not None and found[2] is None and pid != os.getpid() and not pid_alive(pid):
                instances.end_gone(db, pid)  # gone since this process opened the history
                found = instances.find(db, pid, at)
            return found

    def logs(self, handle: str) -> list[tuple[float, str, str]]:
        with self._connect() as db:
            return db.execute("SELECT ts, kind, detail FROM logs WHERE handle = ? ORDER BY ts", (handle,)).fetchall()

    def group(self, batch: str) -> list[dict[str, Any]]:
        with self._connect() as db:
            rows = db.execute(f"SELECT {COLUMNS} FROM tasks WHERE batch = ? ORDER BY started", (batch,)).fetchall()
        return [row_json(row) for row in rows]

    def stats(self) -> dict[str, Any]:
        with self._connect() as db:
            by_status = dict(db.execute("SELECT status, COUNT(*) FROM tasks GROUP BY status").fetchall())
            by_server = dict(db.execute("SELECT server, COUNT(*) FROM tasks GROUP BY server").fetchall())
            durations = db.execute(
                "SELECT AVG(finished - started), MIN(finished - started), MAX(finished - started), SUM(bytes) "
                "FROM tasks WHERE finished IS NOT NULL"
            ).fetchone()
        average, shortest, longest, output_bytes = durations
        return {
            "byStatus": by_status,
            "byServer": by_server,
            "totalTasks": sum(by_status.values()),
            "activeTasks": by_status.get("running", 0),
            "duration": {
                "avg": None if average is None else round(average * 1000, 1),
                "min": None if shortest is None else round(shortest * 1000, 1),
                "max": None if longest is None else round(longest * 1000, 1),
            },
            "outputBytes": output_bytes or 0,
        }


def _in_transaction(db: sqlite3.Connection, write: Any, *args: Any) -> None:
    with db:
        write(db, *args)


def _release(batch: list[Any]) -> None:
    for item in batch:
        if item[0] == "flush":
            item[1].set()
