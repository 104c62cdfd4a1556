"""Grep's prefilter (fs_sandbox/_prefilter.py) is exact: with it, the engine finds what it finds without it.

The prefilter searches for a rare byte every match must contain and lets RE2 look only at the lines that
hold it. Here it is forced on (whatever the byte's frequency) for generated patterns and texts, including
the characters whose case folding differs between RE2 and `re` or reaches outside ASCII (ß ẞ, İ ı, the
Kelvin sign, the long s), and the matches are compared with RE2's without it and with `re`'s (except where
fs_sandbox/_engine.py documents a difference).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from fs_sandbox import INDEX_SUFFIX, IndexBuilder, Sandbox, _engine, _index, _lines, _prefilter, _scan, open_file

EXAMPLES = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
PIECES = [
    "a", "A", "k", "K", "s", "S", "i", "I", "ß", "é", "_", "x", "7", "-", " ", "ab", "Ks", "\u212a", "\u017f",
    "\u0130", r"\d", r"\w", r"\s", r"\b", "[a-c]", "[^a]", "[^a\n]", ".", "^", "$", "(?:a|k)", "(?i:s)",
    "(?-i:k)", "x+", "a*", "_?", "k{2}", "[kK]+", r"\n", "(?s:.)", "é+",
]  # fmt: skip
PATTERNS = st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join)
TEXTS = st.lists(st.text(alphabet="aAkKsSiIß\u1e9eé_x7- \u212a\u017f\u0130\u0131", max_size=10), max_size=8).map(
    "\n".join
)


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefilter on for any byte however frequent, and never switching itself off."""
    monkeypatch.setattr(_prefilter, "MAX_SHARE", 1e9)
    monkeypatch.setattr(_prefilter, "_MIN_CANDIDATES", 1 << 60)


def spans(finder: _engine.Finder, data: bytes, raw: bytes | None) -> list[tuple[int, int]]:
    found, at = [], 0
    while at <= len(data):
        start, end = finder.find(data, at, len(data), raw)
        if start < 0:
            break
        found.append((start, end))
        at = end if end > start else start + 1
    return found


def runs_on_re2(pattern: str, case_sensitive: bool) -> bool:
    try:
        return not _engine.check(pattern, case_sensitive).backtracking
    except (re.error, ValueError):
        return False


def documented_difference(text: str, pattern: str, case_sensitive: bool) -> bool:
    """RE2's `\\d \\w \\s \\b` are ASCII; without case, İ and ı are not i (fs_sandbox/_engine.py)."""
    classes = re.search(r"\\[bBwWdDsS]", pattern) is not None and not text.isascii()
    dotted = set("iI\u0130\u0131")
    folding = bool(dotted & set(pattern)) and bool(dotted & set(text)) and (not case_sensitive or "(?i" in pattern)
    return classes or folding


@EXAMPLES
@given(pattern=PATTERNS, text=TEXTS, case_sensitive=st.booleans())
def test_with_the_prefilter_the_matches_are_those_without_it_and_res(
    forced: None, pattern: str, text: str, case_sensitive: bool
) -> None:
    assume(runs_on_re2(pattern, case_sensitive))
    data = text.encode()
    finder = _engine.Finder(pattern, case_sensitive, sample=data or b"-")
    plain = _engine.Finder(pattern, case_sensitive)
    assert plain.prefilter is None
    ours = spans(finder, data, data)
    assert ours == spans(plain, data, None)
    if documented_difference(text, pattern, case_sensitive):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = re.compile(pattern, re.MULTILINE | (0 if case_sensitive else re.IGNORECASE))
    if compiled.search(""):
        return  # a pattern that matches empty has no required byte: no prefilter; `re` steps differently
    expected = [(len(text[: m.start()].encode()), len(text[: m.end()].encode())) for m in compiled.finditer(text)]
    assert ours == expected


@pytest.mark.parametrize(
    ("pattern", "case_sensitive", "needles"),
    [
        ("NEEDLE_XYZZY", True, {b"N", b"E", b"D", b"L", b"_", b"X", b"Y", b"Z"}),
        ("needle_x", False, {b"nN", b"eE", b"dD", b"lL", b"_", b"xX"}),
        ("(?i)k-s", True, {b"-"}),  # k and s fold into the Kelvin sign and the long s: not searched as bytes
        (r"gamma\d{2}777 delta", True, {b"g", b"a", b"m", b"7", b" ", b"d", b"e", b"l", b"t"}),
        ("é", True, {b"\xc3", b"\xa9"}),
        ("x(?:ab)+y|z", True, set()),  # an alternation: nothing is required of every match
    ],
)
def test_the_bytes_every_match_must_contain(pattern: str, case_sensitive: bool, needles: set[bytes]) -> None:
    choices = _prefilter.required_bytes(pattern, case_sensitive)
    assert choices is not None
    assert {b"".join(choice) for choice in choices} == needles


@pytest.mark.parametrize(
    "pattern",
    [r"a\sb", "a[^x]b", r"a\nb", "(?s)a.b", "a(?s:.)b", r"a\Db", r"a\Wb", "[[:space:]]x", "x{,2}y", "a[\x00-\x20]b"],
)
def test_no_prefilter_where_a_match_may_span_lines_or_re2_reads_the_pattern_otherwise(pattern: str) -> None:
    assert _prefilter.required_bytes(pattern, True) is None


def test_frequent_bytes_get_no_prefilter_and_one_that_turns_frequent_switches_itself_off() -> None:
    sample = b"INFO alpha beta gamma delta\n" * 1000
    assert _prefilter.Prefilter.make("alpha", True, sample) is None
    chosen = _prefilter.Prefilter.make("alpha_X", True, sample)
    assert chosen is not None and chosen.needles == (b"_",)
    data = b"a_b\n" * 10_000 + b"alpha_X\n"
    finder = _engine.Finder("alpha_X", True, sample)
    assert finder.find(data, 0, len(data), data) == (40_000, 40_007)
    assert finder.prefilter is not None and not finder.prefilter.active


