"""When a downstream may be started again: after crashes, and after starts that failed.

A server that was up and crashed restarts on its next call, at once for the first `CRASH_LIMIT`
crashes in `CRASH_WINDOW_S`, then with a doubling delay. A server that has never come up is started
again by its supervisor on its own, 1 s after the first failure, then 2 s, 4 s, … up to `START_RETRY_MAX_S`.
"""

from __future__ import annotations

from collections import deque

import anyio

__all__ = ["CRASH_LIMIT", "CRASH_WINDOW_S", "START_RETRY_FIRST_S", "START_RETRY_MAX_S", "Restarts"]

CRASH_LIMIT = 3
"""Crashes within CRASH_WINDOW_S after which restarts back off (2 s, 4 s, … up to the window)."""
CRASH_WINDOW_S = 60.0
START_RETRY_FIRST_S = 1.0
START_RETRY_MAX_S = 60.0


class Restarts:
    """The crash and start-failure history of one downstream."""

    def __init__(self) -> None:
        self._crashes: deque[float] = deque(maxlen=CRASH_LIMIT * 4)
        self.failed_starts = 0
        self.retry_at: float | None = None
        """When the supervisor starts a server that never came up again (anyio clock), while it waits."""

    def crashed(self) -> None:
        self._crashes.append(anyio.current_time())

    def recent_crashes(self) -> int:
        now = anyio.current_time()
        return sum(1 for when in self._crashes if now - when < CRASH_WINDOW_S)

    def backoff_left(self) -> float:
        """Seconds until a restart after a crash is allowed: 0 until CRASH_LIMIT crashes, then doubling."""
        recent = self.recent_crashes()
        if recent < CRASH_LIMIT:
            return 0.0
        delay = min(CRASH_WINDOW_S, 2.0 ** (recent - CRASH_LIMIT + 1))
        return max(0.0, self._crashes[-1] + delay - anyio.current_time())

    def start_failed(self) -> float:
        """Count a failed start; the delay before the next try."""
        self.failed_starts += 1
        delay = min(START_RETRY_MAX_S, START_RETRY_FIRST_S * 2.0 ** (self.failed_starts - 1))
        self.retry_at = anyio.current_time() + delay
        return delay

    def retry_in(self) -> float | None:
        """Seconds until the next start of a server that never came up, or None when none is planned."""
        if self.retry_at is None:
            return None
        return max(0.0, self.retry_at - anyio.current_time())

    def not_started(self, last_error: str | None) -> str:
        """What a call to a server that has never come up is told: why, and when claimcheck tries again."""
        retry = self.retry_in()
        again = f"; claimcheck tries again in {retry:.0f} s" if retry is not None else ""
        return f"could not start ({last_error or 'no reason given'}){again}"

    def crashing(self, last_error: str | None) -> str | None:
        """What a call to a server that keeps crashing is told while its restart waits; None when it need not."""
        wait = self.backoff_left()
        if wait <= 0:
            return None
        return (
            f"keeps crashing ({self.recent_crashes()} times in the last {CRASH_WINDOW_S:g} s; last: {last_error}); "
            f"claimcheck starts it again in {wait:.0f} s"
        )
