"""OpenTelemetry traces (the `[otel]` extra, configured by `OTEL_*`): a claimcheck over stdio exports a span per
call, child of the client's `_meta.traceparent`, with the downstream's call and the settling as its children, and
passes the trace on to the downstream in its request's `_meta`. The spans are received by an OTLP/HTTP endpoint
this test serves (the OpenTelemetry Collector is a Go binary on none of the registries this machine reaches),
decoding the protobuf with opentelemetry-proto. Without `OTEL_*`, nothing of the OpenTelemetry SDK is imported."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from server.tracing import enabled_by
from tests.support.processes import PYTHON, ROOT, announced_url, program, program_entry, write_config
from tests.support.proxies import text_of

pytestmark = pytest.mark.subprocess

META_ECHO = program_entry("meta_echo_downstream")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
TRACED: types.RequestParamsMeta = {"traceparent": TRACEPARENT}  # type: ignore[typeddict-unknown-key]  # an open map


class _Receiver(BaseHTTPRequestHandler):
    spans: list[Any]
    arrived: threading.Event

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(min(int(self.headers.get("content-length", "0")), 16 * 1024 * 1024))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        self.arrived.set()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[Any], threading.Event]]:
    """An OTLP/HTTP traces endpoint on 127.0.0.1: its URL, the spans received, and an event set at each export."""
    spans: list[Any] = []
    arrived = threading.Event()
    handler = type("Receiver", (_Receiver,), {"spans": spans, "arrived": arrived})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", spans, arrived
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.anyio
async def test_a_call_is_a_span_under_the_clients_trace_and_the_trace_reaches_the_downstream(
    tmp_path: Path, receiver: tuple[str, list[Any], threading.Event]
) -> None:
    endpoint, spans, _ = receiver
    config = write_config(tmp_path, {"mcpServers": {"echo": META_ECHO}})
    env = {
        **os.environ,
        "CLAIMCHECK_API_ENABLED": "false",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": "claimcheck-under-test",
    }
    args = ["-m", "server", "serve", "--config", str(config)]
    params = StdioServerParameters(command=PYTHON, args=args, env=env, cwd=ROOT)
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            answer = await client.call_tool("echo__meta", {}, meta=TRACED)
        # claimcheck exported what was left when it stopped; spans of this trace are in by now
    received = json.loads(text_of(answer))
    ours = {span.name: span for span in spans if span.trace_id.hex() == TRACE_ID}
    call = ours["claimcheck.call echo/meta"]
    downstream, settled = ours["claimcheck.downstream"], ours["claimcheck.settle"]
    assert downstream.parent_span_id == call.span_id == settled.parent_span_id
    assert received["traceparent"].split("-")[1] == TRACE_ID  # passed on in the downstream request's _meta
    assert received["traceparent"].split("-")[2] == downstream.span_id.hex()  # under the downstream's span
    outcome = {kv.key: kv.value.string_value for kv in call.attributes}["claimcheck.outcome"]
    assert outcome == "inline"


@pytest.mark.anyio
async def test_over_http_the_traceparent_header_parents_the_calls_and_is_passed_on_to_an_http_downstream(
    tmp_path: Path, receiver: tuple[str, list[Any], threading.Event]
) -> None:
    endpoint, spans, _ = receiver
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
    echo = program("meta_echo_downstream", "--http", "0")
    with anyio.fail_after(120):
        async with announced_url(echo, r"meta echo at (http://\S+/mcp)") as echo_url:
            config = write_config(tmp_path, {"mcpServers": {"echo": {"url": echo_url}}})
            serve = ["env", *(f"{k}={v}" for k, v in env.items() if k.startswith("OTEL_"))]
            serve += [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api"]
            serve += ["--transport", "http", "--port", "0"]
            async with announced_url(serve, r"serving MCP over streamable HTTP at (http://\S+/mcp)") as url:
                http = httpx2.AsyncClient(headers={"traceparent": TRACEPARENT}, timeout=60)
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    plain = await client.call_tool("echo__meta", {})
                    progressed = await client.call_tool("echo__meta", {}, progress_callback=_ignore_progress)
            # claimcheck exported what was left when it stopped
    calls = [span for span in spans if span.name == "claimcheck.call echo/meta"]
    assert [span.trace_id.hex() for span in calls] == [TRACE_ID, TRACE_ID]
    for answer in (plain, progressed):
        received = json.loads(text_of(answer))
        assert received["header:traceparent"].split("-")[1] == TRACE_ID  # the header, passed on over HTTP
        assert received["header:traceparent"] == received["traceparent"]  # the same as in the request's _meta


@pytest.mark.anyio
async def test_the_trace_reaches_the_server_behind_a_claimcheck_behind_claimcheck(
    tmp_path: Path, receiver: tuple[str, list[Any], threading.Event]
) -> None:
    endpoint, spans, _ = receiver
    (tmp_path / "inner").mkdir()
    off = {"api": {"enabled": False}}
    inner = write_config(tmp_path / "inner", {"mcpServers": {"echo": META_ECHO}, "settings": off})
    outer_servers = {"inner": {"command": PYTHON, "args": ["-m", "server", "serve", "--config", str(inner)]}}
    outer = write_config(tmp_path, {"mcpServers": outer_servers, "settings": off})
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
    args = ["-m", "server", "serve", "--config", str(outer)]
    with anyio.fail_after(120):
        async with Client(StdioServerParameters(command=PYTHON, args=args, env=env, cwd=ROOT)) as client:
            answer = await client.call_tool("inner__echo__meta", {}, meta=TRACED)
    received = json.loads(text_of(answer))  # what the server behind the inner claimcheck (untraced) was sent
    [downstream] = [span for span in spans if span.name == "claimcheck.downstream"]  # the outer's
    assert received["io.claimcheck/passthrough"] is True
    assert received["traceparent"].split("-")[1] == TRACE_ID
    assert received["traceparent"].split("-")[2] == downstream.span_id.hex()  # under the outer's downstream span


async def _ignore_progress(progress: float, total: float | None, message: str | None) -> None:
    pass


def test_without_otel_variables_tracing_is_off_and_the_sdk_never_imported() -> None:
    assert not enabled_by({}) and not enabled_by({"OTEL_TRACES_EXPORTER": "none"})
    assert enabled_by({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not enabled_by({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"})
    code = (
        "import sys\nfrom server.proxy import Proxy\nfrom server.upstream import transports\n"
        "from server import tracing\n"
        "assert not tracing.ENABLED\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    ran = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
