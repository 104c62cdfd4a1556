"""A history that cannot be written (a full disk) costs one readable warning a minute, not a traceback per call,
and the calls go on."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from server.handles.calls import Call, Description
from server.status.history import History

pytestmark = pytest.mark.anyio


async def test_a_full_history_logs_one_line_without_a_traceback_however_many_commits_fail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    history = History(tmp_path / "history.sqlite3", coalesce_secs=0)
    caplog.set_level(logging.WARNING, logger="server.status.history")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(history.run)
            await history.ready()
            assert history._db is not None
            pages = history._db.execute("PRAGMA page_count").fetchone()[0]
            history._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
            for number in range(20):
                call = Call(Description(f"session-a/{number}", "down__echo", "down", "echo", {"n": "x" * 5000}))
                history.record(call, "started")
                await history.flush()
            tg.cancel_scope.cancel()
    failures = [r for r in caplog.records if "could not write" in r.getMessage()]
    assert len(failures) == 1, [r.getMessage() for r in failures]
    assert failures[0].exc_info is None and "full" in failures[0].getMessage()
    assert "said at most once a minute" in failures[0].getMessage()
