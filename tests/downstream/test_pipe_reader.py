"""A stdio server's stdout is a pipe claimcheck makes and reads itself (`PipeReader`): all of it, in order, to its
end; closing it wakes a reader that waits; a pipe that always has more does not starve the event loop."""

from __future__ import annotations

import hashlib
import sys

import anyio
import pytest

from server.downstream.processes import PipeReader, spawn, stop
from server.platform import POSIX

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.subprocess,
    pytest.mark.skipif(not POSIX, reason="claimcheck makes the pipe itself only where it can wait on one"),
]

WRITER = (
    "import hashlib, os, sys\n"
    "digest = hashlib.sha256()\n"
    "for n in range(int(sys.argv[1])):\n"
    "    block = (str(n).encode() * (65536 + n * 997))[: 65536 + n * 997]\n"
    "    digest.update(block)\n"
    "    view = memoryview(block)\n"
    "    while view:\n"
    "        view = view[os.write(1, view):]\n"
    "sys.stderr.write(digest.hexdigest())\n"
)


async def test_a_server_s_stdout_is_read_whole_and_in_order_to_its_end() -> None:
    spawned = await spawn(sys.executable, ["-c", WRITER, "200"], {}, None)
    assert isinstance(spawned.stdout, PipeReader)
    digest, size = hashlib.sha256(), 0
    with anyio.fail_after(60):
        with pytest.raises(anyio.EndOfStream):
            while True:
                data = await spawned.stdout.receive(1 << 20)
                assert data
                digest.update(data)
                size += len(data)
        assert spawned.process.stderr is not None
        expected = await spawned.process.stderr.receive()
        await stop(spawned)
    assert size == sum(65536 + n * 997 for n in range(200))
    assert digest.hexdigest() == expected.decode()


async def test_closing_the_pipe_wakes_a_reader_that_waits_on_it() -> None:
    spawned = await spawn(sys.executable, ["-c", "import sys; sys.stdin.read()"], {}, None)
    failed: list[BaseException] = []

    async def read() -> None:
        try:
            await spawned.stdout.receive()
        except anyio.ClosedResourceError as exc:
            failed.append(exc)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await anyio.wait_all_tasks_blocked()
            await spawned.stdout.aclose()
        await stop(spawned)
    assert len(failed) == 1
    with pytest.raises(anyio.ClosedResourceError):
        await spawned.stdout.receive()


async def test_a_pipe_that_always_has_more_lets_other_tasks_run() -> None:
    """Each read that finds data yields to the loop once, as a read that waits would."""
    filler = "import os, sys\nos.write(1, b'x' * 61440)\nos.write(2, b'full')\nsys.stdin.read()\n"
    spawned = await spawn(sys.executable, ["-c", filler], {}, None)
    assert spawned.process.stderr is not None
    ticks = reads = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(30):
        assert await spawned.process.stderr.receive() == b"full"  # the pipe holds all 60 KiB: no read waits
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            while reads < 15:
                assert len(await spawned.stdout.receive(4096)) == 4096
                reads += 1
            tg.cancel_scope.cancel()
        await stop(spawned)
    assert ticks >= reads - 1, f"{ticks} turns of another task while {reads} reads were made"
