"""`claimcheck ps`: the running claimcheck instances (from their discovery files) and their live calls; with
replicas, the calls the other replicas run too (through the shared state), each marked with its replica.

Instances side by side share one history, so each is asked for its own running calls only (`instance`).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import httpx2

from extraction.wording import plural
from server.status.discovery import instances

__all__ = ["print_ps"]


async def print_ps(state: Path) -> int:
    running = instances(state)
    if not running:
        print(f"no claimcheck instance is running (looked in {state / 'instances'})")
        return 0
    shown_handles: set[str] = set()  # replicas each list the others' calls: each is printed once
    async with httpx2.AsyncClient(timeout=5) as http:
        for info in running:
            url = info["url"]
            shown = info.get("dashboard", url)  # the address that opens the dashboard, token included
            headers = {"Authorization": f"Bearer {info['token']}"} if info.get("token") else {}
            try:
                params = {"status": "running", "instance": info["pid"], "limit": 200}  # the history is shared
                reply = await http.get(f"{url}v1/tasks", params=params, headers=headers)
                reply.raise_for_status()
                tasks = reply.json()["tasks"]
            except (httpx2.HTTPError, ValueError, KeyError) as exc:
                print(f"pid {info['pid']}  {shown}  (not answering: {exc})")
                continue
            shared = await _relays(http, url, headers)
            replica, others = await _other_replicas(http, url, headers)
            mark = f"  replica {replica}" if replica else ""
            print(f"pid {info['pid']}  {shown}{mark}  since {info.get('startedAt', '?')}  {len(tasks)} running{shared}")
            for task in [*tasks, *others]:
                if task["handle"] in shown_handles:
                    continue
                shown_handles.add(task["handle"])
                owner = f"  owner {task['owner']}" if task.get("owner") else ""
                where = f"  on replica {task['replica']}" if task.get("replica") else ""
                line = f"  {task['name']}  {task['handle']}  {_age(task['startedAt'])}{_progress(task)}{owner}{where}"
                print(line)
    return 0


async def _other_replicas(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str]
) -> tuple[str | None, list[dict[str, Any]]]:
    """With replicas: this one's id, and the calls the other replicas run (through the shared state)."""
    try:
        reply = await http.get(f"{url}v1/tasks", params={"status": "running", "limit": 200}, headers=headers)
        body = reply.json()
        replica = body.get("replica")
        if not isinstance(replica, str):
            return None, []
        return replica, [task for task in body["tasks"] if task.get("replica") not in (None, replica)]
    except (httpx2.HTTPError, ValueError, KeyError, AttributeError, TypeError):
        return None, []


async def _relays(http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> str:
    """ ", shared: N relays" for the user's shared claimcheck, else nothing."""
    try:
        reply = await http.get(f"{url}v1/health", headers=headers)
        relays = reply.json().get("relays")
    except (httpx2.HTTPError, ValueError, AttributeError):
        return ""
    return f"  shared: {plural(relays, 'relay')} attached" if isinstance(relays, int) else ""


def _age(started: str) -> str:
    try:
        begun = dt.datetime.fromisoformat(started.replace("Z", "+00:00"))
    except ValueError:
        return "running"
    return f"running {(dt.datetime.now(dt.UTC) - begun).total_seconds():.0f}s"


def _progress(task: dict[str, Any]) -> str:
    progress = task.get("progress")
    if not progress:
        return ""
    total = f"/{progress['total']:g}" if progress.get("total") else ""
    message = f" ({progress['message']})" if progress.get("message") else ""
    return f"  progress {progress['progress']:g}{total}{message}"
