"""A prefilter for Grep's engine: a byte every match must contain, found with memchr, each line it is on checked by RE2.

RE2 reads every byte through its DFA unless the pattern starts with a literal (then it skips with memchr on
the literal's first byte, which may be a common one), and not at all for a case-folded literal. `grep` and
`rg` search for a rare byte of a literal the pattern requires instead. This does the same: the pattern is
parsed (Python's own parser: a pattern is Python syntax, and it compiles with `re` first) for the characters
every match must contain; of those, the byte (or, without case, the two bytes of an ASCII letter) least
frequent in a sample of the file is searched with `bytes.find` (memchr), and RE2 searches only the line
around each hit. It is exact, not a heuristic: it is used only when no match can span lines (nothing in
the pattern can match a newline), so every match lies within one line that holds the byte, and the first
match from any point is in the first line from there that holds it.

Conservative by construction: a construct the parse does not vouch for breaks the literal (a group with
its own flags, an alternation, an optional repeat), and patterns whose parse differs between Python and
RE2 (`[:` of a POSIX class, `{,n}`) get no prefilter. Without case only ASCII bytes are used, and not k or
s (RE2 folds the Kelvin sign and the long s into them). When candidates turn out frequent after all, the
prefilter switches itself off and RE2 searches alone. Stdlib only: the grep worker imports it.
"""

from __future__ import annotations

import importlib
import mmap
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["Prefilter", "required_bytes"]

_parser: Any = importlib.import_module("re._parser")  # sre_parse, as `re` itself parses
_C: Any = _parser  # the opcode and category constants, as the parser names them

_NEWLINE = 10
_NEWLINE_CATEGORIES = {"CATEGORY_SPACE", "CATEGORY_NOT_DIGIT", "CATEGORY_NOT_WORD", "CATEGORY_LINEBREAK"}
_NO_NEWLINE_CATEGORIES = {"CATEGORY_NOT_SPACE", "CATEGORY_DIGIT", "CATEGORY_WORD", "CATEGORY_NOT_LINEBREAK"}
_FOLDS_BEYOND_ASCII = frozenset(b"kKsS")  # RE2 folds U+212A (Kelvin) into k and U+017F (long s) into s
SAMPLE_BYTES = 64 << 10  # of the file, at its start and middle, to count how frequent each byte is
MAX_SHARE = 1 / 2048  # a byte more frequent than this in the sample: RE2 alone is faster
_MIN_CANDIDATES = 256  # checked before the prefilter judges itself ...
_MIN_GAP = 2048  # ... and switches off when candidates came closer than this many bytes on average

Searchable = bytes | bytearray | mmap.mmap


def required_bytes(pattern: str, case_sensitive: bool) -> list[tuple[bytes, ...]] | None:
    """What every match must contain: each entry is a choice of needles, one of which is in every match (a
    byte; without case, an ASCII letter's two cases). None when a match may span lines or the pattern is one
    the parse cannot vouch for."""
    if "[:" in pattern or "{," in pattern:  # a POSIX class or {,n}: RE2 parses these otherwise than Python
        return None
    try:
        parsed = _parser.parse(pattern, re.MULTILINE | (0 if case_sensitive else re.IGNORECASE))
    except Exception:  # any pattern the parser refuses simply gets no prefilter
        return None
    flags = parsed.state.flags
    if _may_match_newline(parsed, bool(flags & re.DOTALL)):
        return None
    ignore_case = bool(flags & re.IGNORECASE)
    return [choice for run in _required_runs(parsed) for char in run for choice in _variants(char, ignore_case)]


def _required_runs(items: Iterable[tuple[Any, Any]]) -> Iterable[list[int]]:
    """Runs of adjacent literal characters (code points) that every match of the sequence `items` contains."""
    run: list[int] = []
    for op, value in items:
        if op is _C.LITERAL:
            run.append(value)
            continue
        if run:
            yield run
            run = []
        if op is _C.SUBPATTERN:
            _group, add_flags, del_flags, inner = value
            if not add_flags and not del_flags:
                yield from _required_runs(inner)
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT):
            low, _high, inner = value
            if low >= 1:
                yield from _required_runs(inner)
    if run:
        yield run


