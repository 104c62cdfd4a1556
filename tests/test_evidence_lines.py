"""What a model writes under EVIDENCE: that is no quote stays in the answer (small models write bullets there)."""

from __future__ import annotations

from extraction.provenance import split_evidence


def test_quote_lines_are_taken_and_other_evidence_lines_stay_in_the_answer() -> None:
    answer = 'The IP is 10.1.2.3\nEVIDENCE:\n> "TLS handshake failed with 10.1.2.3"\n- web-2 ERROR at 08:00:55\n\n'
    assert split_evidence(answer) == (
        "The IP is 10.1.2.3\n- web-2 ERROR at 08:00:55",
        ["TLS handshake failed with 10.1.2.3"],
    )


def test_an_answer_made_only_of_an_evidence_section_keeps_its_lines() -> None:
    assert split_evidence("EVIDENCE:\n1. user0004\n2. user0033") == ("1. user0004\n2. user0033", [])
