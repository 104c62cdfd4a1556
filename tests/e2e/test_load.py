"""Load at a size CI can afford: several HTTP clients, a mix of fast, background and stored calls, all correct.

`python bench/load.py` runs the full 2 000 calls at concurrency 64.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support.load_driver import claimcheck_http, peak_rss_kib, run_load

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


async def test_every_answer_of_a_mixed_load_from_several_clients_is_the_callers_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAIMCHECK_API_ENABLED", "true")
    monkeypatch.setenv("CLAIMCHECK_API_PORT", "0")
    with anyio.fail_after(240):
        async with claimcheck_http(tmp_path) as url:
            result = await run_load(url, clients=4, calls=120, concurrency=16)
            rss = peak_rss_kib(tmp_path)
    assert result.wrong == []
    assert result.ok == result.calls == 120
    assert set(result.kinds) == {"fast", "slow", "large"}
    assert rss > 0
