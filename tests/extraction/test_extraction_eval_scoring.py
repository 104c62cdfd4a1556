"""bench/extraction_eval.py's scoring, without a model: facts count only when present, quotes only when verified."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from extraction_cases import CASES, Case  # noqa: E402
from extraction_scoring import (  # noqa: E402
    answer_body,
    count_quotes,
    facts_found,
    score_tool_output,
    verified_answer,
)

SHA = "ab" * 32
DOCUMENT = "2026-11-22T08:00:01 web-1 INFO ok\n2026-11-22T08:00:02 web-2 ERROR TLS handshake failed with 10.1.2.3\n"


def tool_output(body: str, strategy: str = "read-grep") -> str:
    return (
        f"ABSTRACT FROM TOOL OUTPUT down__out WITH HANDLE session-1/2, STRATEGY:{strategy}:\n\n{body}"
        f"\n\nsource: sha256={SHA} bytes=1234 chunks=n/a model=qwen2.5-coder-0.5b-instruct-q4_k_m"
    )


def test_a_fact_is_counted_when_the_answer_contains_it() -> None:
    assert facts_found("The handshake failed with 10.1.2.3.", ["10.1.2.3"]) == ["10.1.2.3"]


def test_a_fact_absent_from_the_answer_is_not_counted() -> None:
    assert facts_found("The handshake failed with an unknown peer.", ["10.1.2.3"]) == []


def test_a_fact_is_matched_as_a_whole_word_not_inside_a_longer_one() -> None:
    answer = "peer 10.1.2.30 and 110.1.2.3, order 104200, user00231, Adam"
    assert facts_found(answer, ["10.1.2.3", "10420", "user0023", "Ada"]) == []
    assert facts_found("at 2026-11-22T08:01:37 web-2", ["08:01:37", "web-2"]) == ["08:01:37", "web-2"]


def test_a_fact_matches_across_case_and_spacing() -> None:
    assert facts_found("the oldest commit is AUTH:  change 0", ["auth: change 0"]) == ["auth: change 0"]


def test_a_fact_the_question_already_contains_is_never_counted() -> None:
    question = "Which host logged TLS handshake failed?"
    assert facts_found("web-2 logged TLS handshake failed", ["TLS handshake failed", "web-2"], question=question) == [
        "web-2"
    ]


def test_claimchecks_header_and_source_line_are_not_part_of_the_answer() -> None:
    result = tool_output("NO RELEVANT DATA FOUND\nonly INFO lines")
    assert answer_body(result) == "NO RELEVANT DATA FOUND\nonly INFO lines"
    assert facts_found(answer_body(result), ["1234", "qwen2.5-coder-0.5b-instruct-q4_k_m", SHA]) == []


def test_verified_and_unverified_quotes_are_counted_apart() -> None:
    answer = (
        "10.1.2.3\n\nEVIDENCE:\n"
        '> "web-2 ERROR TLS handshake failed with 10.1.2.3" (chars 55-100)\n'
        '> "web-9 ERROR the moon is made of cheese" (unverified: not in the stored output)'
    )
    quotes = count_quotes(answer)
    assert (quotes.verified, quotes.unverified) == (1, 1)


def test_an_unverified_quote_that_mentions_a_character_range_is_never_counted_as_verified() -> None:
    answer = '> "see (chars 1-5)" (unverified: not in the stored output)\n> "x" (chars 1-2) trailing words'
    quotes = count_quotes(answer)
    assert (quotes.verified, quotes.unverified) == (0, 1)


def test_a_quote_the_model_wrote_but_claimcheck_did_not_describe_counts_as_neither() -> None:
    quotes = count_quotes('EVIDENCE:\n> "web-2 ERROR TLS handshake failed with 10.1.2.3"')
    assert (quotes.verified, quotes.unverified) == (0, 0)


def test_a_direct_answers_quotes_are_checked_against_the_whole_output() -> None:
    answer = (
        "10.1.2.3\nEVIDENCE:\n"
        '> "web-2 ERROR TLS handshake failed with 10.1.2.3"\n'
        '> "web-2 ERROR TLS handshake failed with 10.9.9.9"'
    )
    described, evidence = verified_answer(answer, DOCUMENT)
    assert [item.start is not None for item in evidence] == [True, False]
    quotes = count_quotes(described)
    assert (quotes.verified, quotes.unverified) == (1, 1)


def test_a_truncate_fallback_finds_no_facts_even_when_the_tail_it_hands_over_holds_them() -> None:
    result = tool_output(
        "WARNING: tool_output fallback to truncate (the model answered without the FINAL wrapper). Read, Grep and "
        'mode "slice" can still reach every part of the output.\n\n' + DOCUMENT,
        strategy="truncate",
    )
    scored = score_tool_output(result, ["10.1.2.3"], "Which IP?")
    assert scored.found == []
    assert scored.fallback == "the model answered without the FINAL wrapper"
    assert scored.strategy == "truncate"


def test_a_tool_output_answer_is_scored_on_its_facts_and_described_quotes() -> None:
    body = '10.1.2.3\n\nEVIDENCE:\n> "web-2 ERROR TLS handshake failed with 10.1.2.3" (chars 55-100)'
    scored = score_tool_output(tool_output(body), ["10.1.2.3", "web-3"], "Which IP?")
    assert scored.found == ["10.1.2.3"]
    assert (scored.quotes.verified, scored.quotes.unverified, scored.fallback) == (1, 0, None)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_case_has_its_facts_in_its_output_and_not_in_its_question(case: Case, tmp_path: Path) -> None:
    output, facts = case.make(tmp_path, 0.2)
    assert facts
    assert facts_found(output, facts) == facts
    assert facts_found(case.question, facts) == []


def test_the_eval_covers_every_kind_of_output_and_answers_past_the_start() -> None:
    assert len(CASES) >= 12
    assert {case.kind for case in CASES} >= {"log", "json", "table", "code search", "git"}
    assert {case.where for case in CASES} >= {"middle", "end"}
