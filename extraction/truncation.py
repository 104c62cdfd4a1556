"""The truncate strategy: head and tail within a token budget, with a marker for the middle."""

from __future__ import annotations

from extraction.source import Source, head_chars, measure, read_all, tail_chars
from extraction.tokens import exceeds, head_tokens, source_exceeds, tail_tokens
from extraction.wording import plural

__all__ = ["fallback_warning", "truncate", "truncate_source"]

_MAX_TOKEN_BYTES = 128


def truncate(text: str, *, threshold: int) -> str:
    """Head and tail within the threshold, with a marker saying how much of the middle was left out."""
    if not exceeds(text, threshold):
        return text
    budget = _budget(threshold)
    head, tail = head_tokens(text, budget), tail_tokens(text, budget)
    omitted = text[len(head) : len(text) - len(tail)]
    return head + _marker(len(omitted), omitted.count("\n")) + tail


def truncate_source(source: Source, *, threshold: int) -> str:
    """`truncate` of a stored output, read from its start, its end and one counting pass; blocking."""
    if not source_exceeds(source, threshold):
        return read_all(source)  # under the threshold, so small
    budget = _budget(threshold)
    span = budget * _MAX_TOKEN_BYTES // 16 + budget  # what head_tokens and tail_tokens look at
    head, tail = head_tokens(head_chars(source, span), budget), tail_tokens(tail_chars(source, span), budget)
    chars, newlines = measure(source)
    omitted = chars - len(head) - len(tail)
    if omitted <= 0:
        return head + _marker(0, 0) + tail
    return head + _marker(omitted, newlines - head.count("\n") - tail.count("\n")) + tail


def _budget(threshold: int) -> int:
    return max(1, threshold // 2 - 40)


def _marker(chars: int, lines: int) -> str:
    return (
        f"\n\n[... {plural(chars, 'character')} ({plural(lines, 'line')}) omitted by truncate; "
        'mode "slice" or Read/Grep reach them ...]\n\n'
    )


def fallback_warning(reason: str) -> str:
    return (
        f"WARNING: tool_output fallback to truncate ({reason}). "
        'Read, Grep and mode "slice" can still reach every part of the output.'
    )
