"""`claimcheck ps`: the running claimcheck instances (from their discovery files) and their live calls.

Instances side by side share one history, so each is asked for its own running calls only (`instance`).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import httpx2

from server.status.discovery import instances

__all__ = ["print_ps"]


async def print_ps(state: Path) -> int:
    running = instances(state)
    if not running:
        print(f"no claimcheck instance is running (looked in {state / 'instances'})")
        return 0
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
            print(f"pid {info['pid']}  {shown}  since {info.get('startedAt', '?')}  {len(tasks)} running{shared}")
            for task in tasks:
                owner = f"  owner {task['owner']}" if task.get("owner") else ""
                print(f"  {task['name']}  {task['handle']}  {_age(task['startedAt'])}{_progress(task)}{owner}")
    return 0


async def _relays(http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> str:
    """ ", shared: N relays" for the user's shared claimcheck, else nothing."""
    try:
        reply = await http.get(f"{url}v1/health", headers=headers)
        relays = reply.json().get("relays")
    except (httpx2.HTTPError, ValueError, AttributeError):
        return ""
    return f"  shared: {relays} relay(s) attached" if isinstance(relays, int) else ""


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
