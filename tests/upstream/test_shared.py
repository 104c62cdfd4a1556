"""`claimcheck serve --shared`: one-shot clients through real relays to one real shared claimcheck.

Each test gets its own runtime directory (so its own shared claimcheck) and state directory, and stops the shared
claimcheck it made at the end.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from server.platform import boot_identity
from server.upstream.shared_relay import shared_paths
from tests.support.processes import PROC, PYTHON, demo_server_entry, program_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

HANDLE = re.compile(r"session-[0-9a-f]{32}/[0-9a-f]{32}")


class Shared:
    """A config, its runtime directory, and relays to its shared claimcheck."""

    def __init__(
        self,
        tmp_path: Path,
        runtime: Path,
        settings: dict[str, Any] | None = None,
        servers: dict[str, Any] | None = None,
    ) -> None:
        state = tmp_path / "state"
        base = {"asyncTimeoutSecs": 60, "stateDir": str(state), **(settings or {})}
        servers = servers or {"demo": demo_server_entry()}
        self.config = write_config(tmp_path, {"mcpServers": servers, "settings": base})
        self.runtime = runtime
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
        self.errors = tmp_path / "relay-stderr.txt"

    def params(self) -> StdioServerParameters:
        args = ["-m", "server", "serve", "--shared", "--config", str(self.config)]
        return StdioServerParameters(command=PYTHON, args=args, env=self.env)

    @asynccontextmanager
    async def relay(self, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
        with self.errors.open("a") as errlog:
            async with Client(stdio_client(self.params(), errlog=errlog), mode=mode, **options) as client:
                yield client

    def directory(self) -> Path:
        return self.runtime / f"claimcheck-shared-{os.getuid()}"

    def pids(self) -> list[int]:
        """The shared claimcheck processes serving a socket in this runtime directory."""
        found = []
        for entry in PROC.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--shared-socket" in command and any(str(self.directory()).encode() in part for part in command):
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        for pid in self.pids():
            os.kill(pid, signal.SIGTERM)


@pytest.fixture
def shared(tmp_path: Path, runtime: Path) -> Iterator[Shared]:
    made = Shared(tmp_path, runtime)
    yield made
    made.stop()


async def gone(pid: int) -> None:
    """Wait (under the caller's fail_after) until process `pid` has ended (it is not our child to wait for)."""

    def poll() -> None:
        while (PROC / str(pid)).exists() and b"zombie" not in _status(pid):
            time.sleep(0.1)

    await anyio.to_thread.run_sync(poll, abandon_on_cancel=True)


async def appeared(path: Path) -> None:
    """Wait (under the caller's fail_after) until `path` exists."""

    def poll() -> None:
        while not path.exists():
            time.sleep(0.05)

    await anyio.to_thread.run_sync(poll, abandon_on_cancel=True)


def _status(pid: int) -> bytes:
    try:
        return (PROC / str(pid) / "status").read_bytes().lower()
    except OSError:
        return b""


async def test_a_handle_from_one_one_shot_session_is_read_and_waited_for_in_the_next(shared: Shared) -> None:
    with anyio.fail_after(240):
        async with shared.relay() as first:
            slow = text_of(await first.call_tool("demo__slow", {"seconds": 7, "background": True}))
            big = text_of(await first.call_tool("demo__big", {"kb": 2048}))
        slow_handle, big_handle = HANDLE.search(slow), HANDLE.search(big)
        assert slow_handle and big_handle, (slow, big)
        async with shared.relay("auto") as second:
            listed = text_of(await second.call_tool("list_tool_outputs", {}))
            sliced = await second.call_tool(
                "tool_output", {"handle": big_handle.group(0), "mode": "slice", "slice": {"start": 0, "length": 64}}
            )
            grep = await second.call_tool("Grep", {"file": big_handle.group(0), "regex": "00012345 INFO"})
            waited = text_of(await second.call_tool("wait_for_tool_output", {"handles": [slow_handle.group(0)]}))
    assert "Tool output is too large" in big
    assert "Outputs of your other sessions" in listed and f'(another session) "{big_handle.group(0)}"' in listed
    assert text_of(sliced).count("00000000 INFO demo log line") == 1 and not sliced.is_error
    assert "00012345 INFO demo log line" in text_of(grep) and not grep.is_error
    assert "slept 7 s" in waited
    assert len(shared.pids()) == 1


async def test_progress_and_both_protocol_eras_pass_through_the_relay(shared: Shared) -> None:
    progress: dict[str, list[float]] = {"legacy": [], "auto": []}
    with anyio.fail_after(240):
        for mode, seen in progress.items():

            async def note(progress: float, total: float | None, message: str | None, seen: list[float] = seen) -> None:
                seen.append(progress)

            async with shared.relay(mode) as client:
                done = await client.call_tool("demo__slow", {"seconds": 1}, progress_callback=note)
                assert text_of(done) == "slept 1 s"
    assert progress["legacy"] and progress["auto"], progress


async def test_eight_relays_at_once_start_one_shared_claimcheck_and_each_is_served(shared: Shared) -> None:
    answers: dict[int, str] = {}

    shared.env.update(CLAIMCHECK_API_ENABLED="true", CLAIMCHECK_API_PORT="0")  # for `claimcheck ps`

    async def one(index: int) -> None:
        async with shared.relay("legacy" if index % 2 else "auto") as client:
            answers[index] = text_of(await client.call_tool("demo__echo", {"text": f"relay {index}"}))

    with anyio.fail_after(240):
        async with anyio.create_task_group() as tg:
            for index in range(8):
                tg.start_soon(one, index)
        async with shared.relay():
            ps = [PYTHON, "-m", "server", "ps", "--config", str(shared.config)]
            listed = await anyio.run_process(ps, env=shared.env)
    assert answers == {index: f"relay {index}" for index in range(8)}
    assert len(shared.pids()) == 1
    shown = listed.stdout.decode()
    instances = [line for line in shown.splitlines() if line.startswith("pid ")]
    assert len(instances) == 1 and "shared: 1 relay attached" in instances[0], shown


async def test_the_shared_claimcheck_exits_after_its_idle_time(tmp_path: Path, runtime: Path) -> None:
    shared = Shared(tmp_path, runtime, {"sharedIdleSecs": 1})
    try:
        with anyio.fail_after(240):
            async with shared.relay() as client:
                await client.call_tool("demo__echo", {"text": "once"})
                (pid,) = shared.pids()
            await gone(pid)
        assert list(shared.directory().glob("*.sock")) == []
        assert list(shared.directory().glob("*.pid")) == []  # a clean end: the next relay warns of nothing
    finally:
        shared.stop()


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "terminated"])
async def test_after_the_shared_claimcheck_was_killed_the_next_relay_starts_one_and_says_handles_are_gone(
    shared: Shared, stop: signal.Signals
) -> None:
    with anyio.fail_after(240):
        async with shared.relay() as first:
            big = text_of(await first.call_tool("demo__big", {"kb": 2048}))
            (pid,) = shared.pids()
        os.kill(pid, stop)
        await gone(pid)
        handle = HANDLE.search(big)
        assert handle, big
        async with shared.relay() as second:
            lost = await second.call_tool("tool_output", {"handle": handle.group(0), "mode": "truncate"})
            echoed = text_of(await second.call_tool("demo__echo", {"text": "served again"}))
    assert echoed == "served again"
    assert shared.pids() != [pid] and len(shared.pids()) == 1
    told = shared.errors.read_text()
    assert f"the shared claimcheck for this config (pid {pid}) was stopped before its idle time" in told
    assert "Handles made before are gone" in told
    assert lost.is_error and "handles made before then are gone" in text_of(lost)


