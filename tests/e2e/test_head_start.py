"""`claimcheck serve` over stdio spawns its stdio servers before it imports the SDK (the head start), talks to exactly
those processes, and leaves none behind when it cannot serve."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.support.processes import PYTHON, program_entry, write_config
from tests.support.proxies import text_of

REPO_ROOT = Path(__file__).resolve().parents[2]
linux_proc = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps (Linux)")


def probe_entry(log: Path, **extra: object) -> dict[str, object]:
    return {**program_entry("head_start_probe", str(log)), **extra}


def starts(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def logs_in(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("starts-*"))


def serve_params(config: Path, *flags: str) -> StdioServerParameters:
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "false"}
    return StdioServerParameters(
        command=PYTHON, args=["-m", "server", "serve", "--config", str(config), *flags], env=env, cwd=REPO_ROOT
    )


@pytest.mark.subprocess
def test_the_modules_the_head_start_runs_import_no_sdk() -> None:
    code = (
        "import sys, server.launch, server.cli_args, server.config, server.downstream.processes\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'extraction', 'fs_sandbox'}))"
    )
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.subprocess
@pytest.mark.anyio
@linux_proc
async def test_serve_spawns_each_stdio_server_once_before_importing_the_sdk_and_talks_to_that_process(
    tmp_path: Path,
) -> None:
    log, off = tmp_path / "starts.jsonl", tmp_path / "off.jsonl"
    config = write_config(tmp_path, {"mcpServers": {"probe": probe_entry(log), "off": probe_entry(off, disabled=True)}})
    with anyio.fail_after(120):
        async with Client(serve_params(config), mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            answered = text_of(await client.call_tool("probe__pid", {}))
    assert "probe__pid" in names
    [start] = starts(log)  # spawned once: the transport took the process spawned ahead
    assert str(start["pid"]) == answered
    assert start["parent_had"] == []  # neither the SDK nor claimcheck's own modules were loaded yet
    assert starts(off) == []  # a disabled server is not spawned ahead either


@pytest.mark.subprocess
@pytest.mark.anyio
async def test_a_server_named_per_instance_is_spawned_ahead_as_its_first_instance_and_taken(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"mcpServers": {"probe": probe_entry(tmp_path / "starts-${CLAIMCHECK_INSTANCE}.jsonl")}}
    )
    with anyio.fail_after(120):
        async with Client(serve_params(config), mode="legacy") as client:
            answered = text_of(await client.call_tool("probe__pid", {}))
    [start] = starts(tmp_path / "starts-shared.jsonl")  # the placeholder filled as for the pool's first process
    assert str(start["pid"]) == answered
    assert logs_in(tmp_path) == ["starts-shared.jsonl"]


@pytest.mark.subprocess
@linux_proc
def test_without_a_head_start_the_probe_sees_the_sdk_loaded_so_the_check_above_can_fail(tmp_path: Path) -> None:
    log = tmp_path / "starts.jsonl"
    config = write_config(tmp_path, {"mcpServers": {"probe": probe_entry(log)}})
    done = subprocess.run(
        [PYTHON, "-m", "server", "tools", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    [start] = starts(log)
    assert start["parent_had"] == ["re2", "sdk"]


@pytest.mark.subprocess
def test_a_serve_that_cannot_start_stops_the_servers_it_spawned_ahead(tmp_path: Path) -> None:
    log = tmp_path / "starts.jsonl"
    config = write_config(tmp_path, {"mcpServers": {"probe": probe_entry(log)}})
    env = {key: value for key, value in os.environ.items() if key != "CLAIMCHECK_NO_SUCH_TOKEN"}
    done = subprocess.run(
        [PYTHON, "-m", "server", "serve", "--config", str(config), "--auth-token-env", "CLAIMCHECK_NO_SUCH_TOKEN"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2
    assert "--auth-token-env names CLAIMCHECK_NO_SUCH_TOKEN, which is not set" in done.stderr
    [start] = starts(log)  # it was spawned ahead …
    with pytest.raises(ProcessLookupError):  # … and is gone (stopped and reaped), not orphaned
        os.kill(int(str(start["pid"])), 0)


@pytest.mark.subprocess
def test_a_server_that_cannot_be_spawned_ahead_is_reported_by_its_transport_as_before(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-server"
    config = write_config(tmp_path, {"mcpServers": {"gone": {"command": str(missing)}}})
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    done = subprocess.run(
        [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api"],
        input="".join(json.dumps(request) + "\n" for request in requests),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert f"server 'gone' could not start: command not found: {missing}" in done.stderr
    assert '"id":2' in done.stdout.replace(" ", "")  # and claimcheck served its listing anyway


@pytest.mark.subprocess
def test_help_and_mistakes_are_said_once() -> None:
    cases = (
        (["--version"], "stdout", "claimcheck "),
        (["serve", "--bogus"], "stderr", "unrecognized arguments: --bogus"),
    )
    for argv, stream, marker in cases:
        done = subprocess.run(
            [PYTHON, "-m", "server", *argv], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
        said = getattr(done, stream)
        assert said.count(marker) == 1, said
