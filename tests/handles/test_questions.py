"""A downstream's questions after its call was handed off: they wait, and reach the client or the model."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support.handles import handle_in
from tests.support.processes import PYTHON, announced_url, program_entry, write_config
from tests.support.proxies import running_proxy, text_of
from tests.support.tasks import TaskClient

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
QUESTION = re.compile(r'question "(q-[0-9a-f]{8})"')


class Confirm(BaseModel):
    ok: bool


class Aspect(BaseModel):
    aspect: str


class Asking:
    """A downstream whose tools ask the client something once the test opens the gate."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.server = MCPServer("ask")

        @self.server.tool(structured_output=False)
        async def confirm(what: str, ctx: Context) -> str:
            await self.gate.wait()
            answer = await ctx.elicit(f"Really {what}?", Confirm)
            if answer.action == "accept":
                return f"confirmed {what}: {answer.data.ok}"
            return f"not confirmed: {answer.action}"

        @self.server.prompt()
        async def careful(topic: str, ctx: Context) -> str:
            answer = await ctx.elicit(f"Which aspect of {topic}?", Aspect)
            return f"Write about {topic}: {answer.data.aspect if answer.action == 'accept' else 'anything'}"

        @self.server.tool(structured_output=False)
        async def summarize(topic: str, ctx: Context) -> str:
            await self.gate.wait()
            request = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"About {topic}"))
            answer = await ctx.session.create_message([request], max_tokens=50, related_request_id=ctx.request_id)
            assert isinstance(answer.content, types.TextContent)
            return f"summary: {answer.content.text}"


@asynccontextmanager
async def asking_proxy(asking: Asking, call_timeout: float = 30) -> AsyncIterator[Proxy]:
    fields = {"ask": {"timeout": call_timeout}}
    async with running_proxy({"ask": asking.server}, fields=fields, settings={"asyncTimeoutSecs": 5}) as proxy:
        yield proxy


async def hand_off(client: Client, tool: str, **arguments: Any) -> str:
    started = await client.call_tool(tool, {**arguments, "background": True})
    return handle_in(text_of(started))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_question_after_the_hand_off_reaches_the_model_through_wait_and_its_answer_completes_the_call(
    mode: str,
) -> None:
    asking = Asking()
    async with asking_proxy(asking) as proxy, Client(build_server(proxy), mode=mode) as client:
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__confirm", what="deleting 3 files")
            asking.gate.set()
            asked = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
            (question_id,) = QUESTION.findall(text_of(asked))
            answer = {"question": question_id, "action": "accept", "content": {"ok": True}}
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle], "answer": answer})
    question = text_of(asked)
    assert not asked.is_error, question
    assert f'Tool ask__confirm (handle "{handle}") asks for input and waits' in question
    assert "Really deleting 3 files?" in question and '"ok"' in question
    assert f'wait_for_tool_output(answer = {{"question": "{question_id}", "action": "accept"' in question
    assert not done.is_error, text_of(done)
    assert text_of(done).startswith(f'Answered question "{question_id}" of ask__confirm.\n1 finished:')
    assert "confirmed deleting 3 files: True" in text_of(done)


async def test_a_declined_question_tells_the_downstream_so() -> None:
    asking = Asking()
    async with asking_proxy(asking) as proxy, Client(build_server(proxy), mode="auto") as client:
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__confirm", what="it")
            asking.gate.set()
            (question_id,) = QUESTION.findall(text_of(await client.call_tool("wait_for_tool_output", {})))
            answer = {"question": question_id, "action": "decline"}
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle], "answer": answer})
    assert "not confirmed: decline" in text_of(done)


async def test_a_sampling_question_is_answered_with_text_from_the_model() -> None:
    asking = Asking()
    async with asking_proxy(asking) as proxy, Client(build_server(proxy), mode="auto") as client:
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__summarize", topic="claim checks")
            asking.gate.set()
            asked = text_of(await client.call_tool("wait_for_tool_output", {"handles": [handle]}))
            (question_id,) = QUESTION.findall(asked)
            answer = {"question": question_id, "text": "tickets for big payloads"}
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle], "answer": answer})
    assert "asks your model for a completion" in asked and "[user] About claim checks" in asked
    assert "(in at most 50 tokens)" in asked
    assert "summary: tickets for big payloads" in text_of(done)