def test_relays_whose_root_variable_differs_reach_different_shared_claimchecks(tmp_path: Path, runtime: Path) -> None:
    shared = Shared(tmp_path, runtime, {"root": "$SCRATCH/outputs"})
    args = ["serve", "--shared", "--config", str(shared.config)]
    keys = {shared_paths(args, {**shared.env, "SCRATCH": scratch}).key for scratch in ("/a", "/b", "/a")}
    assert len(keys) == 2


STALE_PID_FILES = {
    "a live process with another start time": lambda sleeper: f"{sleeper} 1 {boot_identity() or '-'}\n",
    "the test's own pid, bare": lambda sleeper: f"{os.getpid()}\n",
    "pid -1, which signals every process": lambda sleeper: "-1 1 x\n",
    "pid 0, the relay's own process group": lambda sleeper: "0\n",
}


@pytest.mark.parametrize("stale", STALE_PID_FILES)
async def test_a_pid_file_naming_a_live_process_that_is_not_the_shared_claimcheck_holds_no_relay_up(
    shared: Shared, stale: str
) -> None:
    paths = shared_paths(["serve", "--shared", "--config", str(shared.config)], shared.env)
    sleeper = await anyio.open_process(["sleep", "600"])
    try:
        paths.pid.write_text(STALE_PID_FILES[stale](sleeper.pid), encoding="utf-8")
        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:

                async def use() -> None:
                    async with shared.relay() as client:
                        echoed.append(text_of(await client.call_tool("demo__echo", {"text": "served"})))

                echoed: list[str] = []
                tg.start_soon(use)
                with anyio.fail_after(20):  # the relay used to wait 30 s for the named process to end
                    await appeared(paths.log)  # it starts the shared claimcheck (whose log this is)
    finally:
        sleeper.kill()
        await sleeper.aclose()
    assert echoed == ["served"]
    assert len(shared.pids()) == 1
    if stale == "a live process with another start time":
        told = shared.errors.read_text()
        assert f"the shared claimcheck for this config (pid {sleeper.pid}) was stopped before its idle time" in told


