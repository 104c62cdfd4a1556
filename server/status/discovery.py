"""Discovery files: `<stateDir>/instances/<pid>.json` says where a running instance's status API is, and its token.

The directory is 0700 and each file 0600: the token in it opens the API, so only the user can read it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from server.handles.run_root import pid_alive
from server.status.private import private_dir, write_private

__all__ = ["discovery_file", "instances"]


@contextlib.contextmanager
def discovery_file(state: Path, info: dict[str, Any]) -> Iterator[Path]:
    """Write this process's discovery file for the block, and remove it after."""
    path = private_dir(private_dir(state) / "instances") / f"{os.getpid()}.json"
    write_private(path, json.dumps(info))
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


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