@pytest.fixture
def tiny_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_index, "SPACING", 5)
    monkeypatch.setattr(_lines, "WINDOW", 8)
    monkeypatch.setattr(_lines, "AHEAD", 6)


@EXAMPLES
@given(pattern=PATTERNS, text=TEXTS, case_sensitive=st.booleans(), max_matches=st.integers(1, 4))
@example(pattern="a*", text="7", case_sensitive=True, max_matches=2)  # an empty match at the end of the map
def test_grep_of_a_mapped_file_with_the_prefilter_is_grep_without_either(
    forced: None, tiny_windows: None, folder: Path, pattern: str, text: str, case_sensitive: bool, max_matches: int
) -> None:
    assume(runs_on_re2(pattern, case_sensitive))
    data = text.encode()
    builder = IndexBuilder()
    builder.feed(data)
    (folder / "f").write_bytes(data)
    (folder / ("f" + INDEX_SUFFIX)).write_bytes(builder.finish())
    with open_file(folder, "f") as opened:
        assert opened.index is not None
        args = (opened.fd, opened.size, pattern, case_sensitive, 1, 1, max_matches, 4, 200)
        assert _scan.grep(*args, opened.index) == _scan.grep(*args)  # mapped and prefiltered; read and counted


@pytest.mark.anyio
async def test_a_rare_needle_in_a_large_file_is_found_case_insensitively_through_the_worker(tmp_path: Path) -> None:
    lines = [f"2026-11-22 host{i % 7} INFO alpha beta gamma{i} op={i}\n" for i in range(200_000)]
    for at in (3, 99_999, 199_998):
        lines[at] = lines[at][:-1] + " Needle_Xyzzy\n"
    data = "".join(lines).encode()
    builder = IndexBuilder()
    builder.feed(data)
    (tmp_path / "log").write_bytes(data)
    (tmp_path / ("log" + INDEX_SUFFIX)).write_bytes(builder.finish())
    sample = data[: _prefilter.SAMPLE_BYTES] + data[len(data) // 2 :][: _prefilter.SAMPLE_BYTES]
    assert _prefilter.Prefilter.make("needle_xyzzy", False, sample) is not None  # the prefilter is on here
    sandbox = Sandbox(tmp_path, timeout=60)
    try:
        with anyio.fail_after(120):
            found = await sandbox.grep("log", "needle_xyzzy", before=0, after=0)
    finally:
        await sandbox.aclose()
    assert [line.number for block in found.blocks for line in block] == [4, 100_000, 199_999]
    assert all(line.text.endswith("Needle_Xyzzy") for block in found.blocks for line in block)


@EXAMPLES
@given(
    pattern=PATTERNS,
    lines=st.lists(st.tuples(TEXTS, st.sampled_from(["\n", "\r\n", "\r"])), max_size=6),
    case_sensitive=st.booleans(),
    max_matches=st.integers(1, 4),
)
def test_grep_in_the_window_buffer_with_the_prefilter_is_grep_without_it(
    monkeypatch: pytest.MonkeyPatch,
    folder: Path,
    pattern: str,
    lines: list[tuple[str, str]],
    case_sensitive: bool,
    max_matches: int,
) -> None:
    """Files with CR (or no index) are read into a buffer that is reused window after window."""
    assume(runs_on_re2(pattern, case_sensitive))
    monkeypatch.setattr(_lines, "PIECE", 3)
    monkeypatch.setattr(_lines, "WINDOW", 8)
    monkeypatch.setattr(_lines, "AHEAD", 6)
    monkeypatch.setattr(_lines, "BEHIND", 4)
    monkeypatch.setattr(_lines, "SPAN", 1)
    data = "".join(text + end for text, end in lines).encode()
    (folder / "g").write_bytes(data)
    with open_file(folder, "g") as opened:
        args = (opened.fd, opened.size, pattern, case_sensitive, 1, 0, max_matches, 4, 200)
        monkeypatch.setattr(_prefilter, "MAX_SHARE", 1e9)
        monkeypatch.setattr(_prefilter, "_MIN_CANDIDATES", 1 << 60)
        prefiltered = _scan.grep(*args)
        monkeypatch.setattr(_prefilter, "MAX_SHARE", -1.0)  # no byte is rare enough: no prefilter
        assert prefiltered == _scan.grep(*args)


@EXAMPLES
@given(
    text=st.text(alphabet="ab_\né\u212a", max_size=60),
    needle=st.text(alphabet="ab_\né\u212a", min_size=1, max_size=4),
    forced_on=st.booleans(),
)
@example(text="__aaaa", needle="_a", forced_on=True)  # a failed check at 0, the needle at 1
def test_the_literal_finder_of_anchor_slices_finds_what_bytes_find_finds(
    monkeypatch: pytest.MonkeyPatch, text: str, needle: str, forced_on: bool
) -> None:
    if forced_on:  # the rare-byte path whatever the byte's frequency, never switching to RE2
        monkeypatch.setattr(_prefilter, "MAX_SHARE", 1e9)
    data, wanted = text.encode(), needle.encode()
    find = _engine.literal_finder(wanted)
    hits, at = [], 0
    while (hit := find(data, at)) >= 0:
        hits.append(hit)
        at = hit + 1
    expected, at = [], 0
    while (hit := data.find(wanted, at)) >= 0:
        expected.append(hit)
        at = hit + 1
    assert hits == expected
