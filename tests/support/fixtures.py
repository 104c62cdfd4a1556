"""The fixtures more than one test module uses, registered once (tests/conftest.py loads this module)."""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import mcp.client.stdio
import pytest

from server.config import FAST_PATH_ENV
from tests.support import os_packages, peers


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio for every async test; module-scoped, as anyio's own, so module-scoped async fixtures can use it."""
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
def fast_path(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """`CLAIMCHECK_FAST_PATH` for the claimcheck processes a module starts (None: left as it is, so the default).

    The mcp SDK's stdio client passes only a few variables to its child; this one is added to them."""
    mode: str | None = getattr(request, "param", None)
    if mode is None:
        yield None
        return
    inherited = [*mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS, FAST_PATH_ENV]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FAST_PATH_ENV, mode)
        patch.setattr(mcp.client.stdio, "DEFAULT_INHERITED_ENV_VARS", inherited)
        yield mode


@pytest.fixture(scope="module")
def redis_and_haproxy() -> None:
    """redis-server and haproxy (Debian's, from .ci/install-replicas); a skip locally where they are missing."""
    os_packages.require("install-replicas", os_packages.commands("redis-server", "haproxy"))


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    """A temporary directory for a module's tests (hypothesis runs many examples in one test: no `tmp_path`)."""
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A short private runtime directory (Unix socket paths are limited to 107 bytes, so not pytest's tmp_path);
    a shared claimcheck started there is stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="cc-rt-", dir="/tmp") as directory:
        yield Path(directory)
        for pid_file in Path(directory).glob("claimcheck-shared-*/*.pid"):
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


@pytest.fixture(scope="session")
def everything() -> tuple[str, ...]:
    """The command of server-everything (npm, installed on first use)."""
    return peers.everything_command()


@pytest.fixture
def everything_config(tmp_path: Path, everything: tuple[str, ...]) -> Path:
    """A Claude-Desktop-shaped config with server-everything as downstream `ev` and claimcheck's default settings."""
    command, *args = everything
    path = tmp_path / "claimcheck.json"
    path.write_text(json.dumps({"mcpServers": {"ev": {"command": command, "args": args}}}), encoding="utf-8")
    return path
