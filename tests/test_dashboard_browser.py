"""The dashboard in a real headless Chromium: a call appears running and turns ready without a reload."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import demo_server_entry, text_of, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
MCP_URL = re.compile(rb"serving MCP over streamable HTTP at (http://\S+/mcp)")
API_URL = re.compile(rb"status API at (http://127\.0\.0\.1:\d+/)")


def _require_browser() -> None:
    """Chromium and Playwright, installed in CI (the test suite installs what it needs); locally, a skip."""
    in_ci = os.environ.get("CI", "").lower() not in ("", "0", "false")
    if in_ci and not Path(CHROMIUM).exists():
        script = Path(__file__).resolve().parent.parent / ".ci" / "install-browser"
        subprocess.run([str(script)], check=False, timeout=1200)
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(CHROMIUM)
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("the playwright package")
    if not missing:
        return
    reason = f"{' and '.join(missing)} missing; run .ci/install-browser"
    if in_ci:
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@asynccontextmanager
async def claimcheck_with_api(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """`claimcheck serve --transport http` with the status API on; yields (MCP URL, API URL)."""
    settings = {"asyncTimeoutSecs": 0.5, "stateDir": str(tmp_path / "state")}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
    command = [sys.executable, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    process = await anyio.open_process(command, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(60):
            async for chunk in process.stderr:
                seen += chunk
                mcp, api = MCP_URL.search(seen), API_URL.search(seen)
                if mcp and api:
                    break
        assert mcp and api, seen.decode(errors="replace")
        yield mcp.group(1).decode(), api.group(1).decode()
    finally:
        process.terminate()
        with anyio.fail_after(30, shield=True):
            await process.wait()


async def test_a_call_appears_running_and_turns_ready_live_and_its_log_opens(tmp_path: Path) -> None:
    _require_browser()
    from playwright.async_api import async_playwright, expect

    async with claimcheck_with_api(tmp_path) as (mcp_url, api_url), async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(api_url)
            await expect(page.locator("#connection")).to_have_text("live", timeout=20_000)
            await page.evaluate("window.__sameDocument = 1")

            with anyio.fail_after(60):
                async with Client(streamable_http_client(mcp_url), mode="legacy") as client:
                    first = await client.call_tool("demo__slow", {"seconds": 2})
                    handle = re.search(r'handle: "([^"]+)"', text_of(first))
                    assert handle, text_of(first)
                    row = page.locator(f'tr[data-handle="{handle.group(1)}"]')
                    await expect(row).to_have_attribute("data-status", "running", timeout=20_000)
                    await row.focus()  # updates change the row in place, so keyboard focus survives them
                    waited = await client.call_tool("wait_for_tool_output", {"handles": [handle.group(1)]})
                    assert "ready" in text_of(waited)
                    await expect(row).to_have_attribute("data-status", "ready", timeout=20_000)
                    await expect(row).to_be_focused()

            await row.click()
            log = page.locator("#log-panel")
            await expect(log.locator('li[data-kind="created"]')).to_have_count(1, timeout=20_000)
            await expect(log.locator('li[data-kind="finished"]')).to_have_count(1, timeout=20_000)
            same: Any = await page.evaluate("window.__sameDocument")
            assert same == 1, "the page reloaded"
        finally:
            await browser.close()


def test_the_browser_requirement_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    installs: list[list[str]] = []
    monkeypatch.setattr(Path, "exists", lambda self: False)
    monkeypatch.setattr(subprocess, "run", lambda command, **_: installs.append(command))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install-browser"):
        _require_browser()
    assert installs == []
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        _require_browser()
    assert installs and installs[0][0].endswith(".ci/install-browser")
