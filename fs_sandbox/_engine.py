"""The regex engine behind Grep: RE2 (linear time, no catastrophic backtracking), `re` only where RE2 cannot.

A pattern is Python syntax: it must compile with `re` first, so errors read as they always did. Then RE2
(google-re2) compiles it; a pattern RE2 refuses uses a construct only a backtracking engine has
(backreferences, lookaround, atomic groups, possessive repeats, `\\Z`, `(?x)`): it runs on `re` in the
worker, under the old fixed time limit (`Plan.backtracking`). Documented differences of RE2 from `re`,
pinned by tests/fs_sandbox/test_grep_engine.py: `\\d \\w \\s \\b` and their negations are ASCII only (`re` is Unicode
for text), and `\\s` is `[\\t\\n\\f\\r ]` (`re` also counts `\\v` and `\\x1c`-`\\x1f` as space);
`[[:alpha:]]` is a POSIX class in RE2 (a set of characters in `re`); without case, İ (U+0130) and ı (U+0131)
are not i; a byte that is not UTF-8 is no character (`.` does not match it; stored outputs are always UTF-8,
as claimcheck writes them).

Both engines search bytes (UTF-8) or text with MULTILINE on, so `^` and `$` work per line. Stdlib and re2
only: the grep worker imports it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from fs_sandbox import _prefilter, re2_compat
from fs_sandbox._prefilter import Prefilter, Searchable

MAX_PATTERN_CHARS = 1000
RE2_MAX_MEM = 64 << 20  # DFA memory per pattern: generous, so RE2 stays on its fast path

_UNSUPPORTED = (  # RE2's parse errors, named for the model
    ("invalid escape sequence: \\1", "a backreference (\\1 … \\9)"),
    ("invalid escape sequence: \\Z", "\\Z (for the end of a line, use $)"),
    ("invalid perl operator: (?=", "a lookahead (?=…)"),
    ("invalid perl operator: (?!", "a negative lookahead (?!…)"),
    ("invalid perl operator: (?<=", "a lookbehind (?<=…)"),
    ("invalid perl operator: (?<!", "a negative lookbehind (?<!…)"),
    ("invalid perl operator: (?>", "an atomic group (?>…)"),
    ("invalid perl operator: (?P=", "a named backreference (?P=…)"),
    ("invalid perl operator: (?(", "a conditional group (?(…)…)"),
    ("bad repetition operator", "a possessive repeat (*+, ++, ?+)"),
    ("invalid repetition size", "a repeat too large for RE2 (a count over 1000, or counted repeats nested)"),
)


@dataclass(frozen=True, slots=True)
class Plan:
    """How a pattern will be searched: by RE2, or by `re` because it uses `construct`."""

    backtracking: bool
    construct: str | None = None


def check(pattern: str, case_sensitive: bool) -> Plan:
    """The plan for `pattern`; `ValueError` (or `re.error`) when it is not a valid Python pattern."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    _python(pattern, case_sensitive)
    if not re2_compat.AVAILABLE:  # pragma: no cover
        return Plan(True, "any construct (google-re2 is not installed)")
    compiled = _re2_compile(pattern, case_sensitive)
    if compiled.ok():
        return Plan(False)
    error = compiled.error().decode("utf-8", "replace")
    construct = next((name for text, name in _UNSUPPORTED if error.startswith(text)), f"a construct ({error})")
    return Plan(True, construct)


