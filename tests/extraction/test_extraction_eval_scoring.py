"""bench/extraction_eval.py's scoring, without a model: facts count only when present and not drowned in wrong or
invented items, quotes only when verified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from extraction_cases import CASES, Case
from extraction_scoring import (
    Judged,
    answer_body,
    claims,
    count_quotes,
    facts_found,
    judge,
    score_tool_output,
    shaped_items,
    verified_answer,
)

from extraction import count_tokens

SHA = "ab" * 32
DOCUMENT = "2026-11-22T08:00:01 web-1 INFO ok\n2026-11-22T08:00:02 web-2 ERROR TLS handshake failed with 10.1.2.3\n"
LOG = "".join(f"2026-11-22T08:00:{i:02d} web-{i % 4} INFO ok\n" for i in range(9)) + "2026-11-22T08:00:09 OOM killed\n"
TIME = r"(?<!\d)\d{2}:\d{2}:\d{2}(?!\d)"
IP = r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?!\.?\d)"


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
    scored = score_tool_output(result, ["10.1.2.3"], "Which IP?", output=DOCUMENT, shape=(IP, TIME))
    assert scored.judged == Judged([], [], [])
    assert scored.fallback == "the model answered without the FINAL wrapper"
    assert scored.strategy == "truncate"


def test_a_tool_output_answer_is_scored_on_its_facts_and_described_quotes() -> None:
    body = '10.1.2.3\n\nEVIDENCE:\n> "web-2 ERROR TLS handshake failed with 10.1.2.3" (chars 55-100)'
    scored = score_tool_output(tool_output(body), ["10.1.2.3", "web-3"], "Which IP?", output=DOCUMENT, shape=(IP,))
    assert scored.judged == Judged(["10.1.2.3"], [], [])
    assert (scored.quotes.verified, scored.quotes.unverified, scored.fallback) == (1, 0, None)


def test_claimchecks_described_quotes_are_evidence_not_claims() -> None:
    body = 'the peer is unknown\n\nEVIDENCE:\n> "web-2 ERROR TLS handshake failed with 10.1.2.3" (chars 55-100)'
    scored = score_tool_output(tool_output(body), ["10.1.2.3"], "Which IP?", output=DOCUMENT, shape=(IP, TIME))
    assert scored.judged == Judged([], [], [])
    assert scored.judged.credited == []


def test_an_answers_claims_are_its_text_without_raw_or_described_quotes_but_with_its_other_evidence_lines() -> None:
    answer = (
        "10.1.2.3\nEVIDENCE:\n"
        '> "web-2 ERROR TLS handshake failed with 10.1.2.3"\n'
        '"web-1 INFO ok"\n'
        '> "web-9 ERROR x" (unverified: not in the stored output)\n'
        '> "web-2 ERROR" (chars 40-51)\n'
        "- the peer was 10.9.9.9"
    )
    assert claims(answer) == "10.1.2.3\n- the peer was 10.9.9.9"


def test_shaped_items_are_distinct_in_order_and_an_item_inside_a_longer_one_is_not_its_own() -> None:
    text = "see https://cdn.example/lib/1.2.3/x.js, then 2.0.1, again 2.0.1 and HTTPS://CDN.example/lib/1.2.3/x.js"
    shape = (r"https?://[^\s,]+", r"\d+\.\d+\.\d+")
    assert shaped_items(text, shape) == ["https://cdn.example/lib/1.2.3/x.js", "2.0.1"]
    assert shaped_items(text, ()) == []


def test_items_that_are_no_fact_are_wrong_when_the_output_holds_them_and_invented_when_it_does_not() -> None:
    answer = "The worker was killed at 08:00:09; earlier 08:00:03 looked odd, and 23:59:59 too."
    judged = judge(answer, ["08:00:09"], question="When was it killed?", output=LOG, shape=(TIME,))
    assert judged == Judged(["08:00:09"], ["08:00:03"], ["23:59:59"])
    assert judged.credited == []


def test_an_answer_listing_every_time_of_the_log_is_not_credited_with_the_one_it_was_asked_for() -> None:
    answer = ", ".join(f"08:00:{i:02d}" for i in range(10))
    judged = judge(answer, ["08:00:09"], question="When was a worker killed?", output=LOG, shape=(TIME,))
    assert judged.found == ["08:00:09"]
    assert judged.wrong == [f"08:00:{i:02d}" for i in range(9)]
    assert (judged.invented, judged.credited) == ([], [])


def test_facts_are_credited_while_wrong_and_invented_items_do_not_outnumber_them() -> None:
    question = "Which hosts appear?"
    judged = judge("web-0, web-1 and web-3", ["web-0", "web-1"], question=question, output=LOG, shape=(r"web-\d+",))
    assert judged == Judged(["web-0", "web-1"], ["web-3"], [])
    assert judged.credited == ["web-0", "web-1"]
    judged = judge("web-0 and web-7", ["web-0"], question=question, output=LOG, shape=(r"web-\d+",))
    assert (judged.invented, judged.credited) == (["web-7"], ["web-0"])


def test_an_item_holding_a_fact_or_inside_one_is_that_fact_and_an_item_of_the_question_is_no_claim() -> None:
    output = "src/auth/keystore.py:1412:def rotate_keys\nsrc/jobs/cron.py:17:x\ncommit auth: change 0\n"
    shape = (r"\bsrc/[\w/]+\.py\b", r"\b\d{2,}\b", r"change \d+")
    answer = "a/src/auth/keystore.py, line 1412 (change 0); not src/jobs/cron.py:17, not line 9000"
    judged = judge(
        answer, ["src/auth/keystore.py", "auth: change 0"], question="Line 9000?", output=output, shape=shape
    )
    assert judged == Judged(["src/auth/keystore.py"], ["1412", "src/jobs/cron.py", "17"], [])


def test_a_fact_only_quoted_as_evidence_is_not_found() -> None:
    answer = 'I could not tell.\nEVIDENCE:\n> "2026-11-22T08:00:02 web-2 ERROR TLS handshake failed with 10.1.2.3"'
    judged = judge(answer, ["10.1.2.3"], question="Which IP?", output=DOCUMENT, shape=(IP, TIME))
    assert judged == Judged([], [], [])


def _param(case: Case) -> Any:
    """A case as a parameter; the git cases make their output with `git`, a process."""
    return pytest.param(case, id=case.name, marks=[pytest.mark.subprocess] if case.name.startswith("git-") else [])


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_every_case_has_its_facts_in_its_output_and_not_in_its_question(case: Case, tmp_path: Path) -> None:
    output, facts = case.make(tmp_path, 0.2)
    assert facts
    assert facts_found(output, facts) == facts
    assert facts_found(case.question, facts) == []
    judged = judge("\n".join(facts), facts, question=case.question, output=output, shape=case.shape)
    assert judged == Judged(facts, [], [])


ONLY_FACTS_OF_THEIR_SHAPE = {"log-tls-ip", "log-hosts", "json-cursor", "git-authors"}


@pytest.mark.parametrize("case", [_param(case) for case in CASES if case.shape])
def test_a_cases_shape_finds_items_in_its_output_and_one_that_is_no_fact_is_judged_a_wrong_pick(
    case: Case, tmp_path: Path
) -> None:
    output, facts = case.make(tmp_path, 0.2)
    items = shaped_items(output, case.shape)
    assert items
    others = [
        item for item in items if judge(item, facts, question=case.question, output=output, shape=case.shape).wrong
    ]
    if case.name in ONLY_FACTS_OF_THEIR_SHAPE:  # there a wrong item can only be invented
        assert others == []
    else:
        assert others
        assert judge(others[0], facts, question=case.question, output=output, shape=case.shape).credited == []


@pytest.mark.parametrize("kind", ["wide table", "minified js", "diff"])
def test_the_new_kinds_hold_their_facts_only_past_what_the_baseline_sees(kind: str, tmp_path: Path) -> None:
    (case,) = [case for case in CASES if case.kind == kind]
    output, facts = case.make(tmp_path, 1.0)
    assert case.where in {"middle", "end"}
    assert 13_000 <= count_tokens(output) <= 15_500
    for fact in facts:
        assert output.find(fact) > 0.6 * len(output)


def test_the_eval_covers_every_kind_of_output_and_answers_past_the_start() -> None:
    assert len(CASES) >= 16
    kinds = {"log", "json", "table", "code search", "git", "wide table", "minified js", "diff"}
    assert {case.kind for case in CASES} >= kinds
    assert {case.where for case in CASES} >= {"middle", "end"}