async def test_the_socket_is_private_to_its_user(shared: Shared) -> None:
    with anyio.fail_after(240):
        async with shared.relay() as client:
            await client.call_tool("demo__echo", {"text": "hello"})
            directory = shared.directory()
            (socket_path,) = directory.glob("*.sock")
            modes = (stat.S_IMODE(directory.stat().st_mode), stat.S_IMODE(socket_path.stat().st_mode))
            other = _connect_as_another_user(socket_path) if os.getuid() == 0 else None
    assert modes == (0o700, 0o600)
    if other is not None:  # as root the test can be a second user too (nobody)
        assert "PermissionError" in other


def _connect_as_another_user(path: Path) -> str:
    probe = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); print('connected')"
    done = subprocess.run(
        ["/usr/bin/python3", "-c", probe], user=65534, group=65534, capture_output=True, text=True, timeout=60, cwd="/"
    )
    return done.stdout + done.stderr


async def test_a_directory_that_is_not_private_is_refused(tmp_path: Path, runtime: Path) -> None:
    shared = Shared(tmp_path, runtime)
    directory = shared.directory()
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [PYTHON, "-m", "server", "serve", "--shared", "--config", str(shared.config)], env=shared.env, check=False
        )
    assert done.returncode == 1
    assert f"refusing {directory} for the shared claimcheck" in done.stderr.decode()
    assert shared.pids() == []


async def test_a_question_of_a_handed_off_call_reaches_the_client_through_the_relay(
    tmp_path: Path, runtime: Path
) -> None:
    asking = program_entry("asking_server")
    shared = Shared(tmp_path, runtime, {"asyncTimeoutSecs": 1}, {"ask": asking})
    seen: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    try:
        with anyio.fail_after(240):
            async with shared.relay(elicitation_callback=elicit) as client:
                started = text_of(await client.call_tool("ask__confirm", {"what": "it", "background": True}))
                handle = HANDLE.search(started)
                assert handle, started
                done = text_of(await client.call_tool("wait_for_tool_output", {"handles": [handle.group(0)]}))
    finally:
        shared.stop()
    assert seen == ["Really it?"]
    assert "confirmed it: True" in done
