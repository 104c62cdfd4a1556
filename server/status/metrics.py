"""`GET /metrics`: this process's totals (`server.handles.meters`) in the Prometheus text format.

prometheus-client is the optional extra `[metrics]`, imported on the first scrape only: counting never touches it
(the totals are plain numbers), and a claimcheck nobody scrapes never loads it. Without it, `/metrics` answers
501 naming the extra. Each scrape reads the totals as they are then (a custom collector), so nothing is copied
on a call's path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

from server.distribution import install_command
from server.handles.meters import DURATION_BUCKETS, Meters

__all__ = ["MISSING", "MetricsUnavailable", "PrometheusText"]

MISSING = f"/metrics needs prometheus-client: {install_command('metrics')}"

States = Callable[[], list[dict[str, Any]]]


class MetricsUnavailable(RuntimeError):
    """prometheus-client is not installed."""


class PrometheusText:
    """Renders the totals, the downstreams' states and the live handles at each scrape."""

    def __init__(self, totals: Meters, servers: States | None, handles: Callable[[], int] | None) -> None:
        self.totals = totals
        self.servers = servers
        self.handles = handles
        self._registry: Any = None
        self.content_type = "text/plain; version=0.0.4; charset=utf-8"  # what generate_latest writes; every
        # Prometheus reads it (recent prometheus-client names 1.0.0, which Debian's 2.x does not know)

    def render(self) -> bytes:
        """The exposition text; `MetricsUnavailable` without prometheus-client."""
        if self._registry is None:
            try:
                from prometheus_client import CollectorRegistry, ProcessCollector
            except ImportError:
                raise MetricsUnavailable(MISSING) from None
            registry = CollectorRegistry(auto_describe=False)
            registry.register(_Collector(self))
            ProcessCollector(registry=registry)  # resident memory, CPU seconds, open files of this process
            self._registry = registry
        from prometheus_client import generate_latest

        return generate_latest(self._registry)

    def families(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        totals = self.totals
        calls = CounterMetricFamily(
            "claimcheck_calls", "Proxied tool calls finished, by how they ended", labels=["server", "tool", "outcome"]
        )
        for (server, tool, outcome), count in sorted(totals.calls.items()):
            calls.add_metric([server, tool, outcome], count)
        yield calls
        durations = HistogramMetricFamily(
            "claimcheck_call_duration_seconds", "Time from a call's start to its finish", labels=["server"]
        )
        bounds = [*(f"{bound:g}" for bound in DURATION_BUCKETS), "+Inf"]
        for server, (counts, total) in sorted(totals.durations.items()):
            cumulative = list(accumulate(counts))
            durations.add_metric([server], list(zip(bounds, cumulative, strict=True)), total[0])
        yield durations
        yield CounterMetricFamily(
            "claimcheck_stored_bytes", "Bytes of outputs stored whole under a handle", value=totals.stored_bytes
        )
        passthroughs = CounterMetricFamily(
            "claimcheck_passthrough_calls", "Calls answered for a claimcheck in front, without rules", labels=["server"]
        )
        for server, count in sorted(totals.passthroughs.items()):
            passthroughs.add_metric([server], count)
        yield passthroughs
        yield CounterMetricFamily("claimcheck_grep", "Grep searches over stored outputs", value=totals.grep_count)
        yield CounterMetricFamily(
            "claimcheck_grep_seconds", "Seconds spent in Grep over stored outputs", value=totals.grep_seconds
        )
        yield CounterMetricFamily(
            "claimcheck_extraction_calls", "LLM calls made by tool_output's extraction", value=totals.extraction_calls
        )
        tokens = CounterMetricFamily(
            "claimcheck_extraction_tokens", "Tokens of extraction's LLM calls", labels=["direction"]
        )
        tokens.add_metric(["input"], totals.extraction_input_tokens)
        tokens.add_metric(["output"], totals.extraction_output_tokens)
        yield tokens
        if self.handles is not None:
            yield GaugeMetricFamily("claimcheck_handles_alive", "Handles held by live sessions", value=self.handles())
        if self.servers is not None:
            states = self.servers()
            up = GaugeMetricFamily(
                "claimcheck_downstream_up", "1 while a downstream server is ready", labels=["server"]
            )
            restarts = CounterMetricFamily(
                "claimcheck_downstream_restarts", "Restarts of a downstream server", labels=["server"]
            )
            for state in states:
                up.add_metric([state["name"]], 1.0 if state.get("state") == "ready" else 0.0)
                restarts.add_metric([state["name"]], state.get("restarts") or 0)
            yield up
            yield restarts


class _Collector:
    def __init__(self, text: PrometheusText) -> None:
        self.text = text

    def collect(self) -> Iterator[Any]:
        return self.text.families()
