"""How a stdio server's process is started and stopped, and the head start that overlaps its start with ours.

Importing the SDK is most of claimcheck's own start (about 0.4 s); a server behind it takes from tens of
milliseconds (a hand-written one) to a second (`npx`, an SDK server). `claimcheck serve` over stdio therefore
spawns every enabled stdio server of its config first (`HeadStart.spawn`, from `server.launch`, with only the
standard library, anyio and the config imported), then imports the rest. The stdio transport takes a process from
here when one was spawned with exactly its command, arguments, environment and directory (`take`); otherwise it
spawns its own, as it always has. What no transport took by the end is stopped (`HeadStart.close`).

A server's stdout is a pipe claimcheck makes itself (POSIX), read by `PipeReader`; stdin and stderr are anyio's.

This module imports neither the SDK nor anything that does: that is what lets it run before them.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.lowlevel

from server.config import ServerConfig
from server.config_vars import PRIMARY_INSTANCE, for_instance, shell_only
from server.errors import ProcessNotStarted
from server.platform import INHERITED_ENV_VARS, POSIX, group_options, signal_group, widen_pipe

__all__ = [
    "COMES_WITH",
    "CONNECT_TIMEOUT_S",
    "HEAD_START",
    "HeadStart",
    "PipeReader",
    "Spawned",
    "default_environment",
    "not_started",
    "spawn",
    "stop",
]

CONNECT_TIMEOUT_S = 60.0
"""How long a server may take from spawn (or its first HTTP request) to a listed set of tools (npx may download on
first use)."""
EXIT_GRACE_S = (1.0, 0.5)
"""Waits after closing stdin, then after SIGTERM, before SIGKILL. Together under the 2 s that MCP clients give
claimcheck itself after closing its stdin, so no downstream outlives a killed claimcheck."""

PIPE_BYTES = 1 << 20
"""A server's stdout pipe is widened to this (Linux; the default is 64 KiB): a server that writes a large result
fast then wakes claimcheck once a megabyte, not sixteen times."""

_Key = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], str | None]


class PipeReader(anyio.abc.ByteReceiveStream):
    """The read end of a server's stdout pipe, which claimcheck made itself: read with `os.read` as far as it goes,
    waiting only when it is empty. (anyio's stream over asyncio's pipe transport reads 256 KiB at a time into a
    buffer, copies every byte twice more on its way out, and pauses and resumes the transport around each read:
    ~0.2 CPU s per GiB more, measured.) On asyncio the pipe stays watched between reads (`loop.add_reader`, once),
    so an answer a line long costs no system call to watch it; it is unwatched while data waits for nobody (the
    loop would be called for it again and again), until someone waits again; after a read that took less than it
    could, the next waits first (one system call a line, not a read that finds nothing and then another)."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._closed = False
        self._watched_by: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._emptied = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        waited = self._emptied and not self._closed  # the last read took less than it could: most likely empty
        if waited:
            await self._readable()  # where a cancelled reader stops
        else:
            await anyio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await self._readable()
                waited = True
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            self._emptied = len(data) < max_bytes
            if not waited:  # a pipe that always has more must not starve the loop
                await anyio.lowlevel.cancel_shielded_checkpoint()
            return data

    async def _readable(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another backend than asyncio
            await anyio.wait_readable(self._fd)
            return
        if self._watched_by is None:
            loop.add_reader(self._fd, self._ready)
            self._watched_by = loop
        self._waiter = loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _ready(self) -> None:
        if self._waiter is None:  # nobody waits: unwatched until someone does
            self._unwatch()
        elif not self._waiter.done():
            self._waiter.set_result(None)

    def _unwatch(self) -> None:
        loop, self._watched_by = self._watched_by, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watched_by is None:
            anyio.notify_closing(self._fd)  # a task waiting in anyio.wait_readable is woken with ClosedResourceError
        self._unwatch()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(anyio.ClosedResourceError())
        os.close(self._fd)


@dataclass(frozen=True, slots=True)
class Spawned:
    """A server's process and its stdout (a `PipeReader`; anyio's stream where there is no `os.pipe` to wait on)."""

    process: anyio.abc.Process
    stdout: anyio.abc.ByteReceiveStream


def default_environment() -> dict[str, str]:
    """The part of claimcheck's environment every stdio server gets (as the SDK's `get_default_environment`)."""
    return {
        key: value
        for key in INHERITED_ENV_VARS
        if (value := os.environ.get(key)) is not None and not value.startswith("()")  # no shell functions
    }


async def spawn(command: str, args: Iterable[str], env: Mapping[str, str], cwd: str | None) -> Spawned:
    """Start a stdio server in a process group of its own, with pipes for stdin, stdout and stderr."""
    read_end, write_end = os.pipe() if POSIX else (-1, -1)
    try:
        process = await anyio.open_process(
            [command, *args],
            env=default_environment() | dict(env),
            cwd=cwd,
            stdout=write_end if POSIX else subprocess.PIPE,
            stderr=subprocess.PIPE,  # passed on to ours, its last lines kept
            **group_options(),
        )
    except BaseException as exc:
        if POSIX:
            os.close(read_end)
        if isinstance(exc, OSError) and (why := not_started(command, cwd, exc)) is not None:
            raise ProcessNotStarted(why) from exc
        raise
    finally:
        if POSIX:
            os.close(write_end)  # the child has its own copy: ours would keep the pipe from ever ending
    if not POSIX:
        assert process.stdout is not None
        return Spawned(process, process.stdout)
    widen_pipe(read_end, PIPE_BYTES)
    return Spawned(process, PipeReader(read_end))


COMES_WITH = {"npx": "Node.js", "npm": "Node.js", "node": "Node.js", "uvx": "uv", "uv": "uv", "docker": "Docker"}
"""The programs most configs start servers with, and what installs each."""


def not_started(command: str, cwd: str | None, exc: OSError) -> str | None:
    """Why `command` could not be started, in one line with what to do (None for an error with no such line)."""
    if cwd is not None and not os.path.isdir(cwd):
        return f'its "cwd" {cwd} is no directory here; create it, or correct "cwd"'
    if isinstance(exc, FileNotFoundError):
        if (shell := shell_only(command)) is not None:
            return f"command not found: {command}; {shell}"
        if os.sep in command or (os.altsep is not None and os.altsep in command):
            return f"command not found: {command}"
        installs = f" ({command} comes with {COMES_WITH[command]})" if command in COMES_WITH else ""
        finder = f"command -v {command}" if POSIX else f"where {command}"
        return (
            f"command not found: {command}, on the PATH it was started with; give its full path, as "
            f"`{finder}` prints it in your shell{installs}"
        )
    if isinstance(exc, PermissionError):
        return (
            f"command not runnable: {command} (permission denied); make it executable, or run it with its interpreter"
        )
    return None


async def stop(spawned: Spawned, stderr_done: anyio.Event | None = None, *, drain_s: float = 0.5) -> None:
    """Close stdin, give the child a grace period, then SIGTERM and SIGKILL its process group; then let its
    stderr be read to the end (briefly, when someone reads it: `stderr_done`)."""
    process = spawned.process
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
    for stream in (spawned.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()


def _key(command: str, args: Iterable[str], env: Mapping[str, str], cwd: str | None) -> _Key:
    return command, tuple(args), tuple(sorted(env.items())), cwd


class HeadStart:
    """Stdio servers spawned before claimcheck finished starting, waiting for the transport that will talk to them."""

    def __init__(self) -> None:
        self._waiting: dict[_Key, list[Spawned]] = {}

    async def spawn(self, servers: Iterable[ServerConfig]) -> int:
        """Spawn each enabled stdio server; one that cannot be spawned is left to its transport, which says why.
        Returns how many were spawned."""
        spawned = 0
        for configured in servers:
            server = for_instance(configured, PRIMARY_INSTANCE)  # as the pool's first process of it
            if server.disabled or server.command is None:
                continue
            try:
                spawned_one = await spawn(server.command, server.args, server.env, server.cwd)
            except OSError:
                continue
            self._waiting.setdefault(_key(server.command, server.args, server.env, server.cwd), []).append(spawned_one)
            spawned += 1
        return spawned

    def take(self, command: str, args: Iterable[str], env: Mapping[str, str], cwd: str | None) -> Spawned | None:
        """A process spawned ahead with exactly this command line, environment and directory (one that has exited
        since is taken too: its transport then says how it ended, as for one it spawned itself)."""
        waiting = self._waiting.get(_key(command, args, env, cwd))
        return waiting.pop(0) if waiting else None

    def __len__(self) -> int:
        return sum(len(each) for each in self._waiting.values())

    async def close(self) -> None:
        """Stop every process no transport took."""
        waiting = [spawned for each in self._waiting.values() for spawned in each]
        self._waiting.clear()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for spawned in waiting:
                    tg.start_soon(stop, spawned)


HEAD_START = HeadStart()
"""This process's head start: filled by `server.launch` for `serve` over stdio (one client, so one process per
server), empty otherwise. Process-wide on purpose: it is filled before the SDK is imported and any proxy exists."""
