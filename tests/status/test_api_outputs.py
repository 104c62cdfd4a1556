"""The status API's view of a stored output (for the dashboard): its size and first lines, and the agent's Grep
over it, bounded, through the one door; errors for running, unknown and bad requests; the token required."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from tests.support.handles import Downstream, client_of, handle_in, start_in_background
from tests.support.proxies import text_of
from tests.support.status_api import api_proxy

pytestmark = pytest.mark.anyio


async def test_a_stored_output_is_shown_by_its_first_lines_and_grepped_and_bad_requests_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(30):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            running = await start_in_background(client)
            head = await http.get(f"/v1/tasks/{handle}/output", params={"lines": 5})
            grep = await http.get(f"/v1/tasks/{handle}/output/grep", params={"regex": r"LINE 0012[34] "})
            still = await http.get(f"/v1/tasks/{running}/output")
            unknown = await http.get("/v1/tasks/session-0/nothing/output")
            too_many = await http.get(f"/v1/tasks/{handle}/output", params={"lines": 201})
            no_regex = await http.get(f"/v1/tasks/{handle}/output/grep")
            bad_regex = await http.get(f"/v1/tasks/{handle}/output/grep", params={"regex": "(unclosed"})
            assert proxy.api_url is not None
            async with httpx2.AsyncClient(base_url=proxy.api_url, timeout=10) as stranger:
                refused = await stranger.get(f"/v1/tasks/{handle}/output")
            down.release.set()
    body = head.json()
    assert head.status_code == 200
    assert (body["handle"], body["name"], body["status"], body["totalLines"], body["cut"]) == (
        handle, "down__big", "ready", 400, False
    )  # fmt: skip
    assert body["bytes"] == body["produced"] > 0
    assert [line["number"] for line in body["head"]] == [1, 2, 3, 4, 5]
    assert body["head"][0]["text"] == "line 00000 of the big output, with words to count"
    found = grep.json()
    assert grep.status_code == 200 and found["matches"] == 2 and not found["more"]
    shown = [(line["number"], line["match"]) for block in found["blocks"] for line in block]
    assert shown == [(123, False), (124, True), (125, True), (126, False)]  # case-insensitive, one line of context
    assert (still.status_code, still.json()["error"]) == (409, "the call is still running")
    assert unknown.status_code == 404
    assert too_many.status_code == 400 and "lines must be an integer in 1..200" in too_many.json()["error"]
    assert no_regex.status_code == 400
    assert bad_regex.status_code == 400 and bad_regex.json()["error"].startswith("Grep failed")
    assert refused.status_code == 401
