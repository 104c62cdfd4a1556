"""tool_output's LLM modes end to end: claimcheck → a real OpenAI-compatible HTTP server, and → client sampling."""

from __future__ import annotations

import hashlib
import json
import re
import socket
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from server.upstream.surface import build_server
from tests.support.extraction import ERRORS, answer_from, extraction_settings, fake_openai
from tests.support.handles import Downstream, client_of, handle_in
from tests.support.proxies import running_proxy, text_of

pytestmark = pytest.mark.anyio


def log_text(lines: int = 600) -> str:
    return "".join(
        f"{ERRORS[i]}\n" if i in ERRORS else f"line {i:05d} INFO request served in {i % 97} ms\n" for i in range(lines)
    )


async def extract_errors(base_url: str, mode: str = "full-chunked", **extra: Any) -> tuple[str, str, bool]:
    down = Downstream()
    down.server.add_tool(lambda: log_text(), name="log", structured_output=False)
    async with running_proxy({"down": down.server}, settings=extraction_settings(base_url, **extra)) as proxy:
        async with client_of(proxy) as client:
            with anyio.fail_after(120):  # a guard against a hang, far beyond what a loaded machine takes
                handle = handle_in(text_of(await client.call_tool("down__log", {})))
                result = await client.call_tool(
                    "tool_output", {"handle": handle, "extract": "every ERROR line", "mode": mode}
                )
    return handle, text_of(result), result.is_error


async def test_an_output_spooled_without_a_digest_gets_it_from_its_file_when_extraction_asks() -> None:
    """A spooled output is stored without a sha256 (taking it would slow the pipe): the first extraction reads it
    from the stored file, and the abstract names that digest."""
    text = log_text()
    down = Downstream()
    down.server.add_tool(lambda: log_text(), name="log", structured_output=False)
    async with (
        fake_openai() as (url, _),
        running_proxy({"down": down.server}, settings=extraction_settings(url)) as proxy,
    ):
        async with client_of(proxy) as client:
            with anyio.fail_after(120):
                handle = handle_in(text_of(await client.call_tool("down__log", {})))
                (call,) = [c for session in proxy.sessions.live for c in session.calls.values() if c.handle == handle]
                call.digested("")  # as `settle` leaves a spooled output
                arguments = {"handle": handle, "extract": "every ERROR line", "mode": "full-chunked"}
                result = await client.call_tool("tool_output", arguments)
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert f"source: sha256={digest} " in text_of(result)
    assert call.sha256 == digest


async def test_full_chunked_extraction_over_http_quotes_verified_evidence_and_names_its_source() -> None:
    text = log_text()
    async with fake_openai() as (url, fake):
        handle, answer, is_error = await extract_errors(url)
    assert not is_error
    assert answer.startswith(f"ABSTRACT FROM TOOL OUTPUT down__log WITH HANDLE {handle}, STRATEGY:full-chunked:\n\n")
    for line in ERRORS.values():
        at = text.index(line)
        assert f'> "{line}" (chars {at}-{at + len(line)})' in answer
    source = re.search(r"source: sha256=([0-9a-f]{64}) bytes=(\d+) chunks=(\d+)/(\d+) model=fake-1$", answer)
    assert source, answer
    assert source.group(1) == hashlib.sha256(text.encode()).hexdigest()
    assert int(source.group(2)) == len(text.encode())
    assert int(source.group(3)) == int(source.group(4)) > 1  # every chunk was searched
    maps = [r for r in fake.requests if "document chunk" in r["messages"][0]["content"]]
    assert len(maps) == int(source.group(4))
    assert all(r["model"] == "fake-1" for r in fake.requests)


async def test_a_hallucinated_quote_is_marked_unverified() -> None:
    async with fake_openai() as (url, fake):
        fake.behaviour = "hallucinate"
        _, answer, _ = await extract_errors(url)
    assert '> "ERROR the moon is made of cheese" (unverified: not in the stored output)' in answer


@pytest.mark.parametrize(
    ("behaviour", "reason", "llm_timeout"),
    [
        # An answer that comes has all the time a loaded machine may need; only the one that never comes meets
        # the LLM timeout, however short it is and however loaded the machine.
        ("malformed", "answered something that is not a chat completion", 600),
        ("empty", "gave an empty answer", 600),
        ("slow", "gave no answer within 0.5 s", 0.5),
    ],
)
async def test_a_failing_llm_falls_back_to_truncate_with_the_reason(
    behaviour: str, reason: str, llm_timeout: float
) -> None:
    async with fake_openai() as (url, fake):
        fake.behaviour = behaviour
        handle, answer, is_error = await extract_errors(url, timeoutSecs=llm_timeout, firstTokenSecs=llm_timeout)
    assert not is_error
    assert answer.startswith(
        f"ABSTRACT FROM TOOL OUTPUT down__log WITH HANDLE {handle}, STRATEGY:truncate:\n\n"
        "WARNING: tool_output fallback to truncate ("
    )
    assert reason in answer
    assert "line 00000 INFO" in answer  # the head of the output is still there


