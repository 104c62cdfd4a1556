"""`claimcheck tools` says what a client would be served: counts after each server's `tools.include`/`exclude`, and
none of the warnings meant for serving (no client waits for a late server here)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import PYTHON, demo_server_entry, write_config

pytestmark = pytest.mark.subprocess


def claimcheck_tools(config: Path) -> subprocess.CompletedProcess[str]:
    """`claimcheck tools` on `config`, waiting at most 4 s for the servers, with no status API."""
    return subprocess.run(
        [PYTHON, "-m", "server", "tools", "--config", str(config), "--timeout", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "CLAIMCHECK_API_ENABLED": "false"},
    )


def test_tools_counts_after_the_filters_and_prints_no_serving_warning_for_a_late_server(tmp_path: Path) -> None:
    silent = {"command": PYTHON, "args": ["-c", "import sys; sys.stdin.read()"]}  # never answers initialize
    demo = {**demo_server_entry(), "tools": {"exclude": ["echo"]}}
    config = write_config(
        tmp_path, {"mcpServers": {"demo": demo, "late": silent}, "settings": {"startupWaitSecs": 0.5}}
    )
    done = claimcheck_tools(config)
    listed = [line.split("\t", 1)[0] for line in done.stdout.splitlines() if "\t" in line]
    served = [name for name in listed if name.startswith("demo__")]
    assert "demo__echo" not in served and len(served) >= 2
    lines = done.stdout.splitlines()
    assert lines[0] == f"demo: ready, {len(served)} tools (of {len(served) + 1} offered)"
    assert lines[1] == "late: starting, 0 tools (no answer within 4 s)"
    assert "is not ready after" not in done.stderr
    assert done.stderr.splitlines() == ["claimcheck: 1 server not ready: late (starting: no answer within 4 s)"]
    assert done.returncode == 1


def test_tools_reports_a_server_that_cannot_start_once_without_the_supervisor_s_retry_log(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"ghost": {"command": str(tmp_path / "no-such-server")}}})
    done = claimcheck_tools(config)
    assert done.returncode == 1
    why = f"command not found: {tmp_path / 'no-such-server'}"
    assert done.stdout.splitlines()[0] == f"ghost: failed, 0 tools ({why})"
    assert done.stderr.splitlines() == [f"claimcheck: 1 server not ready: ghost (failed: {why})"]
