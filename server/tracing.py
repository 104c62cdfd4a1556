"""OpenTelemetry traces of every call, behind the optional extra `[otel]` and the standard `OTEL_*` variables.

On when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`) or an OTLP endpoint is set
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), and `OTEL_SDK_DISABLED` is not true.
`ENABLED` is read once, at import; every hook on a call's path is `if tracing.ENABLED:`, and nothing of
OpenTelemetry is imported by this module until `setup` runs with it on. The MCP SDK imports the OpenTelemetry
API itself (its spans are no-ops without a provider); with tracing on, its spans join claimcheck's.

Spans: `claimcheck.call <server>/<tool>` per proxied call, child of the request's trace context (W3C
`traceparent` from the HTTP header, or `_meta.traceparent`), with children `claimcheck.downstream` (the
downstream's call, whose request carries the context on: `_meta.traceparent` over stdio, as the SDK's client
does over HTTP) and `claimcheck.settle` (the size rule, storing the output).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from server.distribution import install_command

__all__ = ["ENABLED", "enabled_by", "from_headers", "inject", "parent", "setup", "shutdown", "span"]

logger = logging.getLogger(__name__)

MISSING = f"tracing is configured (OTEL_*) but the [otel] extra is missing: {install_command('otel')}"


def enabled_by(environ: Mapping[str, str]) -> bool:
    """Whether the `OTEL_*` variables in `environ` ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


# Process-wide on purpose: OpenTelemetry has one tracer provider per process (`set_tracer_provider` takes once)
# and the OTEL_* variables are the process's; the proxies running in it share the provider, counted in `_users`.
ENABLED = enabled_by(os.environ)
_tracer: Any = None
_provider: Any = None
_users = 0


def setup() -> None:
    """Install the tracer provider and its exporter, once, when tracing is on; off (with a warning) without the
    extra. Each running proxy calls it, and `shutdown` once it stops."""
    global ENABLED, _tracer, _provider, _users
    _users += 1
    if not ENABLED or _tracer is not None:
        return
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        logger.warning(MISSING)
        ENABLED = False
        return
    exporter: SpanExporter
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            logger.warning(MISSING)
            ENABLED = False
            return
        exporter = OTLPSpanExporter()  # endpoint, headers, timeout: the OTEL_EXPORTER_OTLP_* variables
    service = os.environ.get("OTEL_SERVICE_NAME") or "claimcheck"
    _provider = TracerProvider(resource=Resource.create({"service.name": service}))
    _provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(_provider)
    _tracer = trace.get_tracer("claimcheck")


def shutdown() -> None:
    """Export what is left (bounded by the exporter's timeout) once the last proxy using the provider stops."""
    global _users
    _users -= 1
    if _provider is not None and _users <= 0:
        _provider.shutdown()


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span under the current one; only called when `ENABLED`."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current


def inject(meta: MutableMapping[str, Any]) -> None:
    """Write the current trace context into a request's `_meta` (`traceparent`, `tracestate`)."""
    if _tracer is not None:
        from opentelemetry.propagate import inject as write

        write(meta)


@contextmanager
def parent(carrier: Mapping[str, Any] | None) -> Iterator[None]:
    """Make the trace context in `carrier` (HTTP headers or `_meta`: `traceparent`) current, when it holds one."""
    value = carrier.get("traceparent") if carrier is not None else None
    if _tracer is None or not isinstance(value, str) or len(value) > 256:
        yield
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    found = {"traceparent": value}
    state = carrier.get("tracestate") if carrier is not None else None
    if isinstance(state, str) and len(state) <= 512:
        found["tracestate"] = state
    token = context.attach(extract(found))
    try:
        yield
    finally:
        context.detach(token)


def from_headers(app: Any) -> Any:
    """An ASGI app that runs `app` under the trace context of the request's `traceparent` header (the HTTP fast
    paths start their calls in the request's task, so their calls' spans are its children)."""

    async def traced(scope: Any, receive: Any, send: Any) -> None:
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope.get("headers", ())
            if name in (b"traceparent", b"tracestate")
        }
        with parent(carrier):
            await app(scope, receive, send)

    return traced
