"""A stored output read in pieces gives exactly what the whole text gives: tokens, truncate, slices, evidence.

`extraction.source` decodes a few bytes at a time here, so every piece boundary falls inside characters,
CRLFs, anchors and quotes again and again.
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extraction import (
    TextSource,
    count_tokens,
    estimate_source_tokens,
    exceeds,
    file_exceeds,
    find_all,
    read_chars,
    source_exceeds,
    truncate,
    truncate_source,
)
from extraction import source as source_module
from extraction.provenance import verify
from extraction.source import head_chars, measure, tail_chars
from server.handles.retrieval import RetrievalError, SliceRequest, slice_text

EXAMPLES = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TEXT = st.text(alphabet="ab \n\r\té€😀", max_size=80)


@pytest.fixture
def tiny_source_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_module, "PIECE_BYTES", 5)


@EXAMPLES
@given(text=TEXT, needle=st.text(alphabet="ab é😀\n", min_size=1, max_size=3))
def test_every_occurrence_is_found_across_pieces_overlapping_ones_included(
    tiny_source_pieces: None, text: str, needle: str
) -> None:
    expected, at = [], text.find(needle)
    while at >= 0:
        expected.append(at)
        at = text.find(needle, at + 1)
    assert list(find_all(TextSource.of(text), needle)) == expected


@EXAMPLES
@given(text=TEXT, start=st.integers(0, 90), length=st.integers(0, 90), cap=st.integers(0, 90))
def test_a_character_range_and_the_total_are_those_of_the_text(
    tiny_source_pieces: None, text: str, start: int, length: int, cap: int
) -> None:
    piece, total = read_chars(TextSource.of(text), start, start + length, cap)
    wanted = text[start : start + length]
    assert total == len(text)
    assert piece == (wanted if len(wanted) <= cap else None)


@EXAMPLES
@given(text=TEXT, count=st.integers(0, 90))
def test_head_tail_and_measures_are_those_of_the_text(tiny_source_pieces: None, text: str, count: int) -> None:
    source = TextSource.of(text)
    assert head_chars(source, count) == text[:count]
    assert tail_chars(source, count) == (text[-count:] if count else "")
    assert measure(source) == (len(text), text.count("\n"))


def old_slice(text: str, request: SliceRequest, threshold: int) -> str:
    """tool_output's slice as it was over the whole text (the reference for formats and messages)."""
    if request.anchor is not None:
        if request.anchor == "":
            raise RetrievalError("`anchor` must not be empty.")
        if request.window < 0 or request.match_index < 0:
            raise RetrievalError("`window` and `match_index` must not be negative.")
        if exceeds(request.anchor, threshold):  # a slice holding it could never be answered: refused unsearched
            raise RetrievalError(
                f"The anchor alone is over the {threshold}-token threshold; use a shorter one (a few words)."
            )
        position, found = -1, 0
        while found <= request.match_index:
            position = text.find(request.anchor, position + 1)
            if position < 0:
                break
            found += 1
        if position < 0:
            seen = f" (it occurs {found} time{'s' if found != 1 else ''}; match_index is 0-based)" if found else ""
            raise RetrievalError(f"Anchor not found in content{seen}.")
        start = max(0, position - request.window // 2)
        end = min(len(text), position + len(request.anchor) + request.window // 2)
    else:
        assert request.start is not None and request.length is not None
        if request.start < 0 or request.length < 0:
            raise RetrievalError("`start` and `length` must not be negative.")
        if request.start >= len(text) and not (request.start == 0 and not text):
            raise RetrievalError(f"`start` {request.start} is past the end of the output ({len(text)} characters).")
        start, end = request.start, min(len(text), request.start + request.length)
    piece = text[start:end]
    if exceeds(piece, threshold):
        raise RetrievalError(
            f"The slice of {end - start} characters is over the {threshold}-token threshold; ask for a shorter one."
        )
    return f"[characters {start}-{end} of {len(text)}]\n{piece}"


SLICES = st.one_of(
    st.builds(SliceRequest, start=st.integers(-1, 90), length=st.integers(-1, 90)),
    st.builds(
        SliceRequest,
        anchor=st.text(alphabet="ab é😀\n", max_size=3),
        window=st.integers(-1, 40),
        match_index=st.integers(-1, 4),
    ),
)


def outcome(function: object, *args: object) -> str:
    try:
        return str(function(*args))  # type: ignore[operator]  # one of the two slice functions
    except RetrievalError as exc:
        return f"error: {exc}"


@EXAMPLES
@given(text=TEXT, request=SLICES, threshold=st.integers(1, 30))
def test_a_slice_read_in_pieces_answers_as_the_whole_text_did(
    tiny_source_pieces: None, text: str, request: SliceRequest, threshold: int
) -> None:
    streamed = outcome(lambda: slice_text(TextSource.of(text), request, threshold=threshold))
    assert streamed == outcome(lambda: old_slice(text, request, threshold))


WORDS = st.lists(st.sampled_from(["alpha", "béta", "γάμμα", "😀", "\n", " ", "  ", "\r\n", "x" * 40]), max_size=400)


@settings(max_examples=60, deadline=None)
@given(words=WORDS, limit=st.integers(0, 300))
def test_counting_a_stored_output_agrees_with_counting_its_text(words: list[str], limit: int) -> None:
    text = "".join(words)
    source = TextSource.of(text)
    assert source_exceeds(source, limit) == exceeds(text, limit) == (count_tokens(text) > limit)
    assert estimate_source_tokens(source) == (count_tokens(text), True)


def test_the_pieces_of_a_long_text_are_cut_where_the_whole_text_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "".join(f"line {i} with some words é😀\n" if i % 50 else "x" * 20_000 for i in range(3000))
    monkeypatch.setattr(source_module, "PIECE_BYTES", 7919)  # pieces end anywhere, spans run across them
    data = text.encode()
    with tempfile.TemporaryFile() as stored:
        stored.write(data)
        stored.flush()
        fd = stored.fileno()
        total = count_tokens(text)
        assert estimate_source_tokens(TextSource.of(text))[1] is False  # past 256 KiB: estimated
        assert file_exceeds(fd, len(data), total - 1) and not file_exceeds(fd, len(data), total)
        assert os.fstat(fd).st_size == len(data)


@pytest.mark.parametrize("lines", [10, 400, 3000])
def test_truncating_a_stored_output_gives_what_truncating_its_text_gives(tiny_source_pieces: None, lines: int) -> None:
    text = "".join(f"line {i:05d}: gamma δέλτα 😀 and more words\r\n" for i in range(lines))
    assert truncate_source(TextSource.of(text), threshold=500) == truncate(text, threshold=500)


def test_evidence_is_found_in_one_pass_first_exact_then_loose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_module, "PIECE_BYTES", 11)
    document = "intro\nthe disk   is\nfull\n" + "filler é\n" * 50 + "the disk is full\nend 😀 quote\n"
    quotes = ["the disk is full", "end 😀 quote", "the disk is full", "  no such words  ", "ab"]
    found = verify(quotes, TextSource.of(document))
    exact, emoji = document.index("the disk is full"), document.index("end 😀 quote")
    assert [(e.quote, e.start, e.end) for e in found] == [
        ("the disk is full", exact, exact + len("the disk is full")),  # the exact match, not the earlier loose one
        ("end 😀 quote", emoji, emoji + len("end 😀 quote")),
        ("no such words", None, None),
    ]
    only_loose = verify(["the disk is full"], TextSource.of("x the disk   is\nfull"))
    assert [(e.start, e.end) for e in only_loose] == [(2, len("x the disk   is\nfull"))]
