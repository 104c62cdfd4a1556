"""The live part of `GET /v1/tasks` across replicas: the other replicas' running handles, from Redis.

History stays local to each replica; what another replica runs is read from the shared state backend in a
bounded number of commands (the newest page of running handles) and shown like a live task, marked with the
replica that owns it. The token holder sees every session here, as the history shows them all; no arguments
(the shared state does not hold them), no outputs, errors and progress text capped as the history keeps them.
"""

from __future__ import annotations

from typing import Any

from server.handles.state import HandleState, StateBackend, StateUnavailable
from server.status.cluster_feed import ClusterFeed
from server.status.history import TaskQuery
from server.status.summary import cap_text, error_summary
from server.status.tasks import iso

__all__ = ["ClusterView", "summed"]


class ClusterView:
    """Running handles of the replicas other than this one, as status API tasks."""

    def __init__(self, backend: StateBackend, separator: str, feed: ClusterFeed | None = None) -> None:
        self.backend = backend
        self.separator = separator
        self.feed = feed  # every replica's events and stats (server.status.cluster_feed)

    @property
    def replica(self) -> str:
        return self.backend.replica

    async def tasks(self, query: TaskQuery, limit: int) -> tuple[list[dict[str, Any]], str | None]:
        """Up to `limit` other replicas' running tasks matching `query`, newest first; or why they are missing."""
        filters = query.filters
        if "instance" in filters or filters.get("status", "running") != "running":
            return [], None  # `instance` names a local process; other replicas' handles here are all running
        try:
            states, _ = await self.backend.running(limit)
        except StateUnavailable as exc:
            return [], str(exc)
        rows = [self._task(s) for s in states if s.owner != self.replica]
        return [row for row in rows if _matches(row, filters)], None

    def _task(self, state: HandleState) -> dict[str, Any]:
        prefix = state.server + self.separator
        return {
            "handle": state.handle,
            "session": state.session,
            "server": state.server,
            "tool": state.tool.removeprefix(prefix),
            "name": state.tool,
            "arguments": None,  # not shared between replicas
            "status": state.status,
            "startedAt": iso(state.started),
            "finishedAt": None,
            "durationMs": None,
            "bytes": state.bytes,
            "lines": state.lines,
            "tokens": state.tokens if state.tokens_exact else None,
            "cut": False,
            "producedBytes": state.bytes,
            "progress": None,  # shared only as text ("progress 3/10 (…)"): see `progressText`
            "progressText": cap_text(state.progress),
            "error": error_summary(state.error),
            "batchId": None,
            "handedOut": True,
            "retrievals": None,
            "live": True,
            "replica": state.owner,
            "owner": None,  # whose call it is stays with the replica that runs it (HandleState does not carry it)
        }


def _matches(row: dict[str, Any], filters: dict[str, str]) -> bool:
    if any(key in filters and row[key] != filters[key] for key in ("server", "tool", "session")):
        return False
    if "search" in filters:  # as the history's LIKE: name or error (arguments are not shared)
        needle = filters["search"].casefold()
        return any(needle in (row[key] or "").casefold() for key in ("name", "error"))
    return True


def summed(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts of several replicas' `/v1/stats` added up (durations are per replica only)."""
    total: dict[str, Any] = {"byStatus": {}, "byServer": {}, "totalTasks": 0, "activeTasks": 0, "outputBytes": 0}
    for one in stats:
        for field in ("byStatus", "byServer"):
            for key, count in (one.get(field) or {}).items():
                total[field][key] = total[field].get(key, 0) + count
        for field in ("totalTasks", "activeTasks", "outputBytes"):
            total[field] += one.get(field) or 0
    total["replicas"] = len(stats)
    return total