def _python(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    with warnings.catch_warnings():  # "possible nested set" and the like: the pattern is still valid
        warnings.simplefilter("ignore")
        return re.compile(pattern, re.MULTILINE | (0 if case_sensitive else re.IGNORECASE))


def _re2_compile(pattern: str, case_sensitive: bool) -> re2_compat.Program:
    encoded = ("(?m)" + pattern).encode("utf-8", "surrogatepass")
    return re2_compat.compiled(encoded, case_sensitive=case_sensitive, max_mem=RE2_MAX_MEM)


def literal_finder(needle: bytes) -> Callable[[bytes, int], int]:
    """`find(data, at)`: where `needle` next occurs in `data` from `at`, or -1.

    RE2's literal search skips with memchr on the needle's first byte, which may be on every line. So, as
    Grep's prefilter does, the needle's byte rarest in the first data searched (its first 64 KiB) is
    searched with memchr instead and each hit checked in place, while hits stay rarer than one per 2 KiB;
    else RE2 (or `bytes.find` without google-re2, or for a needle too long for RE2 to compile: about 1 MiB)."""
    if not re2_compat.AVAILABLE:  # pragma: no cover
        return lambda data, at: data.find(needle, at)
    compiled = re2_compat.compiled(needle, literal=True)
    if not compiled.ok():  # "pattern too large": its Match would find nothing, not even "no match"
        return lambda data, at: data.find(needle, at)
    rare: list[tuple[bytes, int]] = []  # (the rare byte, where it is in the needle), once chosen
    judged = [0, 0]  # hits checked, bytes skipped to reach them

    search = re2_compat.searcher(compiled)

    def engine(data: bytes, at: int) -> int:
        return search(data, at, len(data))[0][0]

    def find(data: bytes, at: int) -> int:
        if not rare:
            sample = data[: _prefilter.SAMPLE_BYTES]
            value = min(set(needle), key=lambda value: sample.count(value))
            share = sample.count(value) / max(1, len(sample))
            rare.append((bytes([value]), needle.index(value)) if share <= _prefilter.MAX_SHARE else (b"", 0))
        byte, shift = rare[0]
        while byte:
            hit = data.find(byte, at + shift)
            if hit < 0:
                return -1
            judged[0] += 1
            judged[1] += hit - at - shift
            if data.startswith(needle, hit - shift):
                return hit - shift
            at = hit - shift + 1
            if judged[0] >= 256 and judged[1] < judged[0] * 2048:  # hits too close: RE2 from here on
                rare[0] = (b"", 0)
                break
        return engine(data, at)

    return find


class Finder:
    """Searches bytes for a pattern: `find(data, at, stop)` is the (start, end) of the first match in
    data[at:stop] (the bytes around it are context for `^`, `$` and `\\b`), or (-1, -1).

    Given a `sample` of the file, a `Prefilter` on a rare byte every match contains may skip to the lines
    worth RE2's time (`find`'s `raw`: the same bytes as `data`, searchable with memchr)."""

    def __init__(self, pattern: str, case_sensitive: bool, sample: bytes = b"") -> None:
        self.plan = check(pattern, case_sensitive)
        self._regexp = None if self.plan.backtracking else re2_compat.searcher(_re2_compile(pattern, case_sensitive))
        self.compiled = _python(pattern, case_sensitive)  # for the backtracking plan, on decoded text
        self.prefilter = Prefilter.make(pattern, case_sensitive, sample) if sample and self._regexp else None

    def find(
        self, data: bytes | bytearray | memoryview, at: int, stop: int, raw: Searchable | None = None
    ) -> tuple[int, int]:
        regexp = self._regexp
        assert regexp is not None
        prefilter = self.prefilter
        if raw is None or prefilter is None or not prefilter.active:
            return regexp(data, at, stop)[0]
        while at < stop:  # no match spans lines: RE2 on each line that holds a candidate byte
            candidate = prefilter.candidate(raw, at, stop)
            if candidate < 0:
                break
            prefilter.note(at, candidate)
            line = raw.rfind(b"\n", at, candidate) + 1 or at
            end = raw.find(b"\n", candidate, stop)
            end = stop if end < 0 else end
            span = regexp(data, line, end)[0]
            if span[0] >= 0:
                return span
            at = end + 1
            if not prefilter.active:
                return self.find(data, min(at, stop), stop)
        return (-1, -1)
