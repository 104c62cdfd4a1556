"""`claimcheck ps`: the running claimcheck instances (from their discovery files) and their live calls."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import httpx2

from server.handles.run_root import pid_alive

__all__ = ["instances", "print_ps"]


def instances(state: Path) -> list[dict[str, Any]]:
    """Discovery files of live processes; files left by dead ones are removed."""
    found = []
    for path in sorted((state / "instances").glob("*.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not pid_alive(pid):
            path.unlink(missing_ok=True)
            continue
        found.append(info)
    return found


async def print_ps(state: Path) -> int:
    running = instances(state)
    if not running:
        print(f"no claimcheck instance is running (looked in {state / 'instances'})")
        return 0
    async with httpx2.AsyncClient(timeout=5) as http:
        for info in running:
            url = info["url"]
            try:
                reply = await http.get(f"{url}v1/tasks", params={"status": "running", "limit": 200})
                tasks = reply.json()["tasks"]
            except (httpx2.HTTPError, ValueError, KeyError) as exc:
                print(f"pid {info['pid']}  {url}  (not answering: {exc})")
                continue
            print(f"pid {info['pid']}  {url}  since {info.get('startedAt', '?')}  {len(tasks)} running")
            for task in tasks:
                print(f"  {task['name']}  {task['handle']}  {_age(task['startedAt'])}{_progress(task)}")
    return 0


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
