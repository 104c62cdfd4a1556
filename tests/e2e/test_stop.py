"""`claimcheck stop` ends this user's instances with SIGTERM, waits until they have exited and says which: the
shared claimcheck by default, named pids, or --all. Each test has its own runtime directory (where shared
claimcheck processes are found) and state directory, so it sees only the instances it started."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest
from mcp import Client, StdioServerParameters

from tests.support.processes import PYTHON, demo_server_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

API_LINE = b"claimcheck: status API at "


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An environment whose shared claimcheck lives in a runtime directory of this test's (short: a socket's path
    must fit 104 bytes)."""
    runtime = tempfile.mkdtemp(prefix="cc-stop-", dir="/tmp")
    yield {
        **os.environ,
        "XDG_RUNTIME_DIR": runtime,
        "CLAIMCHECK_API_ENABLED": "true",
        "CLAIMCHECK_API_PORT": "0",
    }
    shutil.rmtree(runtime, ignore_errors=True)


def config_in(tmp_path: Path) -> Path:
    settings = {"stateDir": str(tmp_path / "state")}
    return write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})


async def stop(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [PYTHON, "-m", "server", "stop", "--config", str(config), *args]
    return await anyio.run_process(command, env=env, check=False)


@asynccontextmanager
async def http_instance(config: Path, env: dict[str, str]) -> AsyncIterator[anyio.abc.Process]:
    """`claimcheck serve --transport http` with its status API up (so its discovery file is written)."""
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    async with await anyio.open_process(command, env=env, stdin=subprocess.DEVNULL) as process:
        assert process.stderr is not None
        seen = b""
        async for chunk in process.stderr:
            seen += chunk
            if API_LINE in seen:
                break
        try:
            yield process
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_stop_all_stops_an_instance_found_by_its_discovery_file_and_waits_for_its_exit(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = config_in(tmp_path)
    with anyio.fail_after(90):
        async with http_instance(config, env) as process:
            shared_only = await stop(config, env)
            assert process.returncode is None  # without --all, only shared ones: this one runs on
            done = await stop(config, env, "--all")
            await process.wait()
    assert shared_only.returncode == 0
    assert shared_only.stdout.decode() == "nothing to stop: no shared claimcheck of this user runs\n"
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.decode().splitlines()
    assert line.startswith(f"stopped claimcheck (pid {process.pid}, status API http://127.0.0.1:")
    assert not list((tmp_path / "state" / "instances").glob("*.json"))  # it shut down cleanly


async def test_stop_a_pid_that_is_no_claimcheck_instance_stops_nothing_and_exits_2(
    tmp_path: Path, env: dict[str, str]
) -> None:
    config = config_in(tmp_path)
    with anyio.fail_after(90):
        async with http_instance(config, env) as process:
            refused = await stop(config, env, str(os.getpid()))  # this test's own process: not an instance
            assert process.returncode is None
            named = await stop(config, env, str(process.pid))
            await process.wait()
    assert refused.returncode == 2 and refused.stdout == b""
    assert refused.stderr.decode().splitlines() == [
        f"claimcheck: no claimcheck instance of this user has pid {os.getpid()} (`claimcheck ps` lists them); "
        "nothing was stopped"
    ]
    assert named.returncode == 0 and named.stdout.decode().startswith(f"stopped claimcheck (pid {process.pid}, ")


async def test_stop_stops_the_shared_claimcheck_that_relays_started(tmp_path: Path, env: dict[str, str]) -> None:
    config = config_in(tmp_path)
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "server", "serve", "--shared", "--config", str(config)], env=env
    )
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            echoed = await client.call_tool("demo__echo", {"text": "through the shared claimcheck"})
            done = await stop(config, env)
    assert text_of(echoed) == "through the shared claimcheck"
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.decode().splitlines()
    assert line.startswith("stopped the shared claimcheck (pid ")
    again = await stop(config, env)
    assert again.stdout.decode() == "nothing to stop: no shared claimcheck of this user runs\n"
