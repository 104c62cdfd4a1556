"""A real third-party client with per-call sessions: LangChain's langchain-mcp-adapters 0.3.2, in a venv
of its own with the mcp 1.x it pins, gets a handle in one call and the output by it in the next, through
`claimcheck serve --shared`. The venv is made once (under ~/.cache, or $CLAIMCHECK_LANGCHAIN_VENV) from PyPI;
the test is skipped when that install cannot be done (offline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import PYTHON, ROOT, demo_server_entry, write_config

pytestmark = pytest.mark.subprocess

ADAPTERS = "langchain-mcp-adapters==0.3.2"


@pytest.fixture(scope="module")
def langchain_python() -> Path:
    default = Path.home() / ".cache" / "claimcheck-tests" / "lc-0.3.2"
    venv = Path(os.environ.get("CLAIMCHECK_LANGCHAIN_VENV", default))
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import langchain_mcp_adapters.client"]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=120).returncode == 0:
        return python
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        install = [str(python), "-m", "pip", "install", "-q", ADAPTERS]
        subprocess.run(install, check=True, capture_output=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"could not install {ADAPTERS} into {venv} (offline?): {exc}")
    return python


def test_langchain_with_per_call_sessions_reads_a_handle_from_the_call_before(
    langchain_python: Path, runtime: Path, tmp_path: Path
) -> None:
    settings = {"asyncTimeoutSecs": 60, "stateDir": str(tmp_path / "state")}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    done = subprocess.run(
        [
            str(langchain_python),
            str(ROOT / "tests" / "support" / "servers" / "langchain_shared_client.py"),
            PYTHON,
            str(config),
            str(runtime),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert "Tool output is too large" in answers["big"]
    assert "00000000 INFO demo log line" in answers["read"], answers["read"]
