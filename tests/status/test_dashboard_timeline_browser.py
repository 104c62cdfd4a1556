"""The dashboard's timeline and output view in a real headless Chromium, checked on screenshots and the page:
a running and a ready call as bars in their status colours with the time-rule mark, and a stored (cut) output's
size, first lines and a Grep that finds a term in it."""

from __future__ import annotations

import base64
import re
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, claimcheck_with_api, require_browser
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.browser]

KEPT_BYTES = 64 * 1024
RUN, READY, RULE = (10, 102, 194), (30, 127, 60), (255, 138, 0)  # --run, --ok, --rule in dashboard.html

COUNT_PIXELS = """async ([png, colours]) => {
  const image = new Image();
  image.src = `data:image/png;base64,${png}`;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width; canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const data = context.getImageData(0, 0, image.width, image.height).data;
  const counts = colours.map(() => 0);
  for (let i = 0; i < data.length; i += 4) {
    colours.forEach(([r, g, b], k) => {
      if (Math.abs(data[i] - r) <= 2 && Math.abs(data[i + 1] - g) <= 2 && Math.abs(data[i + 2] - b) <= 2) counts[k]++;
    });
  }
  return counts;
}"""


def cut_claimcheck(tmp_path: Path, pids: list[int]) -> AbstractAsyncContextManager[tuple[str, str, str]]:
    """`claimcheck serve --transport http` whose outputs are cut at 64 KiB (see `claimcheck_with_api`), with a time
    rule of 4 s: a 256 KiB output is a handle by its size long before that however busy the machine is (at 0.5 s, on
    two cores running two test workers and apt, the time rule once took it first)."""
    settings = {"maxOutputBytes": KEPT_BYTES, "asyncTimeoutSecs": 4}
    return claimcheck_with_api(tmp_path, settings=settings, pids=pids, within=120)


def _handle(text: str) -> str:
    found = re.search(r'handle: "([^"]+)"', text) or re.search(r'"(session-[0-9a-f]+/[0-9a-f]+)"', text)
    assert found, text
    return found.group(1)


async def test_the_timeline_shows_a_running_and_a_ready_call_and_the_output_view_shows_and_greps_a_cut_output(
    tmp_path: Path,
) -> None:
    require_browser()
    from playwright.async_api import async_playwright, expect

    pids: list[int] = []
    async with cut_claimcheck(tmp_path, pids) as (mcp_url, _, dashboard_url), async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            await page.goto(dashboard_url)
            await expect(page.locator("#connection")).to_have_text("live", timeout=30_000)
            with anyio.fail_after(120):
                async with Client(streamable_http_client(mcp_url), mode="legacy") as client:
                    await client.list_tools()
                    quick = await client.call_tool("demo__echo", {"text": "quick"})
                    assert text_of(quick) == "quick"
                    slow = _handle(text_of(await client.call_tool("demo__slow", {"seconds": 600})))
                    big = _handle(text_of(await client.call_tool("demo__big", {"kb": 256})))

                    running = page.locator(f'#lanes .lane[data-handle="{slow}"]')
                    ready = page.locator(f'#lanes .lane[data-handle="{big}"]')
                    await expect(running).to_have_attribute("data-status", "running", timeout=30_000)
                    await expect(ready).to_have_attribute("data-status", "ready", timeout=30_000)
                    await expect(running.locator(".bar.running")).to_be_visible()
                    await expect(ready.locator(".bar.ready")).to_be_visible()
                    await expect(running.locator(".rule")).to_be_visible()  # the time rule handed it off
                    await expect(ready.locator(".rule")).to_have_count(0)  # its size did, at once
                    await expect(page.locator("#lanes .lane")).to_have_count(3)
                    await expect(page.locator("#lanes .rule")).to_have_count(1)  # nor on the quick inline call
                    instance = page.locator(f'#tasks tr[data-handle="{big}"] td.instance')
                    await expect(instance).to_have_text(f"pid {pids[0]}")
                    await expect(page.locator("#rule-text")).to_contain_text("time rule (4 s)")
                    shot = await page.locator("#timeline").screenshot(path=str(tmp_path / "timeline.png"))
                    counts: Any = await page.evaluate(
                        COUNT_PIXELS, [base64.b64encode(shot).decode(), [list(RUN), list(READY), list(RULE)]]
                    )
                    assert all(count > 20 for count in counts), counts  # each colour is on the screenshot

                    still: Any = await page.evaluate(
                        "(path) => fetch(path).then(async (r) => [r.status, (await r.json()).error])",
                        f"/v1/tasks/{slow}/output",
                    )
                    assert still == [409, "the call is still running"]

                    await page.locator(f'#lanes .lane-name[data-handle="{big}"]').click()  # its label opens it
                    await expect(page.locator(f'#tasks tr[data-handle="{big}"]')).to_have_class(re.compile("selected"))
                    panel = page.locator("#output-panel")
                    await expect(panel).to_be_visible(timeout=30_000)
                    meta = page.locator("#output-meta")
                    await expect(meta).to_have_text(re.compile(r"^64\.\d KB · \d+ lines · \d+ tokens"), timeout=30_000)
                    await expect(meta).to_contain_text(re.compile(r"cut: the first 64\.\d KB of 256\.0 KB were kept"))
                    await expect(meta).to_have_attribute("data-cut", "true")
                    head = page.locator("#output-head")
                    await expect(head).to_contain_text("     1  00000000 INFO demo log line with some words in it")
                    await expect(head).to_contain_text("    40  00000039 INFO")
                    await page.locator("#output-regex").fill("00000777 INFO")
                    await page.locator("#output-regex").press("Enter")
                    matches = page.locator("#output-matches")
                    await expect(matches).to_contain_text("1 matching line", timeout=30_000)
                    await expect(matches.locator(".hit")).to_have_text(re.compile(r"^\s+778 → 00000777 INFO demo"))
                    await expect(matches.locator('[data-line="777"]')).to_have_count(1)  # a line of context
                    await page.locator("aside").screenshot(path=str(tmp_path / "output-view.png"))

                    await page.locator("#output-regex").fill("NOT_IN_THE_OUTPUT")
                    await page.locator("#output-regex").press("Enter")
                    await expect(matches).to_contain_text("No matches for NOT_IN_THE_OUTPUT", timeout=30_000)
                    await client.call_tool("cancel_tool_output", {"handle": slow})
        finally:
            await browser.close()


async def test_a_call_of_a_claimcheck_that_has_exited_says_that_instance_ended_and_when(tmp_path: Path) -> None:
    require_browser()
    from playwright.async_api import async_playwright, expect

    pids: list[int] = []
    with anyio.fail_after(240):
        async with cut_claimcheck(tmp_path, pids) as (mcp_url, _, _):
            async with Client(streamable_http_client(mcp_url), mode="legacy") as client:
                big = _handle(text_of(await client.call_tool("demo__big", {"kb": 256})))
        async with cut_claimcheck(tmp_path, pids) as (_, _, dashboard_url), async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1400, "height": 900})
                await page.goto(dashboard_url)
                row = page.locator(f'#tasks tr[data-handle="{big}"]')
                await expect(row.locator("td.instance")).to_have_text(f"pid {pids[0]}", timeout=30_000)
                await row.click()
                meta = page.locator("#output-meta")
                await expect(meta).to_have_text(
                    re.compile(
                        rf"^No output to show: the claimcheck that ran it \(pid {pids[0]}\) ended at "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z, and its outputs went with it$"
                    ),
                    timeout=30_000,
                )
            finally:
                await browser.close()
