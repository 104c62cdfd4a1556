"""Grep's engine: RE2 where it can, `re` (under the fixed time limit) where only backtracking will do, and the
differences from `re` that fs_sandbox/_engine.py documents, pinned; long lines shown as windows with columns.

Equality with `re` on a corpus of texts and patterns is tests/fs_sandbox/test_sandbox_streaming.py's hypothesis test.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import anyio
import pytest

from fs_sandbox import PatternError, Sandbox, _engine
from server.handles.files import _grep_text
from server.handles.own_registry import GrepArgs

pytestmark = pytest.mark.anyio


async def grep_numbers(folder: Path, text: str, pattern: str, *, case_sensitive: bool = True) -> list[int]:
    (folder / "f").write_text(text, encoding="utf-8")
    sandbox = Sandbox(folder, timeout=30)
    try:
        with anyio.fail_after(120):
            found = await sandbox.grep("f", pattern, before=0, after=0, case_sensitive=case_sensitive)
    finally:
        await sandbox.aclose()
    return [line.number for block in found.blocks for line in block if line.is_match]


def re_numbers(text: str, pattern: str, *, case_sensitive: bool = True) -> list[int]:
    """The lines where `re`'s matches over the whole text start (MULTILINE, as Grep searches)."""
    with warnings.catch_warnings():  # [[:alpha:]] is a "possible nested set" to `re`
        warnings.simplefilter("ignore")
        compiled = re.compile(pattern, re.MULTILINE | (0 if case_sensitive else re.IGNORECASE))
    return sorted({text.count("\n", 0, match.start()) + 1 for match in compiled.finditer(text)})


@pytest.mark.parametrize(
    ("text", "pattern", "case_sensitive", "ours"),
    [
        ("x٣\nx3\n", r"x\d", True, [2]),  # \d is ASCII digits: not ARABIC-INDIC DIGIT THREE
        ("é\ne\n", r"^\w$", True, [2]),  # \w is ASCII word characters
        ("a\u00a0b\na b\n", r"a\sb", True, [2]),  # \s is ASCII space: not NO-BREAK SPACE
        ("a\x1cb\na\x0bb\na b\n", r"a\sb", True, [3]),  # nor the separators \x1c-\x1f, nor \v: [\t\n\f\r ]
        ("éa\n-a\n", r"\ba", True, [1, 2]),  # \b is an ASCII word boundary: é is no word character for it
        ("İ\nı\ni\n", "i", False, [3]),  # without case, İ (U+0130) and ı (U+0131) are not i
        ("a:\nb\n", "[[:alpha:]]:", True, [1]),  # a POSIX class in RE2; in `re`, a set of the characters [:alph
    ],
)
async def test_the_documented_differences_from_re_are_as_documented(
    tmp_path: Path, text: str, pattern: str, case_sensitive: bool, ours: list[int]
) -> None:
    assert not _engine.check(pattern, case_sensitive).backtracking
    assert re_numbers(text, pattern, case_sensitive=case_sensitive) != ours
    assert await grep_numbers(tmp_path, text, pattern, case_sensitive=case_sensitive) == ours


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(ab)\1", "a backreference"),
        (r"a(?=b)", "a lookahead"),
        (r"a(?!c)", "a negative lookahead"),
        (r"(?<=a)b", "a lookbehind"),
        (r"(?<!x)b", "a negative lookbehind"),
        (r"(?>a)b", "an atomic group"),
        (r"ab\Z", "\\Z"),
        ("a++b", "a possessive repeat"),
        ("(a{0,1000}){0,1000}b", "a repeat too large for RE2"),
    ],
)
async def test_what_re2_cannot_run_runs_on_re_with_the_same_answers(
    tmp_path: Path, pattern: str, construct: str
) -> None:
    plan = _engine.check(pattern, True)
    assert plan.backtracking and plan.construct is not None and plan.construct.startswith(construct)
    text = "abab\nab\nxb\nac\nab"
    assert re_numbers(text, pattern)
    assert await grep_numbers(tmp_path, text, pattern) == re_numbers(text, pattern)


