from __future__ import annotations

import os
from collections.abc import Generator

import pytest
from hypothesis import settings

from tests.support.spawning import SpawnGuard

# Tests are grouped by what they test: one folder per wing of server/ (upstream, status, handles, downstream),
# extraction/ and fs_sandbox/, e2e/ for whole-process runs, and this folder for the root modules. What more than
# one test module needs lives in tests/support/ (its fixtures in tests/support/fixtures.py, registered here);
# no test module imports another.
pytest_plugins = ["tests.support.fixtures"]

# The status API is off unless a test turns it on: claimcheck processes the tests start inherit this,
# so no test binds port 5165 or writes discovery files into the developer's state directory.
os.environ["CLAIMCHECK_API_ENABLED"] = "false"

# Hypothesis draws the same examples on every run and keeps none in the checkout: the test command passes or
# fails alike each time, and an example one run found (saved under .hypothesis/) cannot fail every later run
# of that checkout after the test or its oracle changed. A failure prints its example for an `@example`.
# `HYPOTHESIS_PROFILE=explore` draws new examples each run, for looking for bugs.
settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

_BOTH_FAST_PATH_MODES = ("test_interop_", "test_conformance", "test_forwarding")
"""Modules whose tests run twice, with claimcheck's fast path forced on and forced off."""

_SPAWNING = SpawnGuard()
"""A test not marked `subprocess` may not start a program: `pytest -m "not subprocess"` is in process."""


def pytest_configure(config: pytest.Config) -> None:
    _SPAWNING.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    _SPAWNING.uninstall()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    with _SPAWNING.refused(item.get_closest_marker("subprocess") is None):
        return (yield)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    name = metafunc.module.__name__.rpartition(".")[2]
    if "fast_path" in metafunc.fixturenames and name.startswith(_BOTH_FAST_PATH_MODES):
        metafunc.parametrize("fast_path", ["on", "off"], indirect=True, scope="module", ids=["fast-on", "fast-off"])
