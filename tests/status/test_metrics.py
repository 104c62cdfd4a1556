"""`/metrics`: calls counted by server, tool and outcome, durations, downstream state, behind the API's token, in
the Prometheus text format; scraped by a real Prometheus (Debian's, from .ci/install-metrics) whose query answers
the count; a clear 501 naming the extra when prometheus-client is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest

from server.status.metrics import MISSING
from tests.support import os_packages
from tests.support.handles import Downstream, client_of, start_in_background
from tests.support.replicas import free_port, stop_processes
from tests.support.status_api import api_proxy

pytestmark = pytest.mark.anyio


def _samples(text: str, name: str) -> dict[str, float]:
    """The samples of metric `name` in an exposition: labels text → value."""
    found = {}
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            labels, _, value = line.rpartition(" ")
            found[labels.removeprefix(name)] = float(value)
    return found


async def test_calls_are_counted_by_server_tool_and_outcome_behind_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(20):
            before = _samples((await http.get("/metrics")).text, "claimcheck_calls_total")
            await client.call_tool("down__echo", {"text": "one"})
            await client.call_tool("down__echo", {"text": "two"})
            await start_in_background(client, text="later")
            down.release.set()
            await client.call_tool("wait_for_tool_output", {})
            await client.call_tool("down__big", {"lines": 2000})
            scraped = await http.get("/metrics")
            anonymous = await httpx2.AsyncClient().get(f"{proxy.api_url}metrics")
    calls = _samples(scraped.text, "claimcheck_calls_total")

    def added(tool: str, outcome: str) -> float:
        key = f'{{outcome="{outcome}",server="down",tool="{tool}"}}'
        return calls.get(key, 0) - before.get(key, 0)

    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert added("echo", "inline") == 2
    assert added("gated", "handed_off") == 1
    assert added("big", "stored") == 1
    assert _samples(scraped.text, "claimcheck_call_duration_seconds_count")['{server="down"}'] >= 4
    assert _samples(scraped.text, "claimcheck_downstream_up") == {'{server="down"}': 1.0}
    assert _samples(scraped.text, "claimcheck_handles_alive")[""] >= 2
    assert _samples(scraped.text, "claimcheck_stored_bytes_total")[""] > 0
    assert "claimcheck_extraction_tokens_total" in scraped.text and "claimcheck_grep_seconds_total" in scraped.text
    assert anonymous.status_code == 401


async def test_without_prometheus_client_metrics_answers_501_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if it were not installed
    async with api_proxy(tmp_path, Downstream(), monkeypatch) as (_, http):
        with anyio.fail_after(10):
            answer = await http.get("/metrics")
            health = await http.get("/v1/health")
    assert (answer.status_code, answer.json()) == (501, {"error": MISSING})
    assert "mcp-claimcheck[metrics]" in MISSING and health.status_code == 200


@pytest.mark.subprocess
def test_counting_a_call_imports_nothing() -> None:
    """The counters are plain numbers: a call's path never loads prometheus-client (the first scrape does)."""
    code = (
        "import sys, anyio; from server.handles.meters import Meters\n"
        "from server.handles.calls import Call, Description; from server.handles.outcome import Inline\n"
        "meters = Meters()\n"
        "async def main():\n"
        "    call = Call(Description('h', 'down__echo', 'down', 'echo', {}), meters=meters)\n"
        "    call.settle(Inline(), 'ready')\n"
        "anyio.run(main)\n"
        "assert 'prometheus_client' not in sys.modules and 'opentelemetry.sdk' not in sys.modules, 'imported'\n"
        "print(meters.calls)"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    assert "('down', 'echo', 'inline'): 1" in ran.stdout


def _prometheus_config(directory: Path, target: str, token: str) -> Path:
    config = directory / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: claimcheck\n    metrics_path: /metrics\n"
        f"    authorization:\n      type: Bearer\n      credentials: {token}\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    return config


@pytest.mark.subprocess  # Debian's prometheus, installed by .ci/install-metrics where missing
async def test_a_real_prometheus_scrapes_metrics_and_its_query_answers_the_call_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os_packages.require("install-metrics", os_packages.commands("prometheus"))
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, _http), client_of(proxy) as client:
        with anyio.fail_after(20):
            for text in ("a", "b", "c"):
                await client.call_tool("down__echo", {"text": text})
        expected = proxy.meters.calls[("down", "echo", "inline")]  # this proxy's total
        assert proxy.api_url is not None and proxy.api_token is not None
        target = proxy.api_url.removeprefix("http://").rstrip("/")
        config = _prometheus_config(tmp_path, target, proxy.api_token)
        port = free_port()
        command = ["prometheus", f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}"]
        command += [f"--storage.tsdb.path={tmp_path / 'tsdb'}", "--log.level=warn"]
        process = await anyio.open_process(command, stdin=subprocess.DEVNULL, stdout=None, stderr=None)
        query = 'sum(claimcheck_calls_total{server="down",tool="echo",outcome="inline"})'
        answer: list[object] = []
        try:
            async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as prometheus:
                with anyio.fail_after(60):
                    while not answer or float(answer[0]["value"][1]) != expected:  # type: ignore[index]
                        await anyio.sleep(0.2)  # polling Prometheus's API: it scrapes every second
                        try:
                            reply = await prometheus.get("/api/v1/query", params={"query": query})
                        except httpx2.TransportError:
                            continue  # not listening yet
                        if reply.status_code == 200:
                            answer = reply.json()["data"]["result"]
                    up = (await prometheus.get("/api/v1/query", params={"query": 'up{job="claimcheck"}'})).json()
        finally:
            await stop_processes([process])
    assert float(answer[0]["value"][1]) == expected >= 3  # type: ignore[index]
    assert up["data"]["result"][0]["value"][1] == "1"
