"""Balanced chunks with overlap: as few chunks as the budget allows, all about the same size."""

from __future__ import annotations

import math
from dataclasses import dataclass

from extraction.tokens import count_tokens

__all__ = ["Chunk", "chunk_text"]


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int  # 1-based
    start: int  # character offsets into the document
    end: int
    text: str


def chunk_text(text: str, budget_tokens: int, overlap_percent: float, *, tokens: int | None = None) -> list[Chunk]:
    """Cut `text` into chunks of at most about `budget_tokens` tokens, each overlapping the previous one.

    The count comes from the budget; then the text is divided evenly (in characters, scaled by the
    document's characters per token) so no chunk is a small remainder. Cuts move back to a line end
    when one is near.
    """
    if budget_tokens < 1:
        raise ValueError("the chunk budget must be at least one token")
    if not text:
        return [Chunk(1, 0, 0, "")]
    total = tokens if tokens is not None else count_tokens(text)
    if total <= budget_tokens:
        return [Chunk(1, 0, len(text), text)]
    overlap = min(max(overlap_percent, 0.0), 50.0) / 100
    chars_per_token = len(text) / max(total, 1)
    budget_chars = max(1, int(budget_tokens * chars_per_token * 0.95))  # 5 % slack for uneven density
    step_chars = max(1, int(budget_chars * (1 - overlap)))
    count = max(1, math.ceil((len(text) - budget_chars) / step_chars) + 1)
    size = math.ceil((len(text) + (count - 1) * budget_chars * overlap) / count)
    step = max(1, math.ceil((len(text) - size) / (count - 1))) if count > 1 else len(text)
    chunks = []
    for index in range(count):
        start = min(index * step, len(text))
        end = len(text) if index == count - 1 else min(len(text), start + size)
        if index and (newline := text.rfind("\n", start - size // 10, start)) > 0:
            start = newline + 1
        if end < len(text) and (newline := text.rfind("\n", end - size // 10, end)) > start:
            end = newline + 1
        chunks.append(Chunk(index + 1, start, end, text[start:end]))
    return chunks
