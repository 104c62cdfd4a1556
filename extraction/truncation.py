"""The truncate strategy: head and tail within a token budget, with a marker for the middle."""

from __future__ import annotations

from extraction.tokens import exceeds, head_tokens, tail_tokens

__all__ = ["fallback_warning", "truncate"]


def truncate(text: str, *, threshold: int) -> str:
    """Head and tail within the threshold, with a marker saying how much of the middle was left out."""
    if not exceeds(text, threshold):
        return text
    budget = max(1, threshold // 2 - 40)
    head, tail = head_tokens(text, budget), tail_tokens(text, budget)
    omitted = text[len(head) : len(text) - len(tail)]
    marker = (
        f"\n\n[... {len(omitted)} characters ({omitted.count(chr(10))} lines) omitted by truncate; "
        'mode "slice" or Read/Grep reach them ...]\n\n'
    )
    return head + marker + tail


def fallback_warning(reason: str) -> str:
    return (
        f"WARNING: tool_output fallback to truncate ({reason}). "
        'Read, Grep and mode "slice" can still reach every part of the output.'
    )