async def test_every_result_says_that_a_question_waits_until_it_is_answered() -> None:
    asking = Asking()
    async with asking_proxy(asking) as proxy, Client(build_server(proxy), mode="auto") as client:
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__confirm", what="it")
            asking.gate.set()
            await client.call_tool("wait_for_tool_output", {})
            listed = await client.call_tool("list_tool_outputs", {})
    footer = text_of(listed).splitlines()[-1]
    assert footer == (
        f'[claimcheck] 1 question waits for an answer: ask__confirm "{handle}" (elicitation). '
        "Call wait_for_tool_output to see them."
    )


async def test_an_unanswered_question_fails_the_call_with_a_clear_error_at_its_timeout() -> None:
    asking = Asking()
    async with asking_proxy(asking, call_timeout=2) as proxy, Client(build_server(proxy), mode="auto") as client:
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__confirm", what="it")
            asking.gate.set()
            asked = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
            ended = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
    assert QUESTION.search(text_of(asked)), text_of(asked)
    assert "1 finished:" in text_of(ended) and ": failed after" in text_of(ended)
    assert "nobody answered the elicitation request" in text_of(ended)
    assert 'until the timeout of the call (2 s, server "ask")' in text_of(ended)


async def test_cancelling_a_call_withdraws_its_question() -> None:
    asking = Asking()
    async with asking_proxy(asking) as proxy, Client(build_server(proxy), mode="auto") as client:
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__confirm", what="it")
            asking.gate.set()
            asked = await client.call_tool("wait_for_tool_output", {})
            (session,) = proxy.sessions.live
            inbox = session.inbox
            await client.call_tool("cancel_tool_output", {"handle": handle})
            while inbox.pending:
                await inbox.changed().wait()
            after = await client.call_tool("wait_for_tool_output", {"timeout_secs": 0})
    assert QUESTION.search(text_of(asked))
    assert not QUESTION.search(text_of(after)) and "question waits" not in text_of(after)


async def test_a_wrong_answer_is_refused_and_the_question_keeps_waiting() -> None:
    asking = Asking()
    async with asking_proxy(asking) as proxy, Client(build_server(proxy), mode="auto") as client:
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__confirm", what="it")
            asking.gate.set()
            (question_id,) = QUESTION.findall(text_of(await client.call_tool("wait_for_tool_output", {})))
            unknown = await client.call_tool("wait_for_tool_output", {"answer": {"question": "q-00000000"}})
            bad = await client.call_tool("wait_for_tool_output", {"answer": {"question": question_id, "content": {}}})
            good = {"question": question_id, "content": {"ok": False}}
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle], "answer": good})
    assert unknown.is_error and 'No question "q-00000000" waits for an answer' in text_of(unknown)
    assert bad.is_error and "lacks the required field: ok" in text_of(bad)
    assert "confirmed it: False" in text_of(done)


async def test_a_handshake_era_client_that_can_elicit_is_asked_directly_at_once() -> None:
    asking = Asking()
    seen: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with (
        asking_proxy(asking) as proxy,
        Client(build_server(proxy), mode="legacy", elicitation_callback=elicit) as client,
    ):
        with anyio.fail_after(20):
            handle = await hand_off(client, "ask__confirm", what="it")
            asking.gate.set()
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
    assert seen == ["Really it?"]
    assert "confirmed it: True" in text_of(done)


async def test_a_question_during_prompts_get_reaches_a_client_that_can_elicit() -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"aspect": "history"})

    async with (
        asking_proxy(Asking()) as proxy,
        Client(build_server(proxy), mode="legacy", elicitation_callback=elicit) as client,
    ):
        with anyio.fail_after(20):
            prompt = await client.get_prompt("ask__careful", {"topic": "tea"})
    (message,) = prompt.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Write about tea: history"


