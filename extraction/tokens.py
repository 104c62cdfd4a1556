"""Token counting with cl100k (offline vocabulary): the one counter behind the size rule and extraction.

A 10 MB output must be decided without encoding it whole (~1 s): two O(1) length bounds settle most
cases, and the rest is counted in pieces with an early exit at the limit. A stored output is counted
the same way straight from its file (`source_exceeds`, `estimate_source_tokens`), a piece at a time, cut
exactly where the in-memory count cuts, so both give the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from extraction.source import Descriptor, Source, text_pieces
from extraction.vocabulary import ENCODING_NAME, borrowed

__all__ = [
    "ENCODING_NAME",
    "count_tokens",
    "estimate_file_tokens",
    "estimate_source_tokens",
    "estimate_tokens",
    "exceeds",
    "exceeds_by_length",
    "file_exceeds",
    "head_tokens",
    "source_exceeds",
    "tail_tokens",
]

_MAX_TOKEN_BYTES = 128  # the longest cl100k token
_PIECE_CHARS = 16 * 1024
_EXACT_LIMIT_CHARS = 1 << 20
_EXACT_FILE_BYTES = 256 * 1024  # a stored output is counted exactly up to here, and estimated past it
_SAMPLE_CHARS = 64 * 1024
_SAMPLES = 8
_FILE_SAMPLE_BYTES = 16 * 1024  # a stored output's estimate encodes 8 of these (~15 ms), not 8 x 64 KiB (~60 ms)


def _pieces(text: str) -> list[tuple[int, int]]:
    """Spans of about `_PIECE_CHARS`, cut after a newline or space where one is near, so words stay whole."""
    spans, start, end = [], 0, len(text)
    while start < end:
        stop = _stop(text, start, end)
        spans.append((start, stop))
        start = stop
    return spans


def _stop(text: str, start: int, end: int) -> int:
    """Where the span from `start` ends in a text of `end` characters."""
    stop = min(end, start + _PIECE_CHARS)
    if stop < end:
        cut = text.rfind("\n", start, stop)
        if cut <= start:
            cut = text.rfind(" ", start, stop)
        if cut > start:
            stop = cut
    return stop


def _streamed_pieces(texts: Iterable[str]) -> Iterator[str]:
    """The pieces `_pieces` cuts from the joined `texts`, without joining them.

    A span is decided once more than `_PIECE_CHARS` characters follow its start (then it is cut exactly
    as in the whole text); the rest waits for the next text, or for the end.
    """
    buffer = ""
    for text in texts:
        buffer += text
        start = 0
        while len(buffer) - start > _PIECE_CHARS:
            stop = _stop(buffer, start, len(buffer))
            yield buffer[start:stop]
            start = stop
        buffer = buffer[start:]
    for start, stop in _pieces(buffer):
        yield buffer[start:stop]


def exceeds_by_length(text: str, limit: int) -> bool | None:
    """`exceeds(text, limit)` when the length bounds alone decide it (no tokenizer, O(1) for ASCII), else None."""
    # A token covers 1 to 128 bytes of UTF-8, and a character is 1 to 4 bytes (exactly 1 in ASCII).
    if len(text) * 4 <= limit or (len(text) <= limit and text.isascii()):
        return False
    if len(text) > limit * _MAX_TOKEN_BYTES:
        return True
    return None


def exceeds(text: str, limit: int) -> bool:
    """Whether `text` has more than `limit` tokens, counting only as far as needed."""
    decided = exceeds_by_length(text, limit)
    if decided is not None:
        return decided
    total = 0
    with borrowed() as encoding:
        for start, stop in _pieces(text):
            total += len(encoding.encode_ordinary(text[start:stop]))
            if total > limit:
                return True
    return False


def count_tokens(text: str) -> int:
    """The exact token count (piecewise; within a few thousandths of a percent of a whole-string encode)."""
    with borrowed() as encoding:
        return sum(len(encoding.encode_ordinary(text[start:stop])) for start, stop in _pieces(text))


def estimate_tokens(text: str) -> tuple[int, bool]:
    """(tokens, exact): exact up to 1 MiB of text, else extrapolated from evenly spread samples."""
    if len(text) <= _EXACT_LIMIT_CHARS:
        return count_tokens(text), True
    step = len(text) // _SAMPLES
    sampled_chars = sampled_tokens = 0
    with borrowed():  # loaded once for all the samples
        for i in range(_SAMPLES):
            sample = text[i * step : i * step + _SAMPLE_CHARS]
            sampled_chars += len(sample)
            sampled_tokens += count_tokens(sample)
    return round(sampled_tokens * len(text) / sampled_chars), False


def head_tokens(text: str, n: int) -> str:
    """The longest prefix of `text` made of (about) its first `n` tokens."""
    with borrowed() as encoding:
        tokens = encoding.encode_ordinary(text[: n * _MAX_TOKEN_BYTES // 16 + n])
        return encoding.decode_bytes(tokens[:n]).decode("utf-8", "ignore")


def tail_tokens(text: str, n: int) -> str:
    """The longest suffix of `text` made of (about) its last `n` tokens."""
    with borrowed() as encoding:
        tokens = encoding.encode_ordinary(text[-(n * _MAX_TOKEN_BYTES // 16 + n) :] if n else "")
        return encoding.decode_bytes(tokens[-n:] if n else []).decode("utf-8", "ignore")


def source_exceeds(source: Source, limit: int) -> bool:
    """`exceeds` for a stored output, reading only as far as needed."""
    if source.size <= limit:  # a token is at least one byte
        return False
    if source.size > limit * _MAX_TOKEN_BYTES:
        return True
    total = 0
    with borrowed() as encoding:
        for piece in _streamed_pieces(text_pieces(source)):
            total += len(encoding.encode_ordinary(piece))
            if total > limit:
                return True
    return False


def estimate_source_tokens(source: Source) -> tuple[int, bool]:
    """`estimate_tokens` for a stored output: exact up to 256 KiB, else extrapolated from spread samples."""
    size = source.size
    if size <= _EXACT_FILE_BYTES:
        with borrowed() as encoding:
            return sum(len(encoding.encode_ordinary(piece)) for piece in _streamed_pieces(text_pieces(source))), True
    step = size // _SAMPLES
    sampled_bytes = sampled_tokens = 0
    with borrowed():  # loaded once for all the samples
        for i in range(_SAMPLES):
            block = source.read(i * step, _FILE_SAMPLE_BYTES)
            sampled_bytes += len(block)
            sampled_tokens += count_tokens(block.decode("utf-8", "ignore"))
    return round(sampled_tokens * size / max(sampled_bytes, 1)), False


def file_exceeds(fd: int, size: int, limit: int) -> bool:
    """`exceeds` for the first `size` bytes of an open file, reading only as far as needed."""
    return source_exceeds(Descriptor(fd, size), limit)


def estimate_file_tokens(fd: int, size: int) -> tuple[int, bool]:
    """`estimate_tokens` for the first `size` bytes of an open file."""
    return estimate_source_tokens(Descriptor(fd, size))
