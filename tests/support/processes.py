"""Real processes: claimcheck's config files, the programs in `servers/`, and the one way a test starts a
process and waits for the URL (or any line) it announces."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc

ROOT = Path(__file__).resolve().parents[2]
"""The repository: the programs in `servers/` run as modules of the `tests` package from here."""
PYTHON = sys.executable
PROC = Path(os.environ.get("CLAIMCHECK_TEST_PROC") or "/proc")
"""Where the tests see processes: /proc, or in the macOS simulation (tests/test_macos_simulated.py), where /proc is
hidden from claimcheck, the real one mounted elsewhere for the harness only."""


def write_config(directory: Path, data: Mapping[str, Any]) -> Path:
    """The config file of a real claimcheck process. Unless the test sets `startupWaitSecs`, the first
    listing waits for the servers however slowly a loaded machine starts them: only tests/downstream/test_startup.py
    is about that wait."""
    settings = {"startupWaitSecs": 120, **dict(data.get("settings") or {})}
    path = directory / "claimcheck.json"
    path.write_text(json.dumps({**data, "settings": settings}), encoding="utf-8")
    return path


API_LINE = r"status API at (http://127\.0\.0\.1:\d+/) \S+ dashboard: [^\n]* in (\S+\.json)\)"
"""claimcheck's start-up line for its status API: (its URL, the discovery file that holds its token)."""


def discovered(path: str | bytes) -> dict[str, Any]:
    """The discovery file named on a start-up line (`API_LINE`'s second group): `url`, `token`, `dashboard` (the
    address with the token) and the rest."""
    text = Path(os.fsdecode(path)).read_text(encoding="utf-8")
    info: dict[str, Any] = json.loads(text)
    return info


def demo_server_entry(*extra: str) -> dict[str, Any]:
    """A config entry that runs the bundled demo downstream over stdio."""
    return {"command": PYTHON, "args": ["-m", "server.demo.server", *extra]}


def program(name: str, *args: str) -> list[str]:
    """The command that runs `tests/support/servers/<name>.py`; run it with `cwd=ROOT`, where `tests` imports."""
    return [PYTHON, "-m", f"tests.support.servers.{name}", *args]


def program_entry(name: str, *args: str) -> dict[str, Any]:
    """A config entry that runs `tests/support/servers/<name>.py` over stdio."""
    command, *arguments = program(name, *args)
    return {"command": command, "args": arguments, "cwd": str(ROOT)}


async def announced(stream: anyio.abc.ByteReceiveStream, *patterns: str, said: list[bytes]) -> list[re.Match[bytes]]:
    """Read `stream` (appending to `said`) until each of `patterns` has matched what it wrote; their matches."""
    async for chunk in stream:
        said.append(chunk)
        seen = b"".join(said)
        matches = [re.search(pattern.encode(), seen) for pattern in patterns]
        if all(matches):
            return [match for match in matches if match is not None]
    raise AssertionError(f"exited before it announced {patterns}: {b''.join(said).decode(errors='replace')}")


@dataclass
class Announced:
    """A started process and what it announced."""

    process: anyio.abc.Process
    matches: list[re.Match[bytes]]
    said: list[bytes] = field(default_factory=list)
    """What the announcing stream wrote, read on while the process runs."""
    _heard: anyio.Event = field(default_factory=anyio.Event)

    def hear(self, chunk: bytes) -> None:
        """The announcing stream wrote `chunk`."""
        self.said.append(chunk)
        heard, self._heard = self._heard, anyio.Event()
        heard.set()

    async def until(self, pattern: str) -> re.Match[bytes]:
        """Wait until what the announcing stream wrote matches `pattern`; the match."""
        while (match := re.search(pattern.encode(), b"".join(self.said))) is None:
            await self._heard.wait()
        return match

    @property
    def url(self) -> str:
        """The first group of the first pattern: the URL, when the pattern captures one."""
        return self.matches[0].group(1).decode()


@asynccontextmanager
async def announcing(
    command: Sequence[str],
    *patterns: str,
    stream: Literal["stderr", "stdout"] = "stderr",
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    within: float = 30,
    stdin: int = subprocess.PIPE,
) -> AsyncIterator[Announced]:
    """Start `command` (in `cwd`: the repository, where the programs of `servers/` import), wait until its `stream`
    has announced each of `patterns` (regexes over all it wrote), read its output on while the test runs, and stop it
    afterwards (stdin closed, then SIGTERM, then SIGKILL)."""
    process = await anyio.open_process(
        list(command), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd
    )
    try:
        announcer = process.stderr if stream == "stderr" else process.stdout
        assert announcer is not None
        said: list[bytes] = []
        with anyio.fail_after(within):
            matches = await announced(announcer, *patterns, said=said)
        started = Announced(process, matches, said)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_keep, announcer, started.hear)
            other = process.stdout if stream == "stderr" else process.stderr
            if other is not None:
                tg.start_soon(_keep, other, _ignore)
            yield started
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)


@asynccontextmanager
async def announced_url(
    command: Sequence[str], pattern: str, *, env: Mapping[str, str] | None = None, cwd: Path = ROOT
) -> AsyncIterator[str]:
    """Start `command`, wait for its stderr to announce a URL matching `pattern` (its first group), stop it after."""
    async with announcing(command, pattern, env=env, cwd=cwd) as started:
        yield started.url


def _ignore(chunk: bytes) -> None:
    pass


async def _keep(stream: anyio.abc.ByteReceiveStream, hear: Callable[[bytes], object]) -> None:
    try:
        async for chunk in stream:
            hear(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


async def stop(process: anyio.abc.Process) -> None:
    """Stop `process`: its stdin closed (a clean exit for the programs that wait on it), SIGTERM, then SIGKILL
    after 10 s; its pipes closed."""
    if process.returncode is None:
        if process.stdin is not None:
            await process.stdin.aclose()
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            await pipe.aclose()


def peak(pid: int) -> int:
    """VmHWM (the peak resident memory) of process `pid`, in bytes (Linux)."""
    match = re.search(r"^VmHWM:\s+(\d+) kB$", Path(f"/proc/{pid}/status").read_text(encoding="utf-8"), re.M)
    assert match is not None
    return int(match.group(1)) * 1024
