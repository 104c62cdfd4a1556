"""The dashboard in a real headless Chromium: opened through the printed token address, a call appears running and
turns ready without a reload; a page from another local origin cannot read the API, with or without the cookie."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, claimcheck_with_api, require_browser
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.browser]


async def test_the_token_address_opens_the_dashboard_whose_calls_turn_ready_live_after_the_token_left_the_address_bar(
    tmp_path: Path,
) -> None:
    require_browser()
    from playwright.async_api import async_playwright, expect

    async with claimcheck_with_api(tmp_path) as (mcp_url, api_url, dashboard_url), async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(dashboard_url)
            assert page.url == api_url, "the token is still in the address bar"
            cookies = await page.context.cookies()
            assert [(c["httpOnly"], c["sameSite"]) for c in cookies] == [(True, "Strict")]
            await expect(page.locator("#connection")).to_have_text("live", timeout=20_000)
            await page.evaluate("window.__sameDocument = 1")

            with anyio.fail_after(60):
                async with Client(streamable_http_client(mcp_url), mode="legacy") as client:
                    await client.list_tools()
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

            await page.reload()  # the cookie alone opens it again
            await expect(page.locator("#connection")).to_have_text("live", timeout=20_000)
            await expect(page.locator(f'tr[data-handle="{handle.group(1)}"]')).to_have_attribute("data-status", "ready")
            fresh = await browser.new_page()  # a context of its own: no cookie
            refused = await fresh.goto(api_url)
            assert refused is not None and refused.status == 401  # a browser without the cookie gets no dashboard
        finally:
            await browser.close()


ATTACK_PAGE = """<!doctype html><title>another local site</title><script>
async function attempt(url, options) {
  try {
    const reply = await fetch(url, options);
    let text = "";
    try { text = await reply.text(); } catch (error) { text = `unreadable: ${error}`; }
    return {type: reply.type, status: reply.status, text};
  } catch (error) {
    return {error: String(error)};
  }
}
window.attempts = (api) => Promise.all([
  attempt(`${api}v1/tasks?search=`, {}),
  attempt(`${api}v1/tasks?search=`, {credentials: "include"}),
  attempt(`${api}v1/tasks?search=`, {mode: "no-cors", credentials: "include"}),
  attempt(`${api}v1/tasks?search=`, {headers: {Authorization: "Bearer guessed"}, credentials: "include"}),
  attempt(`${api}v1/health`, {credentials: "include"}),
  attempt(`${api}v1/events`, {credentials: "include"}),
  attempt(`${api}?token=guessed`, {credentials: "include"}),
]);
</script>"""


@asynccontextmanager
async def another_local_origin() -> AsyncIterator[str]:
    """A page served from 127.0.0.1 on a port of its own: the same site as the API, another origin."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from server.http_edge import edge_server, serve_until_cancelled

    async def page(_: Any) -> HTMLResponse:
        return HTMLResponse(ATTACK_PAGE)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    server = edge_server(Starlette(routes=[Route("/", page)]))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_until_cancelled, server, sock)
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
            tg.cancel_scope.cancel()
    finally:
        sock.close()


async def test_a_page_from_another_local_origin_reads_nothing_from_the_api_even_with_the_dashboard_cookie(
    tmp_path: Path,
) -> None:
    require_browser()
    from playwright.async_api import async_playwright, expect

    secret = "secret-argument-4711"
    async with (
        claimcheck_with_api(tmp_path) as (mcp_url, api_url, dashboard_url),
        another_local_origin() as attacker_url,
        async_playwright() as playwright,
    ):
        with anyio.fail_after(60):
            async with Client(streamable_http_client(mcp_url), mode="legacy") as client:
                await client.list_tools()
                echoed = await client.call_tool("demo__echo", {"text": secret})
            assert text_of(echoed) == secret
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context()
            dashboard = await context.new_page()
            await dashboard.goto(dashboard_url)  # the cookie is set: the strongest case for the other page
            await expect(dashboard.locator("#tasks tr")).to_have_count(1, timeout=20_000)
            readable: Any = await dashboard.evaluate(f"fetch('/v1/tasks?search={secret}').then((r) => r.json())")
            assert readable["total"] == 1  # the dashboard's own origin, with the cookie, reads the call
            other = await context.new_page()
            await other.goto(attacker_url)
            results: Any = await other.evaluate("(api) => window.attempts(api)", api_url)
        finally:
            await browser.close()
    assert len(results) == 7
    for result in results:
        assert "error" in result or (result["type"] == "opaque" and result["text"] == ""), result
        assert secret not in json.dumps(result)
    assert "error" in results[0] and "error" in results[1]  # no CORS headers: the fetch itself fails


def test_the_browser_requirement_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    installs: list[list[str]] = []
    monkeypatch.setattr(Path, "exists", lambda self: False)
    monkeypatch.setattr(subprocess, "run", lambda command, **_: installs.append(command))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install-browser"):
        require_browser()
    assert installs == []
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        require_browser()
    assert installs and installs[0][-1].endswith(".ci/install-browser")