async def test_a_question_during_prompts_get_of_a_2026_client_is_answered_through_wait() -> None:
    got: list[types.GetPromptResult] = []
    async with asking_proxy(Asking()) as proxy, Client(build_server(proxy), mode="auto") as client:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:

                async def get() -> None:
                    got.append(await client.get_prompt("ask__careful", {"topic": "tea"}))

                await client.call_tool("list_tool_outputs", {})  # opens the session
                (session,) = proxy.sessions.live
                inbox = session.inbox
                tg.start_soon(get)
                while not inbox.pending:
                    await inbox.changed().wait()
                asked = text_of(await client.call_tool("wait_for_tool_output", {}))
                (question_id,) = QUESTION.findall(asked)
                answer = {"question": question_id, "content": {"aspect": "taste"}}
                await client.call_tool("wait_for_tool_output", {"answer": answer, "timeout_secs": 0})
    assert 'The request prompts/get "ask__careful" asks for input and waits' in asked
    (message,) = got[0].messages
    assert isinstance(message.content, types.TextContent) and message.content.text == "Write about tea: taste"


async def test_a_task_whose_downstream_asks_is_input_required_and_tasks_result_carries_the_question() -> None:
    asking = Asking()
    related: list[object] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        related.append((params.meta or {}).get("io.modelcontextprotocol/related-task"))
        return types.ElicitResult(action="accept", content={"ok": True})

    tasks = TaskClient()
    async with (
        asking_proxy(asking) as proxy,
        Client(build_server(proxy), mode="legacy", extensions=[tasks], elicitation_callback=elicit) as client,
    ):
        tasks.client = client
        with anyio.fail_after(20):
            task = await tasks.create("ask__confirm", {"what": "it"})
            asking.gate.set()
            announced = await tasks.status_of(task.task_id)
            polled = await tasks.get(task.task_id)
            result = await tasks.result(task.task_id)
            final = await tasks.get(task.task_id)
    assert announced.status == "input_required" and polled.status == "input_required"
    assert "waiting for an answer to its elicitation request" in (polled.status_message or "")
    assert related == [{"taskId": task.task_id}]
    assert text_of(result) == "confirmed it: True"
    assert final.status == "completed"


@pytest.mark.subprocess
async def test_over_real_stdio_a_question_after_the_hand_off_is_sent_to_the_client_directly(tmp_path: Path) -> None:
    config = {"mcpServers": {"ask": program_entry("asking_server")}}
    path = write_config(tmp_path, config)  # the servers may start slowly on a loaded machine
    seen: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    params = StdioServerParameters(
        command=PYTHON, args=["-m", "server", "serve", "--config", str(path), "--no-api"], cwd=REPO_ROOT
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", elicitation_callback=elicit) as client:
            handle = await hand_off(client, "ask__confirm", what="deleting 3 files")
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
    assert seen == ["Really deleting 3 files?"]
    assert "1 finished:" in text_of(done) and "confirmed deleting 3 files: True" in text_of(done)


@pytest.mark.subprocess
async def test_over_http_a_question_rides_the_wait_for_tool_output_request_to_a_client_that_can_elicit(
    tmp_path: Path,
) -> None:
    config = {"mcpServers": {"ask": program_entry("asking_server")}}
    path = write_config(tmp_path, config)  # the servers may start slowly on a loaded machine
    seen: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    command = [PYTHON, "-m", "server", "serve", "--config", str(path), "--no-api", "--transport", "http", "--port", "0"]
    with anyio.fail_after(60):
        async with (
            announced_url(command, SERVING) as url,
            Client(url, mode="legacy", elicitation_callback=elicit) as client,
        ):
            handle = await hand_off(client, "ask__confirm", what="it")
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
    assert seen == ["Really it?"]
    assert "confirmed it: True" in text_of(done)
