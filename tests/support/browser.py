"""A real headless Chromium (Debian's, from .ci/install-browser) and a claimcheck whose dashboard it opens."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.support import os_packages
from tests.support.processes import API_LINE, PYTHON, announcing, demo_server_entry, discovered, write_config

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
MCP_URL = r"serving MCP over streamable HTTP at (http://\S+/mcp)"


def require_browser() -> None:
    """Chromium and Playwright, installed in CI by .ci/install-browser; locally, a skip."""
    os_packages.require("install-browser", _browser_missing)


def _browser_missing() -> list[str]:
    missing = [] if Path(CHROMIUM).exists() else [CHROMIUM]
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("the playwright package")
    return missing


@asynccontextmanager
async def claimcheck_with_api(
    tmp_path: Path,
    *serve_args: str,
    settings: Mapping[str, Any] | None = None,
    pids: list[int] | None = None,
    within: float = 60,
) -> AsyncIterator[tuple[str, str, str]]:
    """`claimcheck serve --transport http` (and `serve_args`, `settings`) with the status API on; yields (MCP URL,
    API URL, dashboard URL) and adds its pid to `pids`. Leaving stops it with SIGTERM (a clean stop)."""
    # startupWaitSecs: on a busy machine the demo server may take longer than the default 3 s to start, and
    # a call before it is listed would be an unknown tool; the tests list the tools first, which waits.
    settings = {"asyncTimeoutSecs": 0.5, "stateDir": str(tmp_path / "state"), "startupWaitSecs": 60, **(settings or {})}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    announced = announcing([*command, *serve_args], MCP_URL, API_LINE, env=env, within=within, stdin=subprocess.DEVNULL)
    async with announced as started:
        if pids is not None:
            pids.append(started.process.pid)
        mcp, api = started.matches
        yield mcp.group(1).decode(), api.group(1).decode(), discovered(api.group(2))["dashboard"]
