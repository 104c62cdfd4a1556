"""Small-model answers: lines under EVIDENCE: that are no quote stay in the answer; a missing wrapper is asked for."""

from __future__ import annotations

import anyio
import pytest

from extraction import Completion, Message, Usage
from extraction.provenance import split_evidence
from extraction.strategies import REMINDER_MARK, Policy, _ask_all


def test_quote_lines_are_taken_and_other_evidence_lines_stay_in_the_answer() -> None:
    answer = 'The IP is 10.1.2.3\nEVIDENCE:\n> "TLS handshake failed with 10.1.2.3"\n- web-2 ERROR at 08:00:55\n\n'
    assert split_evidence(answer) == (
        "The IP is 10.1.2.3\n- web-2 ERROR at 08:00:55",
        ["TLS handshake failed with 10.1.2.3"],
    )


def test_an_answer_made_only_of_an_evidence_section_keeps_its_lines() -> None:
    assert split_evidence("EVIDENCE:\n1. user0004\n2. user0033") == ("1. user0004\n2. user0033", [])


def test_a_quote_without_the_marker_or_on_the_evidence_line_is_taken() -> None:
    # as Qwen2.5-Coder-0.5B wrote them in bench/extraction_eval.py
    answer = 'ERROR TLS handshake failed\nEVIDENCE: "TLS handshake failed with 10.1.2.3"\n "disk full on /var/lib/db"'
    assert split_evidence(answer) == (
        "ERROR TLS handshake failed",
        ["TLS handshake failed with 10.1.2.3", "disk full on /var/lib/db"],
    )


@pytest.mark.anyio
async def test_an_unwrapped_answer_is_asked_again_with_the_wrapper_named_once() -> None:
    seen: list[str] = []

    class Unwrapping:
        model, context_window, max_output_tokens, supports_tools = "m", 4000, 100, False

        async def complete(self, messages: list[Message], *, max_tokens: int, tools: object = ()) -> Completion:
            seen.append(messages[-1].content)
            if len(seen) < 3:
                return Completion("10.1.2.3, but no wrapper")
            return Completion('<claimcheck-abcd1234-FINAL format="text">10.1.2.3')

    async def prompt() -> tuple[str, str]:
        return "system", "DOCUMENT CHUNK 1 of 1:\nx"

    with anyio.fail_after(5):
        answers = await _ask_all(Unwrapping(), Usage(), [prompt], "abcd1234", Policy(retries=2))
    assert answers == ["10.1.2.3"]
    assert REMINDER_MARK not in seen[0]
    assert seen[1] == seen[2] and seen[1].count(REMINDER_MARK) == 1
    assert "<claimcheck-abcd1234-FINAL" in seen[1]
