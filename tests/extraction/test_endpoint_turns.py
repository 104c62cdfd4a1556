"""Turns at an extraction endpoint every client shares (`extraction.turns`): one principal asking many questions at
once does not hold the model while another's question waits behind all of them.

claimcheck in this process, its endpoint a real OpenAI-compatible HTTP server on 127.0.0.1 that holds each request
until the test answers it, one at a time, as a llama.cpp server with one slot would serve them.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from tests.support.extraction import extraction_settings, fake_openai
from tests.support.handles import Downstream, client_with_token, handle_in
from tests.support.proxies import running_proxy, text_of

pytestmark = pytest.mark.anyio

FLOOD = 6


async def settled() -> None:
    """Until every other task waits, or 2 s (what it waits for comes well within that).

    The fake endpoint is an in-process uvicorn, whose main loop sleeps 0.1 s a tick; anyio's check sleeps 0.1 s
    whenever a task is runnable. Once both timers fall within one millisecond (epoll's resolution), with the check's
    first, every wake-up finds uvicorn's sleep done and not yet resumed: the check never returns (one floors run of
    CI spent its whole 60 s so). No busy task: two timers in step (a task that sleeps 0.1 s in a loop, started
    within 0.2 ms of the check, holds anyio 4.16's `wait_all_tasks_blocked` for ever)."""
    with anyio.move_on_after(2):
        await anyio.wait_all_tasks_blocked()


def lines_of(who: str) -> str:
    return "".join(f"{who} ERROR line {i:03d}\n" for i in range(250))  # over the 1000-token threshold: stored


async def test_a_flood_of_one_principals_questions_leaves_the_endpoints_next_turns_to_another() -> None:
    """Mallory asks six questions at once, then Alice one: the endpoint (one slot: on this machine, and it names
    no other number) is sent one request at a time, and Alice's is among the first three (each waiting owner
    in turn), never behind all of Mallory's."""
    down = Downstream()
    down.server.add_tool(lines_of, name="log", structured_output=False)
    order: list[str] = []
    async with (
        fake_openai() as (url, fake),
        running_proxy({"down": down.server}, settings=extraction_settings(url)) as proxy,
        client_with_token(proxy, "mallory") as mallory,
        client_with_token(proxy, "alice") as alice,
    ):
        fake.behaviour = "held"
        with anyio.fail_after(60):
            his = handle_in(text_of(await mallory.call_tool("down__log", {"who": "MALLORY"})))
            hers = handle_in(text_of(await alice.call_tool("down__log", {"who": "ALICE"})))
            answers: list[str] = []

            async def ask(client: Client, handle: str, question: str) -> None:
                arguments = {"handle": handle, "extract": question, "mode": "full-chunked"}
                answers.append(text_of(await client.call_tool("tool_output", arguments)))

            async with anyio.create_task_group() as tg:
                for n in range(FLOOD):
                    tg.start_soon(ask, mallory, his, f"every ERROR line, question {n}")
                await fake.until_held(1)
                await settled()  # his other questions are waiting for their turns
                tg.start_soon(ask, alice, hers, "every ERROR line")
                while "ALICE" not in order:  # answer the requests one at a time, in the order they came
                    await fake.until_held(len(order) + 1)
                    order.append("ALICE" if "ALICE ERROR" in str(fake.requests[len(order)]["messages"]) else "MALLORY")
                    await settled()  # a request sent beside this one would have come now
                    fake.held[len(order) - 1].set()
                fake.behaviour = "good"  # the rest are answered as they come
                for held in fake.held:
                    held.set()
    assert len(answers) == FLOOD + 1 and all("ABSTRACT FROM TOOL OUTPUT" in answer for answer in answers), answers
    assert fake.most_answering == 1  # one request at a time, as the endpoint's one slot serves them
    assert order.index("ALICE") <= 2, order
