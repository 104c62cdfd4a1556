"""The dashboard names each call's owner, in a real headless Chromium: a tokens-file principal's call by the
principal's name, live and again from the history after a reload; a call whose session is its connection's by a
dash; and an owner whose name looks like HTML as the literal text."""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from server.status.history import History
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, claimcheck_with_api, require_browser
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.browser]

ALICE = secrets.token_hex(32)
MARKUP = '<img src=x onerror="window.injected = 1"><b>mallory</b> & co'
"""An owner no tokens file can name, but a history shared with other instances may hold (names from an identity
provider are not limited to the tokens file's characters)."""


def seed_history(state: Path) -> None:
    """Two finished calls of an earlier run in the history the instance will open: one owned by `MARKUP`, one
    whose session was its connection's (no owner)."""
    path = state / "history.sqlite3"
    History(path).close()  # the current schema, in a private state directory
    now = time.time()
    with closing(sqlite3.connect(path)) as db, db:
        for handle, owner in (("session-a/markup", MARKUP), ("session-b/none", None)):
            db.execute(
                "INSERT INTO tasks (handle, server, tool, name, status, started, finished, instance, owner) "
                "VALUES (?, 'demo', 'echo', 'demo__echo', 'ready', ?, ?, 1, ?)",
                (handle, now - 60, now - 59, owner),
            )


async def test_each_calls_owner_is_shown_as_text_a_tokens_file_principal_by_name_and_no_owner_as_a_dash(
    tmp_path: Path,
) -> None:
    require_browser()
    from playwright.async_api import async_playwright, expect

    seed_history(tmp_path / "state")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n", encoding="utf-8")
    async with (
        claimcheck_with_api(tmp_path, "--auth-tokens-file", str(tokens)) as (mcp_url, _, dashboard_url),
        async_playwright() as playwright,
    ):
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(dashboard_url)
            await expect(page.locator("#connection")).to_have_text("live", timeout=20_000)

            markup = page.locator('tr[data-handle="session-a/markup"] td.owner')
            await expect(markup).to_have_text(MARKUP, timeout=20_000)
            await expect(markup.locator("*")).to_have_count(0)  # no element was made from the name
            await expect(markup).to_have_attribute("title", MARKUP)
            injected: Any = await page.evaluate("window.injected")
            assert injected is None
            nobody = page.locator('tr[data-handle="session-b/none"] td.owner')
            await expect(nobody).to_have_text("—")
            await expect(nobody).to_have_attribute("title", re.compile("^no owner: a session its connection owns"))

            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=60)
            with anyio.fail_after(60):
                async with Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as alice:
                    await alice.list_tools()
                    first = await alice.call_tool("demo__slow", {"seconds": 2})
                    found = re.search(r'handle: "([^"]+)"', text_of(first))
                    assert found, text_of(first)
                    handle = found.group(1)
                    row = page.locator(f'tr[data-handle="{handle}"]')
                    await expect(row).to_have_attribute("data-status", "running", timeout=20_000)
                    await expect(row.locator("td.owner")).to_have_text("alice")  # from the live event
                    waited = await alice.call_tool("wait_for_tool_output", {"handles": [handle]})
                    assert "ready" in text_of(waited)
                    await expect(row).to_have_attribute("data-status", "ready", timeout=20_000)

            await page.reload()  # the snapshot now comes from the history
            await expect(page.locator("#connection")).to_have_text("live", timeout=20_000)
            await expect(page.locator(f'tr[data-handle="{handle}"] td.owner')).to_have_text("alice")
            await page.locator("#search").fill("alice")  # the search box finds calls by owner too
            await expect(page.locator("#tasks tr")).to_have_count(1)
            await expect(page.locator("#tasks tr")).to_have_attribute("data-handle", handle)
        finally:
            await browser.close()
