from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import mcp.client.stdio
import pytest
from hypothesis import settings

from server.config import FAST_PATH_ENV

# Tests are grouped by what they test: one folder per wing of server/ (upstream, status, handles, downstream),
# extraction/ and fs_sandbox/, e2e/ for whole-process runs, and this folder for the root modules. The helpers
# beside this file, and a test module another one reuses, are importable from every folder.
_TESTS = Path(__file__).resolve().parent
for _folder in [*sorted(p for p in _TESTS.iterdir() if p.is_dir() and p.name.isidentifier()), _TESTS]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fast_path" in metafunc.fixturenames and metafunc.module.__name__.startswith(_BOTH_FAST_PATH_MODES):
        metafunc.parametrize("fast_path", ["on", "off"], indirect=True, scope="module", ids=["fast-on", "fast-off"])


@pytest.fixture(scope="module", autouse=True)
def fast_path(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """`CLAIMCHECK_FAST_PATH` for the claimcheck processes a module starts (None: left as it is, so the default).

    The mcp SDK's stdio client passes only a few variables to its child; this one is added to them."""
    mode: str | None = getattr(request, "param", None)
    if mode is None:
        yield None
        return
    inherited = [*mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS, FAST_PATH_ENV]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FAST_PATH_ENV, mode)
        patch.setattr(mcp.client.stdio, "DEFAULT_INHERITED_ENV_VARS", inherited)
        yield mode
