"""OS packages some tests need (Debian's Chromium, redis-server, haproxy): installed only by the `.ci/` scripts.

In CI (`CI` set) a missing package is installed by its script and, if still missing, fails the test; locally
the test is skipped with the reason and the script to run. No test runs apt or pip itself. The suite runs in
several pytest workers at once, so one script runs at a time (apt takes a lock of its own and fails the second).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["in_ci", "require"]

ROOT = Path(__file__).resolve().parents[2]
_LOCK = ROOT / ".cache" / "os-packages.lock"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def require(script: str, missing: Callable[[], list[str]]) -> None:
    """Skip (locally) or fail (in CI, after running `.ci/<script>`) unless `missing()` names nothing."""
    if not missing():
        return
    if in_ci():
        _install(script, missing)
    gone = missing()
    if not gone:
        return
    reason = f"{' and '.join(gone)} missing; run .ci/{script}"
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def commands(*names: str) -> Callable[[], list[str]]:
    """A `missing` for commands that must be on PATH."""
    return lambda: [name for name in names if shutil.which(name) is None]


def _install(script: str, missing: Callable[[], list[str]]) -> None:
    """Run `.ci/<script>` unless another worker installed what is missing while this one waited for the lock."""
    _LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(_LOCK, "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not missing():
            return
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        subprocess.run(
            ["bash", str(ROOT / ".ci" / script)], check=False, env=env, stdin=subprocess.DEVNULL, timeout=1200
        )
