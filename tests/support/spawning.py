"""The guard that keeps the fast loop in process: a test not marked `subprocess` that starts a program fails,
naming the program and the marker, so `pytest -m "not subprocess"` never starts one.

The one exception is Grep's own worker (`fs_sandbox/_worker.py`): the sandbox under test runs each search in a
worker process it starts itself (a few milliseconds, stdlib and RE2 only), as a thread pool runs threads."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fs_sandbox

GREP_WORKER = str(Path(fs_sandbox.__file__).resolve().parent / "_worker.py")


class SpawnRefused(AssertionError):
    """A test not marked `subprocess` started a program."""


class SpawnGuard:
    """Refuses `subprocess.Popen` (which asyncio's, anyio's and the SDK's process starts all go through) while
    `refusing`; installed once for the whole run."""

    def __init__(self) -> None:
        self.refusing = False
        self._original: Any = None

    def install(self) -> None:
        original = subprocess.Popen._execute_child  # type: ignore[attr-defined]  # the one door of every Popen
        guard = self

        def execute_child(popen: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> Any:
            if guard.refusing and not is_grep_worker(args):
                raise SpawnRefused(
                    f"this test starts a program ({_shown(args)}) but is not marked `subprocess`: mark it "
                    "(pytest.mark.subprocess, or in the module's pytestmark), or keep it in process"
                )
            return original(popen, args, *rest, **options)

        self._original = original
        subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]

    def uninstall(self) -> None:
        if self._original is not None:
            subprocess.Popen._execute_child = self._original  # type: ignore[attr-defined]
            self._original = None

    @contextmanager
    def refused(self, refuse: bool) -> Iterator[None]:
        """Spawning refused (or allowed) inside the block."""
        before, self.refusing = self.refusing, refuse
        try:
            yield
        finally:
            self.refusing = before


def is_grep_worker(args: Any) -> bool:
    return isinstance(args, Sequence) and not isinstance(args, str | bytes) and GREP_WORKER in map(str, args)


def _shown(args: Any) -> str:
    shown = " ".join(map(str, args)) if isinstance(args, Sequence) and not isinstance(args, str) else str(args)
    return shown if len(shown) <= 160 else shown[:160] + "…"
