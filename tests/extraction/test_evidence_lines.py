"""Small-model answers: evidence lines in any markup are tried as quotes and kept in the answer when they are none;
an answer without the wrapper is read as it is; only an empty one is asked again."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from extraction import Completion, Message, ToolSpec, Usage
from extraction.provenance import Evidence, settle, split_evidence
from extraction.source import TextSource
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


DOCUMENT = "2026-11-22T08:08:05 web-1 ERROR OOM killed worker 7\n2026-11-22T08:08:06 web-2 INFO GET /api 200\n"
OOM = "2026-11-22T08:08:05 web-1 ERROR OOM killed worker 7"


def test_an_evidence_bullet_copied_from_the_output_becomes_a_verified_quote_and_the_rest_stays() -> None:
    answer = f"Killed at 08:08:05.\nEVIDENCE:\n- {OOM}\n- the time is 08:08:05\n* `{OOM[:20]}made up`"
    text, evidence = settle(answer, TextSource.of(DOCUMENT))
    assert evidence == [Evidence(OOM, 0, len(OOM))]
    assert text == f"Killed at 08:08:05.\n- the time is 08:08:05\n* `{OOM[:20]}made up`"


def test_an_answer_without_quotes_that_copies_an_output_line_is_its_own_evidence() -> None:
    text, evidence = settle(f"The worker died here:\n{OOM}", TextSource.of(DOCUMENT))
    assert text == f"The worker died here:\n{OOM}"  # the line stays the answer
    assert evidence == [Evidence(OOM, 0, len(OOM))]


def test_asked_form_quotes_are_verified_or_flagged_and_answer_lines_are_not_tried_beside_them() -> None:
    answer = f'{OOM}\nEVIDENCE:\n> "web-2 INFO GET /api 200"\n> "web-9 ERROR never happened"'
    text, evidence = settle(answer, TextSource.of(DOCUMENT))
    at = DOCUMENT.index("web-2 INFO")
    assert text == OOM
    assert evidence == [
        Evidence("web-2 INFO GET /api 200", at, at + 23),
        Evidence("web-9 ERROR never happened", None, None),
    ]


class Answering:
    model, context_window, max_output_tokens, supports_tools = "m", 4000, 100, False

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.seen: list[str] = []

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        self.seen.append(messages[-1].content)
        return Completion(self.answers[min(len(self.seen), len(self.answers)) - 1])


async def prompt() -> tuple[str, str]:
    return "system", "DOCUMENT CHUNK 1 of 1:\nx"


@pytest.mark.anyio
async def test_an_unwrapped_answer_is_taken_as_it_is_at_the_first_request() -> None:
    model = Answering("The IP is 10.1.2.3 (no wrapper)", "never asked")
    with anyio.fail_after(5):
        answers = await _ask_all(model, Usage(), [prompt], "abcd1234", Policy(retries=2))
    assert answers == ["The IP is 10.1.2.3 (no wrapper)"]
    assert len(model.seen) == 1


@pytest.mark.anyio
async def test_an_empty_answer_is_asked_again_with_the_wrapper_named_once() -> None:
    model = Answering("", '<claimcheck-abcd1234-FINAL format="text"></claimcheck-abcd1234-FINAL>', "10.1.2.3")
    with anyio.fail_after(5):
        answers = await _ask_all(model, Usage(), [prompt], "abcd1234", Policy(retries=2))
    assert answers == ["10.1.2.3"]
    assert REMINDER_MARK not in model.seen[0]
    assert model.seen[1] == model.seen[2] and model.seen[1].count(REMINDER_MARK) == 1
    assert "<claimcheck-abcd1234-FINAL" in model.seen[1]
