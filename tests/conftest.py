from __future__ import annotations

import os

import pytest

# The status API is off unless a test turns it on: claimcheck processes the tests start inherit this,
# so no test binds port 5165 or writes discovery files into the developer's state directory.
os.environ["CLAIMCHECK_API_ENABLED"] = "false"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
