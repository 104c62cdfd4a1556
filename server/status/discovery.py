"""Discovery files: `<stateDir>/instances/<pid>.json` says where a running instance's status API is, and its token.

The directory is 0700 and each file 0600: the token in it opens the API, so only the user can read it. A file
also names its process's start time (`processStart`, as the run root's marker does), so a file left by an
instance that died is told apart from a live one even when a later process got the same pid. Such files are
ignored and removed, by `instances` (`claimcheck ps`) and by each instance when it writes its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from server.platform import pid_alive, process_start, same_start
from server.status.private import private_dir, write_private

__all__ = ["discovery_file", "instances"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def discovery_file(state: Path, info: dict[str, Any]) -> Iterator[Path]:
    """Write this process's discovery file for the block (after removing stale ones), and remove it after."""
    directory = private_dir(private_dir(state) / "instances")
    instances(state)  # a file of a dead instance is removed, ours (if a dead one had our pid) replaced
    path = directory / f"{os.getpid()}.json"
    write_private(path, json.dumps({**info, "processStart": process_start(os.getpid())}))
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def instances(state: Path) -> list[dict[str, Any]]:
    """Discovery files of live instances, by pid; files left by dead ones are removed."""
    found = []
    for path in sorted((state / "instances").glob("*.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
            pid = int(info["pid"])
            started = str(info.get("processStart") or "")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # being written (never: files are replaced whole), or not ours to judge
        if path.stem != str(pid):
            continue
        if _gone(pid, started):
            logger.debug("removing the discovery file of instance %d, which is gone", pid)
            path.unlink(missing_ok=True)
            continue
        found.append(info)
    return found


def _gone(pid: int, started: str) -> bool:
    """Whether the process that wrote a discovery file has ended: its pid is free, or a later process has it."""
    if not pid_alive(pid):
        return True
    return not same_start(started, process_start(pid))
