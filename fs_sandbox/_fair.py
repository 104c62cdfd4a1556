"""Fair turns at a few workers for many owners: a bounded queue per owner, served round-robin.

An owner (a client's principal, say) may have at most `per_owner` jobs admitted, queued or running; one more
is refused at once with `Busy`, and at most `running_per_owner` of them hold a worker at once, so one owner's
flood leaves a worker free for another. When a worker is free it goes to the waiting owner with the fewest jobs
running, and among equals to the one that has waited longest for its turn, so one owner's flood delays
another's job by at most the time it takes one running job to end. The number of workers may change while jobs
run (`resize`: an LLM endpoint says how many requests it serves at once only once asked).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio

from fs_sandbox.errors import Busy

__all__ = ["FairQueue"]


class FairQueue:
    def __init__(
        self, slots: int, per_owner: int, *, running_per_owner: int | None = None, setting: str = "per_owner"
    ) -> None:
        if slots < 1 or per_owner < 1 or (running_per_owner is not None and running_per_owner < 1):
            raise ValueError("slots, per_owner and running_per_owner must be at least 1")
        self.slots, self.per_owner, self.setting = slots, per_owner, setting
        self._running_cap = running_per_owner  # None: as many as there are slots
        self._free = slots
        self._admitted: dict[str, int] = {}
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[anyio.Event]] = {}
        self._turns: deque[str] = deque()  # owners with waiting jobs, longest waiting first

    @property
    def running_per_owner(self) -> int:
        return self._running_cap or self.slots

    def resize(self, slots: int) -> None:
        """Hold `slots` workers from now on: more are handed to waiting owners at once; fewer are taken back as
        running jobs end."""
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self._free += slots - self.slots
        self.slots = slots
        while self._free > 0 and self._hand_over():
            self._free -= 1

    def in_flight(self, owner: str) -> int:
        """How many jobs of `owner` are admitted (queued or running)."""
        return self._admitted.get(owner, 0)

    @contextmanager
    def admitted(self, owner: str) -> Iterator[None]:
        """Count a job of `owner` for as long as the block runs; `Busy` at once if it has too many."""
        count = self._admitted.get(owner, 0)
        if count >= self.per_owner:
            raise Busy(
                f"too many searches in flight for this principal ({count} queued or running, at most "
                f'{self.per_owner}: "{self.setting}"); each ends within seconds, then search again'
            )
        self._admitted[owner] = count + 1
        try:
            yield
        finally:
            self._admitted[owner] -= 1
            if not self._admitted[owner]:
                del self._admitted[owner]

    @asynccontextmanager
    async def turn(self, owner: str) -> AsyncIterator[None]:
        """Hold one of the slots, waiting for the owner's turn if none is free."""
        await self._acquire(owner)
        try:
            yield
        finally:
            self._release(owner)

    async def _acquire(self, owner: str) -> None:
        if self._free > 0 and self._running.get(owner, 0) < self.running_per_owner:  # no one waits who could run
            self._free -= 1
            self._running[owner] = self._running.get(owner, 0) + 1
            return
        granted = anyio.Event()
        queue = self._waiting.setdefault(owner, deque())
        queue.append(granted)
        if owner not in self._turns:
            self._turns.append(owner)
        waited = False
        try:
            await granted.wait()
            waited = True
        finally:
            if not waited:
                if granted.is_set():  # cancelled just after the slot was handed over: pass it on
                    self._release(owner)
                else:
                    self._forget(owner, granted)

    def _release(self, owner: str) -> None:
        self._running[owner] -= 1
        if not self._running[owner]:
            del self._running[owner]
        if self._free < 0 or not self._hand_over():  # a worker fewer since `resize`, or no one to hand it to
            self._free += 1

    def _hand_over(self) -> bool:
        """Give a worker to the next waiting owner (see the module's doc); False when no one waiting may run."""
        eligible = [name for name in self._turns if self._running.get(name, 0) < self.running_per_owner]
        if not eligible:
            return False
        chosen = min(eligible, key=lambda name: self._running.get(name, 0))  # the first of the least served
        queue = self._waiting[chosen]
        queue.popleft().set()
        self._running[chosen] = self._running.get(chosen, 0) + 1
        self._turns.remove(chosen)
        if queue:
            self._turns.append(chosen)
        else:
            del self._waiting[chosen]
        return True

    def _forget(self, owner: str, granted: anyio.Event) -> None:
        queue = self._waiting[owner]
        queue.remove(granted)
        if not queue:
            del self._waiting[owner]
            self._turns.remove(owner)
