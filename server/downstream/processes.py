"""How a stdio server's process is started and stopped, and the head start that overlaps its start with ours.

Importing the SDK is most of claimcheck's own start (about 0.4 s); a server behind it takes from tens of
milliseconds (a hand-written one) to a second (`npx`, an SDK server). `claimcheck serve` over stdio therefore
spawns every enabled stdio server of its config first (`HeadStart.spawn`, from `server.launch`, with only the
standard library, anyio and the config imported), then imports the rest. The stdio transport takes a process from
here when one was spawned with exactly its command, arguments, environment and directory (`take`); otherwise it
spawns its own, as it always has. What no transport took by the end is stopped (`HeadStart.close`).

This module imports neither the SDK nor anything that does: that is what lets it run before them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping

import anyio
import anyio.abc

from server.config import PRIMARY_INSTANCE, ServerConfig, for_instance
from server.platform import INHERITED_ENV_VARS, group_options, signal_group

__all__ = ["CONNECT_TIMEOUT_S", "HEAD_START", "HeadStart", "default_environment", "spawn", "stop"]

CONNECT_TIMEOUT_S = 60.0
"""How long a server may take from spawn (or its first HTTP request) to a listed set of tools (npx may download on
first use)."""
EXIT_GRACE_S = (1.0, 0.5)
"""Waits after closing stdin, then after SIGTERM, before SIGKILL. Together under the 2 s that MCP clients give
claimcheck itself after closing its stdin, so no downstream outlives a killed claimcheck."""

_Key = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], str | None]


def default_environment() -> dict[str, str]:
    """The part of claimcheck's environment every stdio server gets (as the SDK's `get_default_environment`)."""
    return {
        key: value
        for key in INHERITED_ENV_VARS
        if (value := os.environ.get(key)) is not None and not value.startswith("()")  # no shell functions
    }


async def spawn(command: str, args: Iterable[str], env: Mapping[str, str], cwd: str | None) -> anyio.abc.Process:
    """Start a stdio server in a process group of its own, with pipes for stdin, stdout and stderr."""
    return await anyio.open_process(
        [command, *args],
        env=default_environment() | dict(env),
        cwd=cwd,
        stderr=subprocess.PIPE,  # passed on to ours, its last lines kept
        **group_options(),
    )


async def stop(process: anyio.abc.Process, stderr_done: anyio.Event | None = None, *, drain_s: float = 0.5) -> None:
    """Close stdin, give the child a grace period, then SIGTERM and SIGKILL its process group; then let its
    stderr be read to the end (briefly, when someone reads it: `stderr_done`)."""
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
    for kill, grace in ((None, EXIT_GRACE_S[0]), (False, EXIT_GRACE_S[1]), (True, 2.0)):
        if kill is not None:
            signal_group(process.pid, kill=kill)
        with anyio.move_on_after(grace):
            await process.wait()
            break
    if stderr_done is not None:
        with anyio.move_on_after(drain_s):
            await stderr_done.wait()
    signal_group(process.pid)  # grandchildren a wrapper such as npx left behind
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()


def _key(command: str, args: Iterable[str], env: Mapping[str, str], cwd: str | None) -> _Key:
    return command, tuple(args), tuple(sorted(env.items())), cwd


class HeadStart:
    """Stdio servers spawned before claimcheck finished starting, waiting for the transport that will talk to them."""

    def __init__(self) -> None:
        self._waiting: dict[_Key, list[anyio.abc.Process]] = {}

    async def spawn(self, servers: Iterable[ServerConfig]) -> int:
        """Spawn each enabled stdio server; one that cannot be spawned is left to its transport, which says why.
        Returns how many were spawned."""
        spawned = 0
        for configured in servers:
            server = for_instance(configured, PRIMARY_INSTANCE)  # as the pool's first process of it
            if server.disabled or server.command is None:
                continue
            try:
                process = await spawn(server.command, server.args, server.env, server.cwd)
            except OSError:
                continue
            self._waiting.setdefault(_key(server.command, server.args, server.env, server.cwd), []).append(process)
            spawned += 1
        return spawned

    def take(
        self, command: str, args: Iterable[str], env: Mapping[str, str], cwd: str | None
    ) -> anyio.abc.Process | None:
        """A process spawned ahead with exactly this command line, environment and directory (one that has exited
        since is taken too: its transport then says how it ended, as for one it spawned itself)."""
        waiting = self._waiting.get(_key(command, args, env, cwd))
        return waiting.pop(0) if waiting else None

    def __len__(self) -> int:
        return sum(len(processes) for processes in self._waiting.values())

    async def close(self) -> None:
        """Stop every process no transport took."""
        waiting = [process for processes in self._waiting.values() for process in processes]
        self._waiting.clear()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for process in waiting:
                    tg.start_soon(stop, process)


HEAD_START = HeadStart()
"""This process's head start: filled by `server.launch` for `serve` over stdio (one client, so one process per
server), empty otherwise. Process-wide on purpose: it is filled before the SDK is imported and any proxy exists."""
