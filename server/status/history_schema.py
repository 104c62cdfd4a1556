"""The history's SQLite schema: its tables and indexes, the columns added since the first one, and the filters of
`GET /v1/tasks` as SQL."""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["ADDED", "COLUMNS", "SCHEMA", "UPSERT", "Row", "TaskQuery", "add_columns"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    handle TEXT PRIMARY KEY, session TEXT, server TEXT, tool TEXT, name TEXT, arguments TEXT,
    status TEXT, started REAL, finished REAL, bytes INTEGER, lines INTEGER, tokens INTEGER,
    progress TEXT, error TEXT, batch TEXT, handed_out INTEGER, retrievals INTEGER, instance INTEGER
);
CREATE INDEX IF NOT EXISTS tasks_started ON tasks (started DESC);
CREATE INDEX IF NOT EXISTS tasks_status ON tasks (status, started DESC);
CREATE INDEX IF NOT EXISTS tasks_server ON tasks (server, started DESC);
CREATE INDEX IF NOT EXISTS tasks_status_server ON tasks (status, server, started DESC);
CREATE INDEX IF NOT EXISTS tasks_batch ON tasks (batch);
CREATE TABLE IF NOT EXISTS logs (handle TEXT, ts REAL, kind TEXT, detail TEXT);
CREATE INDEX IF NOT EXISTS logs_handle ON logs (handle, ts);
"""
COLUMNS = (
    "handle, session, server, tool, name, arguments, status, started, finished, bytes, lines, tokens, "
    "progress, error, batch, handed_out, retrievals, instance, produced, owner, handoff"
)
UPSERT = f"INSERT OR REPLACE INTO tasks ({COLUMNS}) VALUES ({', '.join('?' * 21)})"
ADDED = {"produced": "INTEGER", "owner": "TEXT", "handoff": "TEXT"}
"""Columns added since the first schema: a history made before gains them when opened (NULL in older rows)."""
Row = tuple[Any, ...]


class TaskQuery:
    """Filters of `GET /v1/tasks`."""

    def __init__(self, **filters: str | None) -> None:
        self.filters = {key: value for key, value in filters.items() if value}

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        values: list[Any] = []
        for column in ("status", "server", "tool", "session"):
            if column in self.filters:
                clauses.append(f"{column} = ?")
                values.append(self.filters[column])
        if "instance" in self.filters:  # the process that made the call (many may share the history)
            instance = self.filters["instance"]
            clauses.append("instance = ?")
            values.append(int(instance) if instance.isdigit() and len(instance) <= 10 else -1)
        if "search" in self.filters:
            clauses.append("(name LIKE ? OR arguments LIKE ? OR error LIKE ?)")
            values += [f"%{self.filters['search']}%"] * 3
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), values


def add_columns(db: sqlite3.Connection) -> None:
    """Older histories gain the newer columns (`produced` NULL: the output was kept whole; `owner` NULL: unknown)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
    for name, kind in ADDED.items():
        if name in columns:
            continue
        try:
            db.execute(f"ALTER TABLE tasks ADD COLUMN {name} {kind}")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):  # another process added it first
                raise
