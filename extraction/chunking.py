"""Balanced chunks with overlap: as few chunks as the budget allows, all about the same size.

Chunks are byte ranges of the stored output, planned from its size and token count and read only when a
prompt needs them, so a chunk plan over any size of output costs a few small reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from extraction.source import Source, boundary
from extraction.tokens import estimate_source_tokens

__all__ = ["Chunk", "chunk_source", "read_chunk"]


@dataclass(frozen=True, slots=True)
class Chunk:
    index: int  # 1-based
    start: int  # byte offsets into the stored output, on character boundaries
    end: int


def chunk_source(
    source: Source, budget_tokens: int, overlap_percent: float, *, tokens: int | None = None
) -> list[Chunk]:
    """Cut the output into chunks of at most about `budget_tokens` tokens, each overlapping the previous one.

    The count comes from the budget; then the output is divided evenly (in bytes, scaled by its bytes per
    token) so no chunk is a small remainder. Cuts move back to a line end when one is near.
    """
    if budget_tokens < 1:
        raise ValueError("the chunk budget must be at least one token")
    length = source.size
    if not length:
        return [Chunk(1, 0, 0)]
    total = tokens if tokens is not None else estimate_source_tokens(source)[0]
    if total <= budget_tokens:
        return [Chunk(1, 0, length)]
    overlap = min(max(overlap_percent, 0.0), 50.0) / 100
    bytes_per_token = length / max(total, 1)
    budget_bytes = max(1, int(budget_tokens * bytes_per_token * 0.95))  # 5 % slack for uneven density
    step_bytes = max(1, int(budget_bytes * (1 - overlap)))
    count = max(1, math.ceil((length - budget_bytes) / step_bytes) + 1)
    size = math.ceil((length + (count - 1) * budget_bytes * overlap) / count)
    step = max(1, math.ceil((length - size) / (count - 1))) if count > 1 else length
    chunks = []
    for index in range(count):
        start = min(index * step, length)
        end = length if index == count - 1 else min(length, start + size)
        if index:
            start = _line_start(source, start, size // 10)
        if end < length:
            end = _line_start(source, end, size // 10, after=start)
        chunks.append(Chunk(index + 1, start, end))
    return chunks


def read_chunk(source: Source, chunk: Chunk) -> str:
    """The text of one chunk (blocking)."""
    return source.read(chunk.start, chunk.end - chunk.start).decode("utf-8", "replace")


def _line_start(source: Source, offset: int, reach: int, *, after: int = 0) -> int:
    """The start of the line `offset` is in, if it begins within `reach` bytes before it (and past `after`);
    else the character boundary at `offset`."""
    low = max(0, offset - reach)
    newline = source.read(low, offset - low).rfind(b"\n")
    if newline >= 0 and low + newline > after:
        return low + newline + 1
    return boundary(source, offset)
