"""A spooled output waits for its claim in the pool's registry; one whose stand-in is dropped is released."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from server.config import parse_config
from server.downstream.pool import Pool
from server.downstream.spool import MessageSpool, SpoolPolicy
from server.downstream.spooled import SpooledOutputs

pytestmark = pytest.mark.anyio

TTL = 60.0


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def stand_in(directory: Path, outputs: SpooledOutputs) -> types.CallToolResult:
    """Spool a 2 MiB tool result; the stand-in the SDK session would get."""
    message = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "x" * (2 << 20)}]}}
    spooler = MessageSpool(SpoolPolicy(directory, 1 << 30, outputs), "test")
    await spooler.feed(json.dumps(message).encode())
    answer = await spooler.finish()
    assert isinstance(answer, bytes)
    return types.CallToolResult.model_validate(json.loads(answer)["result"])


async def test_a_dropped_stand_in_is_kept_until_it_expires_then_released_with_its_files(tmp_path: Path) -> None:
    clock = FakeClock()
    outputs = SpooledOutputs(ttl=TTL, clock=clock)
    dropped = await stand_in(tmp_path, outputs)  # nobody ever claims it
    made = sorted(os.listdir(tmp_path))
    assert len(outputs) == 1
    assert sorted(name.rsplit(".", 1)[-1] for name in made) == ["lines", "out", "raw"]

    assert outputs.expire(clock.now + TTL - 1) == 0
    assert len(outputs) == 1 and sorted(os.listdir(tmp_path)) == made

    clock.now += TTL
    assert outputs.expire() == 1
    assert len(outputs) == 0 and os.listdir(tmp_path) == []
    assert outputs.claim(dropped) is None


async def test_a_claimed_output_is_the_claimers_and_expiry_leaves_its_files_alone(tmp_path: Path) -> None:
    clock = FakeClock()
    outputs = SpooledOutputs(ttl=TTL, clock=clock)
    spooled = outputs.claim(await stand_in(tmp_path, outputs))
    assert spooled is not None and spooled.path is not None
    assert outputs.expire(clock.now + 10 * TTL) == 0
    assert spooled.path.read_bytes() == b"x" * (2 << 20)


async def test_a_stand_in_is_claimed_once_and_only_from_the_registry_that_holds_it(tmp_path: Path) -> None:
    outputs = SpooledOutputs()
    result = await stand_in(tmp_path, outputs)
    assert SpooledOutputs().claim(result) is None
    assert outputs.claim(result) is not None
    assert outputs.claim(result) is None


async def test_the_pool_releases_the_outputs_nobody_claimed_when_it_stops(tmp_path: Path) -> None:
    pool = Pool(parse_config({"mcpServers": {}}), [])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run)
            await stand_in(tmp_path, pool.spooled)
            assert len(pool.spooled) == 1 and os.listdir(tmp_path) != []
            await anyio.wait_all_tasks_blocked()  # the registry's task has begun its wait
            tg.cancel_scope.cancel()
    assert len(pool.spooled) == 0 and os.listdir(tmp_path) == []