async def test_patterns_that_backtracked_past_the_old_limit_now_finish(tmp_path: Path) -> None:
    text = "a" * 50_000 + "b\n" + "x" * 30 + "y\n"
    assert await grep_numbers(tmp_path, text, "(a+)+$") == []
    assert await grep_numbers(tmp_path, text, "(x|x)*y") == [2]
    assert await grep_numbers(tmp_path, text, "(a|aa)+b") == [1]


async def test_an_invalid_pattern_is_refused_with_pythons_message(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x\n", encoding="utf-8")
    sandbox = Sandbox(tmp_path)
    try:
        with pytest.raises(PatternError, match="invalid regular expression: missing \\), unterminated subpattern"):
            await sandbox.grep("f", "(a")
    finally:
        await sandbox.aclose()


async def test_three_needles_on_one_5_mb_json_line_show_as_three_windows_with_their_columns(tmp_path: Path) -> None:
    records = [{"id": i, "name": f"item {i}", "tags": ["é", "x"], "note": "ok " * 8} for i in range(60_000)]
    for at, needle in ((7, "NEEDLE-ONE"), (30_000, "NEEDLE-TWO"), (59_990, "NEEDLE-THREE")):
        records[at]["name"] = needle
    text = json.dumps({"items": records}, ensure_ascii=False)
    assert "\n" not in text and len(text.encode()) > 5_000_000
    (tmp_path / "f").write_text(text, encoding="utf-8")
    sandbox = Sandbox(tmp_path, timeout=30)
    try:
        with anyio.fail_after(120):
            found = await sandbox.grep("f", "NEEDLE-[A-Z]+", max_line_chars=2000)
    finally:
        await sandbox.aclose()
    args = GrepArgs.model_validate({"file": "f", "regex": "NEEDLE-[A-Z]+"})
    shown = _grep_text(args, found, 10_000).splitlines()
    assert shown[0] == "1 matching line for 'NEEDLE-[A-Z]+' in f:"
    windows = shown[1:]
    assert len(windows) == 3
    for window, needle in zip(windows, ("NEEDLE-ONE", "NEEDLE-TWO", "NEEDLE-THREE"), strict=True):
        column = text.index(needle)
        prefix = f"     1 → col {column}: …"
        assert window.startswith(prefix) and window.endswith("…")
        around = window[len(prefix) : -1]
        assert around == text[column - 80 : column + len(needle) + 80]


async def test_matches_past_the_snippets_of_a_line_are_said_to_be_left_out(tmp_path: Path) -> None:
    text = " ".join(f"hit{i}" for i in range(2000))  # one line of about 13 000 characters, 2 000 matches
    (tmp_path / "f").write_text(text, encoding="utf-8")
    sandbox = Sandbox(tmp_path)
    try:
        found = await sandbox.grep("f", r"hit\d+")
    finally:
        await sandbox.aclose()
    (line,) = found.blocks[0]
    assert [snippet.column for snippet in line.snippets] == [m.start() for m in re.finditer(r"hit\d+", text)][:8]
    assert line.more_in_line
    args = GrepArgs.model_validate({"file": "f", "regex": r"hit\d+"})
    assert _grep_text(args, found, 10_000).splitlines()[-1] == (
        f"     1   [more matches on this line of {len(text)} characters not shown]"
    )


async def test_a_byte_that_is_not_utf8_is_no_character_to_dot(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"\x80\nab\n")  # `re` sees U+FFFD on line 1; RE2 sees no character there
    sandbox = Sandbox(tmp_path)
    try:
        found = await sandbox.grep("f", "^.$", before=0, after=0)
    finally:
        await sandbox.aclose()
    assert re_numbers("\ufffd\nab\n", "^.$") == [1]
    assert found.matches == 0