def _variants(char: int, ignore_case: bool) -> list[tuple[bytes, ...]]:
    """The needles one required character gives: each of its UTF-8 bytes with case; without case, an ASCII
    character that only folds within ASCII, as its one or two bytes."""
    if 0xD800 <= char <= 0xDFFF:  # a lone surrogate: no UTF-8 bytes (RE2 refuses it anyway)
        return []
    if not ignore_case:
        return [(bytes([byte]),) for byte in chr(char).encode("utf-8")]
    if char >= 0x80 or char in _FOLDS_BEYOND_ASCII:
        return []
    letter = chr(char)
    return [(letter.lower().encode(), letter.upper().encode()) if letter.isalpha() else (letter.encode(),)]


def _may_match_newline(items: Iterable[tuple[Any, Any]], dotall: bool) -> bool:
    for op, value in items:
        if op is _C.LITERAL:
            hit = value == _NEWLINE
        elif op is _C.NOT_LITERAL:
            hit = value != _NEWLINE
        elif op is _C.ANY:
            hit = dotall
        elif op is _C.AT:
            hit = False
        elif op is _C.IN:
            hit = _set_has_newline(value)
        elif op is _C.SUBPATTERN:
            _group, add_flags, del_flags, inner = value
            inner_dotall = (dotall or bool(add_flags & re.DOTALL)) and not del_flags & re.DOTALL
            hit = _may_match_newline(inner, inner_dotall)
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT):
            hit = _may_match_newline(value[2], dotall)
        elif op is _C.BRANCH:
            hit = any(_may_match_newline(branch, dotall) for branch in value[1])
        else:  # anything else (it would not run on RE2 anyway): assume it may
            hit = True
        if hit:
            return True
    return False


def _set_has_newline(items: list[tuple[Any, Any]]) -> bool:
    negate = bool(items) and items[0][0] is _C.NEGATE
    has = False
    for op, value in items[1:] if negate else items:
        if op is _C.LITERAL:
            has = has or value == _NEWLINE
        elif op is _C.RANGE:
            has = has or value[0] <= _NEWLINE <= value[1]
        elif op is _C.CATEGORY and str(value) in _NO_NEWLINE_CATEGORIES:
            continue
        elif op is _C.CATEGORY and str(value) in _NEWLINE_CATEGORIES:
            has = True
        else:
            return True  # not understood: assume it may
    return has != negate


class Prefilter:
    """Finds the first match in data[at:stop] via the rarest required byte (see the module's text)."""

    def __init__(self, needles: tuple[bytes, ...]) -> None:
        self.needles = needles
        self.active = True
        self._candidates = 0
        self._gaps = 0
        self._data: object = None
        self._stop = -1
        self._known: list[tuple[int, int]] = []  # per needle: (searched from, first found there or -1)

    @classmethod
    def make(cls, pattern: str, case_sensitive: bool, sample: bytes) -> Prefilter | None:
        """A prefilter for `pattern`, or None when nothing it requires is rare enough in `sample`.

        (A run of common bytes searched with `bytes.find` was tried: CPython's Horspool search, 39 ms for the
        first 1000 hits of `777 delta` in the bench log, lost to RE2 searching the whole pattern, 28 ms.)"""
        choices = required_bytes(pattern, case_sensitive)
        if not choices:
            return None

        def count(choice: tuple[bytes, ...]) -> int:
            return sum(sample.count(needle) for needle in choice)

        best = min(dict.fromkeys(choices), key=count)  # each counted once (a pattern has at most 1000 characters)
        return cls(best) if count(best) <= max(1, len(sample)) * MAX_SHARE else None

    def forget(self) -> None:
        """The bytes searched change (the next window of the scanner's buffer): drop what was found in them."""
        self._data = None

    def candidate(self, data: Searchable, at: int, stop: int) -> int:
        """The first offset in data[at:stop] holding one of the needles, or -1 (what each needle's last search
        found is reused while it is still ahead, until `forget`)."""
        if data is not self._data or stop != self._stop:
            self._data, self._stop = data, stop
            self._known = [(stop, -1)] * len(self.needles)
        first = -1
        for i, needle in enumerate(self.needles):
            origin, found = self._known[i]
            if not (origin <= at and (found < 0 or found >= at)):
                found = data.find(needle, at, stop)
                self._known[i] = (at, found)
            if found >= 0 and (first < 0 or found < first):
                first = found
        return first

    def note(self, at: int, candidate: int) -> None:
        """Count a candidate found `candidate - at` bytes on; switch off when they come too close."""
        self._candidates += 1
        self._gaps += candidate - at
        if self._candidates >= _MIN_CANDIDATES and self._gaps < self._candidates * _MIN_GAP:
            self.active = False
