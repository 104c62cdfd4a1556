"""The test command passes or fails alike on every run of a checkout (tests/conftest.py)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

drawn: list[list[int]] = []


@given(st.lists(st.integers()))
def draw(values: list[int]) -> None:
    drawn[-1].append(len(values))


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "repeatable") != "repeatable", reason="another profile")
def test_hypothesis_keeps_no_examples_in_the_checkout_and_draws_the_same_ones_on_every_run() -> None:
    for _ in range(2):
        drawn.append([])
        draw()
    assert settings.default is not None and settings.default.database is None
    assert drawn[0] == drawn[1]
