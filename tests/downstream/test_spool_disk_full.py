"""A spooled output on a nearly full disk stops growing and says why: the free space, the reserve claimcheck
leaves to everything else, and what did not fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.downstream import spool_file
from server.downstream.spool_file import SpoolFile

pytestmark = pytest.mark.anyio


async def test_a_piece_that_would_eat_into_the_reserve_is_not_written_and_the_reason_names_the_reserve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_file, "_free_bytes", lambda directory: 17 << 20)  # 17 MiB free: 1 MiB past the reserve
    spool = SpoolFile(tmp_path / "out", limit=1 << 30, indexed=False)
    spool.add(b"x" * (2 << 20))
    await spool.flush(force=True)
    await spool.close()
    assert spool.written == 0
    assert spool.failure is not None
    assert spool.failure.startswith("the disk has 17.0 MiB free and claimcheck leaves the last 16 MiB of it")
    assert "the next 2.0 MiB did not fit" in spool.failure
