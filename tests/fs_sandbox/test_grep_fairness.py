"""Grep is fair: searches queue per principal, are served in turn, and one principal's flood stays its own.

A principal may have a bounded number of searches in flight; one more is refused at once with a clear
error. A worker that comes free goes to the principal with the fewest searches running, so another
principal's search waits at most for one running search to end (at worst, one grep timeout).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from fs_sandbox import Busy, PatternTimeout, Sandbox
from fs_sandbox._fair import FairQueue
from tests.support.handles import Downstream, client_with_token, handle_in, handles_proxy
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio

CATASTROPHIC = "(a+)+\\Z"  # \Z needs the backtracking engine; on "aaa…ab" it backtracks past any timeout
EVIL_TEXT = "a" * 50_000 + "b"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "evil").write_text(EVIL_TEXT, encoding="utf-8")
    (tmp_path / "fine").write_text("one\nfine line\nthree\n", encoding="utf-8")
    return tmp_path


async def test_one_sessions_flood_delays_anothers_grep_by_at_most_one_grep_timeout(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A's two running searches must not time out before its 20 are all in flight (a loaded CI machine took over
    # a second to queue them at 1 s): 3 s; B then waits for one of them.
    sandbox = Sandbox(files, timeout=3.0, workers=2, per_owner=20, workers_per_owner=2)
    turns: list[str] = []  # whose search took each worker that came free, in order
    queue_turn = sandbox._queue.turn

    @asynccontextmanager
    async def noted_turn(owner: str) -> AsyncIterator[None]:
        async with queue_turn(owner):
            turns.append(owner)
            yield

    monkeypatch.setattr(sandbox._queue, "turn", noted_turn)

    async def slow() -> None:
        with pytest.raises(PatternTimeout):
            await sandbox.grep("evil", CATASTROPHIC, owner="A")

    try:
        with anyio.fail_after(120):  # a guard against a hang: the order below, not the clock, is what is tested
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(slow)
                await anyio.wait_all_tasks_blocked()  # every one of A's searches is queued or running
                assert sandbox.in_flight("A") == 20
                with pytest.raises(Busy, match="too many searches in flight"):
                    await sandbox.grep("evil", CATASTROPHIC, owner="A")
                found = await sandbox.grep("fine", "fine", owner="B")
                tg.cancel_scope.cancel()
    finally:
        with anyio.move_on_after(10, shield=True):
            await sandbox.aclose()

    assert found.matches == 1
    # B took the first worker one of A's two running searches left (at its timeout), ahead of A's queue of
    # 18: however long the machine takes to time a search out or start a worker, B waited for one search.
    assert turns[:3] == ["A", "A", "B"]


async def test_a_session_at_its_bound_can_search_again_once_one_finishes(files: Path) -> None:
    sandbox = Sandbox(files, timeout=0.5, workers=2, per_owner=2)

    async def slow() -> None:
        with pytest.raises(PatternTimeout):
            await sandbox.grep("evil", CATASTROPHIC, owner="A")

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(2):
                    tg.start_soon(slow)
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(Busy):
                    await sandbox.grep("fine", "fine", owner="A")
            assert sandbox.in_flight("A") == 0
            again = await sandbox.grep("fine", "fine", owner="A")
    finally:
        await sandbox.aclose()
    assert again.matches == 1


async def test_free_slots_go_round_robin_to_the_least_served_owner() -> None:
    queue = FairQueue(slots=1, per_owner=10)
    order: list[str] = []
    release = anyio.Event()

    async def job(owner: str) -> None:
        with queue.admitted(owner):
            async with queue.turn(owner):
                order.append(owner)
                if len(order) == 1:
                    await release.wait()  # hold the only slot until everyone is queued

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(job, "A")
            await anyio.wait_all_tasks_blocked()
            for owner in ["A", "A", "A", "B", "C", "B"]:
                tg.start_soon(job, owner)
                await anyio.wait_all_tasks_blocked()
            release.set()

    assert order == ["A", "A", "B", "C", "A", "B", "A"]


async def test_a_cancelled_waiter_gives_its_turn_away() -> None:
    queue = FairQueue(slots=1, per_owner=10)
    order: list[str] = []
    release = anyio.Event()

    async def job(owner: str, hold: bool = False) -> None:
        with queue.admitted(owner):
            async with queue.turn(owner):
                order.append(owner)
                if hold:
                    await release.wait()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(job, "A", True)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(job, "B")
            await anyio.wait_all_tasks_blocked()
            async with anyio.create_task_group() as inner:
                inner.start_soon(job, "C")
                await anyio.wait_all_tasks_blocked()
                inner.cancel_scope.cancel()  # C leaves the queue before its turn
            tg.start_soon(job, "D")
            await anyio.wait_all_tasks_blocked()
            release.set()

    assert order == ["A", "B", "D"]
    assert queue.in_flight("C") == 0


async def test_through_claimcheck_a_flooding_principal_does_not_hold_up_another(files: Path) -> None:
    down = Downstream()
    async with (
        handles_proxy(down) as proxy,
        client_with_token(proxy, "alice") as alice,
        client_with_token(proxy, "bob") as bob,
    ):
        with anyio.fail_after(10):
            evil = handle_in(text_of(await alice.call_tool("down__echo", {"text": EVIL_TEXT})))
            fine = handle_in(text_of(await bob.call_tool("down__big", {"lines": 400})))
        assert proxy.sandbox is not None
        timeout = proxy.sandbox.timeout
        answers: list[str] = []

        async def flood() -> None:
            result = await alice.call_tool("Grep", {"file": evil, "regex": CATASTROPHIC})
            answers.append(text_of(result))

        async with anyio.create_task_group() as tg:
            for _ in range(24):
                tg.start_soon(flood)
            await anyio.wait_all_tasks_blocked()
            # B waits for one of A's running greps (timeout) and a fresh worker; behind A's queue it would
            # wait ten timeouts. The margin is for starting a worker process on a loaded machine.
            with anyio.fail_after(3 * timeout):
                found = await bob.call_tool("Grep", {"file": fine, "regex": "line 00399", "before": 0, "after": 0})
            with anyio.fail_after(24 * timeout):
                while len(answers) < 4:  # the four over the bound are answered at once; the rest time out
                    await anyio.wait_all_tasks_blocked()
                    await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()

    assert text_of(found).startswith("1 matching line for 'line 00399'")
    refused = [answer for answer in answers if "too many searches in flight" in answer]
    assert len(refused) == 4
    assert refused[0].startswith("Grep failed: too many searches in flight for this principal (20 queued or running")


async def test_a_search_killed_at_its_timeout_leaves_a_spare_worker_for_the_next_turn(files: Path) -> None:
    sandbox = Sandbox(files, timeout=1.0, workers=1, per_owner=5)
    try:
        with anyio.fail_after(30):
            with pytest.raises(PatternTimeout):
                await sandbox.grep("evil", CATASTROPHIC, owner="A")
            spares = len(sandbox._idle)  # the next turn (B's) starts no process of its own
            found = await sandbox.grep("fine", "fine", owner="B")
    finally:
        await sandbox.aclose()
    assert spares == 1
    assert found.matches == 1


async def test_an_owner_at_its_running_share_waits_and_leaves_a_free_worker_to_another() -> None:
    queue = FairQueue(slots=3, per_owner=10, running_per_owner=2)
    order: list[str] = []
    release = anyio.Event()

    async def job(owner: str, hold: bool) -> None:
        with queue.admitted(owner):
            async with queue.turn(owner):
                order.append(owner)
                if hold:
                    await release.wait()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(job, "A", True)
                await anyio.wait_all_tasks_blocked()
            assert order == ["A", "A"]  # two hold workers; two wait though a worker is free
            tg.start_soon(job, "B", False)
            await anyio.wait_all_tasks_blocked()
            assert order == ["A", "A", "B"]  # B takes the free worker at once
            release.set()
    assert order == ["A", "A", "B", "A", "A"]


async def test_more_workers_go_to_waiting_owners_at_once_and_fewer_are_taken_back_as_jobs_end() -> None:
    """`resize`: an endpoint says how many requests it serves only once asked; the queue follows it."""
    queue = FairQueue(slots=1, per_owner=10)
    running: list[str] = []
    most = 0
    releases = {name: anyio.Event() for name in ["A1", "A2", "B1", "A3", "B2"]}

    async def job(name: str) -> None:
        nonlocal most
        async with queue.turn(name[0]):
            running.append(name)
            most = max(most, len(running))
            await releases[name].wait()
            running.remove(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for name in releases:
                tg.start_soon(job, name)
                await anyio.wait_all_tasks_blocked()
            assert running == ["A1"]
            queue.resize(3)  # two more workers: to the least served waiting owner first, then round-robin
            await anyio.wait_all_tasks_blocked()
            assert running == ["A1", "B1", "A2"]
            queue.resize(1)
            releases["A1"].set()
            await anyio.wait_all_tasks_blocked()
            assert running == ["B1", "A2"]  # a worker taken back: nobody new started
            releases["B1"].set()
            await anyio.wait_all_tasks_blocked()
            assert running == ["A2"]
            releases["A2"].set()
            await anyio.wait_all_tasks_blocked()
            assert running == ["B2"]  # one worker again, round-robin: B's turn before A's
            releases["B2"].set()
            releases["A3"].set()
    assert most == 3