async def test_an_answer_without_the_wrapper_over_http_is_the_answer_and_its_copied_line_verifies() -> None:
    text = log_text()
    async with fake_openai() as (url, fake):
        fake.behaviour = "no wrapper"
        _, answer, is_error = await extract_errors(url)
    at = text.index(ERRORS[120])
    assert not is_error and "STRATEGY:full-chunked" in answer and "fallback" not in answer
    assert f"Here are the errors, but I forgot the wrapper:\n{ERRORS[120]}\n\nEVIDENCE:\n" in answer
    assert f'> "{ERRORS[120]}" (chars {at}-{at + len(ERRORS[120])})' in answer  # its copied line is its evidence


async def test_an_endpoint_that_is_down_falls_back_to_truncate() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket closes
    _, answer, is_error = await extract_errors(f"http://127.0.0.1:{port}/v1")
    assert not is_error
    assert "WARNING: tool_output fallback to truncate (" in answer and "cannot be reached" in answer


async def test_the_same_extraction_twice_is_answered_from_the_cache() -> None:
    async with fake_openai() as (url, fake):
        down = Downstream()
        down.server.add_tool(lambda: log_text(), name="log", structured_output=False)
        async with running_proxy({"down": down.server}, settings=extraction_settings(url)) as proxy:
            async with client_of(proxy) as client:
                with anyio.fail_after(30):
                    handle = handle_in(text_of(await client.call_tool("down__log", {})))
                    args = {"handle": handle, "extract": "every ERROR line", "mode": "full-chunked"}
                    first = text_of(await client.call_tool("tool_output", args))
                    calls = len(fake.requests)
                    second = text_of(await client.call_tool("tool_output", args))
    assert first == second
    assert len(fake.requests) == calls


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_sampling_answers_extraction_when_no_llm_is_configured(mode: str) -> None:
    prompts: list[str] = []
    requests: list[str] = []

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        system = params.system_prompt or ""
        prompts.append(system)
        requests.append(params.messages[-1].content.text)  # type: ignore[union-attr]
        nonce = re.search(r"claimcheck-([0-9a-f]+)-FINAL", system).group(1)  # type: ignore[union-attr]
        messages = [{"content": m.content.text} for m in params.messages]  # type: ignore[union-attr]
        text = answer_from(messages, nonce, hallucinate=False)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=text), model="client-model"
        )

    down = Downstream()
    down.server.add_tool(lambda: log_text(), name="log", structured_output=False)
    extraction = {"contextWindow": 3000, "maxOutputTokens": 300, "samplingRequests": 16}  # every chunk, then one
    settings = {"asyncTokenThreshold": 1000, "extraction": extraction}
    async with running_proxy({"down": down.server}, settings=settings) as proxy:
        async with Client(build_server(proxy), mode=mode, sampling_callback=sample) as client:
            with anyio.fail_after(30):
                handle = handle_in(text_of(await client.call_tool("down__log", {})))
                result = await client.call_tool(
                    "tool_output", {"handle": handle, "extract": "every ERROR line", "mode": "full-chunked"}
                )
            (call,) = [s.call(handle) for s in proxy.sessions.live if s.call(handle) is not None]
    answer = text_of(result)
    assert call is not None
    logged = [detail for _, kind, detail in call.log if kind == "extraction"]
    assert len(logged) == len(prompts) and all(d.startswith("sampling:") for d in logged)  # one per LLM call
    assert "STRATEGY:full-chunked" in answer, answer
    assert ERRORS[120] in answer and ERRORS[333] in answer
    assert re.search(r"chunks=(\d+)/\1 model=sampling:", answer), answer
    assert re.search(rf"sent to the client's model: {len(prompts)} sampling requests, about [\d,]+ tokens", answer)
    assert int(re.search(r"chunks=(\d+)/", answer).group(1)) > 1  # type: ignore[union-attr]  # several rounds of maps
    assert requests and "QUESTION: every ERROR line" in requests[0]
    assert json.dumps("down__log")[1:-1] in prompts[0]


async def test_read_grep_over_http_lets_the_model_grep_the_stored_output_and_answer() -> None:
    text = log_text()
    async with fake_openai() as (url, fake):
        fake.behaviour = "tools"
        handle, answer, is_error = await extract_errors(url, mode="read-grep")
    assert not is_error
    assert answer.startswith(f"ABSTRACT FROM TOOL OUTPUT down__log WITH HANDLE {handle}, STRATEGY:read-grep:\n\n")
    for line in ERRORS.values():
        at = text.index(line)
        assert f'> "{line}" (chars {at}-{at + len(line)})' in answer
    assert answer.rstrip().endswith("chunks=n/a model=fake-1")
    first, second = fake.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["Read", "Grep"]
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["tool_call_id"] == "call-1"
