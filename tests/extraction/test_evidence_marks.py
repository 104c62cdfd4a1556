"""A quote copied as claimcheck showed the line — with the excerpt page's arrow, Read's gutter, Grep's gutter,
arrow or column — verifies as the line itself; text that only looks like a mark is not taken off."""

from __future__ import annotations

import pytest

from extraction.excerpts import excerpt
from extraction.marks import excerpt_line, grep_line, grep_snippet, read_line, without_marks
from extraction.provenance import Evidence, settle, verify
from extraction.source import TextSource

LINES = [f"2026-11-22T08:{i // 60:02d}:{i % 60:02d} web-{i % 3} INFO GET /api/{i} 200" for i in range(400)]
OOM = "2026-11-22T09:00:00 web-1 Warning OOMKilling pod batch-7 killed: memory limit 512Mi"
LINES.insert(250, OOM)
DOCUMENT = "\n".join(LINES) + "\n"
AT = DOCUMENT.index(OOM)


def test_a_line_of_the_excerpt_page_copied_with_its_arrow_verifies() -> None:
    page = excerpt(TextSource.of(DOCUMENT), "which pod was OOM killed", 1500).text
    shown = next(line for line in page.splitlines() if "OOMKilling" in line)
    assert shown == excerpt_line(OOM, chosen=True)  # the page shows it marked, as the model copies it
    assert verify([shown], TextSource.of(DOCUMENT)) == [Evidence(OOM, AT, AT + len(OOM))]


@pytest.mark.parametrize(
    "shown",
    [
        read_line(251, OOM),
        grep_line(251, OOM, match=True),
        grep_line(251, OOM, match=False),
        read_line(251, OOM).lstrip(),  # the padding lost in the copy
        excerpt_line(OOM, chosen=False),
    ],
    ids=["read", "grep match", "grep context", "read unpadded", "excerpt context"],
)
def test_a_line_copied_with_a_gutter_verifies_in_the_asked_form_and_as_a_bare_line(shown: str) -> None:
    found = [Evidence(OOM, AT, AT + len(OOM))]
    assert verify([shown], TextSource.of(DOCUMENT)) == found
    _, evidence = settle(f'The pod is batch-7.\nEVIDENCE:\n> "{shown}"', TextSource.of(DOCUMENT))
    assert evidence == found


def test_a_grep_column_snippet_copied_whole_verifies_as_its_text() -> None:
    snippet = OOM[20:60]
    assert verify([grep_snippet(251, 20, snippet)], TextSource.of(DOCUMENT)) == [Evidence(snippet, AT + 20, AT + 60)]


def test_a_quote_that_is_in_the_output_as_written_keeps_what_looks_like_a_gutter() -> None:
    document = "totals\n    12  apples sold on Monday\n"
    quote = "    12  apples sold on Monday"
    at = document.index("12  apples")
    assert verify([quote], TextSource.of(document)) == [Evidence(quote.strip(), at, len(document) - 1)]
    assert without_marks("apples → pears") == "apples → pears"  # an arrow inside a line is no mark


def test_a_quote_that_is_not_in_the_output_stays_unverified_and_is_shown_without_the_marks() -> None:
    made_up = "web-9 Warning OOMKilling pod never-was"
    assert verify([read_line(12, made_up)], TextSource.of(DOCUMENT)) == [Evidence(made_up, None, None)]
