"""The tokenizer's vocabulary is lent while counts need it and given back when they stop."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from extraction import count_tokens, vocabulary

TEXT = "alpha beta gamma delta\n" * 500


@pytest.fixture
def idle_s(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    vocabulary.release()
    yield
    vocabulary.release()


def test_with_no_idle_time_the_vocabulary_is_dropped_when_the_count_ends_and_counts_stay_the_same(
    idle_s: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vocabulary, "IDLE_S", 0.0)
    first = count_tokens(TEXT)
    assert not vocabulary.loaded()
    assert count_tokens(TEXT) == first == 2500  # reloaded, same vocabulary


def test_a_count_inside_a_borrowing_keeps_the_vocabulary_until_the_borrowing_ends(
    idle_s: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vocabulary, "IDLE_S", 0.0)
    with vocabulary.borrowed() as encoding:
        count_tokens(TEXT)
        vocabulary.release()  # refused while a count runs
        assert vocabulary.loaded()
        assert len(encoding.encode_ordinary("hello world")) == 2
    assert not vocabulary.loaded()


def test_the_vocabulary_stays_through_a_burst_and_is_given_back_by_its_timer(
    idle_s: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vocabulary, "IDLE_S", 0.05)
    count_tokens(TEXT)
    assert vocabulary.loaded()  # the next output's estimate will not reload it
    timer = vocabulary._timer
    assert isinstance(timer, threading.Thread)
    while isinstance(timer, threading.Thread):  # the timer may wait again for the rest of the idle time
        timer.join(timeout=30)
        timer = vocabulary._timer
    assert not vocabulary.loaded()
