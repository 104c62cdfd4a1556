"""`claimcheck serve` on another client's whole file: it serves the file's servers and says once, on stderr, what
it read and what it ignored."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import PYTHON

REPO_ROOT = Path(__file__).resolve().parents[2]


def claimcheck(*args: str) -> subprocess.CompletedProcess[str]:
    """`claimcheck ARGS` as a user runs it (none of the test run's CLAIMCHECK_ variables), stdin closed."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMCHECK_")}
    return subprocess.run(
        [PYTHON, "-m", "server", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
        env=environ,
    )


@pytest.mark.subprocess
@pytest.mark.parametrize("command", ["serve", "tools"])
def test_a_whole_claude_desktop_file_gets_one_notice_naming_what_was_read(tmp_path: Path, command: str) -> None:
    path = tmp_path / "claude_desktop_config.json"
    data = {"globalShortcut": "Ctrl+Space", "preferences": {}, "mcpServers": {"a": {"command": "x", "disabled": True}}}
    path.write_text(json.dumps(data), encoding="utf-8")
    done = claimcheck(command, "--config", str(path), *(["--no-api"] if command == "serve" else []))
    notices = [line for line in done.stderr.splitlines() if "read mcpServers" in line]
    assert notices == [
        "claimcheck WARNING server.config: read mcpServers from claude_desktop_config.json; "
        "ignored: globalShortcut, preferences"
    ]


@pytest.mark.subprocess
def test_tools_lists_the_servers_of_a_goose_yaml_file_as_written(tmp_path: Path) -> None:
    """goose's own file, with a command-line extension that runs the demo server: its tools are listed under the
    extension's name, and the built-in extension is named as left out."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "GOOSE_PROVIDER: anthropic\n"
        "extensions:\n"
        "  developer: {bundled: true, enabled: true, name: developer, timeout: 300, type: builtin}\n"
        f"  demo: {{cmd: {json.dumps(PYTHON)}, args: [-m, server.demo.server], enabled: true, name: demo, "
        "timeout: 300, type: stdio, envs: {}}\n",
        encoding="utf-8",
    )
    done = claimcheck("tools", "--config", str(path))
    assert done.returncode == 0, done.stderr
    assert "demo__echo" in done.stdout, done.stdout
    notices = [line for line in done.stderr.splitlines() if "read extensions" in line]
    assert notices == [
        "claimcheck WARNING server.config: read extensions from config.yaml; ignored: extensions.developer (a goose "
        "builtin extension: only goose runs it), extensions.demo.timeout, GOOSE_PROVIDER"
    ]
