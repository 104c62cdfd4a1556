"""What this process counts for `/metrics`: plain integers and floats, bumped on the calls' own path.

Counting is a dict update and a bisect, with nothing imported: prometheus-client is imported by the status API
on the first scrape only (`server.status.metrics`), which reads these totals. One set per running proxy (its
sessions count into it), so two proxies in one process count apart.

    calls         (server, tool, outcome) → finished calls; outcome is one of OUTCOMES
    durations     server → a histogram of finished calls' durations (DURATION_BUCKETS, seconds)
    stored_bytes  bytes of outputs stored under a handle (over the size rule, or handed out)
    grep          Grep searches over stored outputs and the seconds they took
    extraction    LLM calls of `tool_output`'s extraction and their input and output tokens
    passthroughs  calls answered for a claimcheck in front without rules (`fast_passthrough`): no `Call`
"""

from __future__ import annotations

from bisect import bisect_left

from server.handles.outcome import Failed, Lost, Outcome, Stored

__all__ = ["DURATION_BUCKETS", "OUTCOMES", "Meters", "outcome_of"]

OUTCOMES = ("inline", "stored", "handed_off", "failed", "cancelled")
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


def outcome_of(status: str, outcome: Outcome | None, handed_out: bool) -> str:
    """How a finished call ended, as `/metrics` names it: cancelled; failed (no result, or an output over the size
    rule that could not be stored); stored (its output over the size rule, kept whole under a handle); handed_off
    (answered with a handle by the time rule or `background`, its output under the size rule); or inline."""
    if status == "cancelled":
        return "cancelled"
    if isinstance(outcome, Stored):
        return "stored"
    if isinstance(outcome, Failed | Lost) or status == "failed":
        return "failed"
    return "handed_off" if handed_out else "inline"


class Meters:
    """A proxy's totals; every method is a few dict and float operations."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str, str], int] = {}
        self.durations: dict[str, tuple[list[int], list[float]]] = {}  # bucket counts (+Inf last), [sum]
        self.stored_bytes = 0
        self.grep_count = 0
        self.grep_seconds = 0.0
        self.extraction_calls = 0
        self.extraction_input_tokens = 0
        self.extraction_output_tokens = 0
        self.passthroughs: dict[str, int] = {}

    def finished(self, server: str, tool: str, outcome: str, seconds: float, stored_bytes: int) -> None:
        """Count a call that has just finished (`Call.finish`)."""
        key = (server, tool, outcome)
        calls = self.calls
        calls[key] = calls.get(key, 0) + 1
        self.stored_bytes += stored_bytes
        histogram = self.durations.get(server)
        if histogram is None:
            histogram = self.durations[server] = ([0] * (len(DURATION_BUCKETS) + 1), [0.0])
        histogram[0][bisect_left(DURATION_BUCKETS, seconds)] += 1
        histogram[1][0] += seconds

    def grepped(self, seconds: float) -> None:
        self.grep_count += 1
        self.grep_seconds += seconds

    def extracted(self, input_tokens: int, output_tokens: int) -> None:
        self.extraction_calls += 1
        self.extraction_input_tokens += input_tokens
        self.extraction_output_tokens += output_tokens

    def passed_through(self, server: str) -> None:
        self.passthroughs[server] = self.passthroughs.get(server, 0) + 1
