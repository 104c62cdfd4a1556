"""A deterministic OpenAI-compatible endpoint on 127.0.0.1 and the settings that point claimcheck at it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.support.app_server import served

ERRORS = {120: "ERROR disk quota exceeded on /var", 333: "ERROR connection reset by peer 10.0.0.7"}


def answer_from(messages: list[dict[str, Any]], nonce: str, hallucinate: bool, keyword: str = "ERROR") -> str:
    """Quote every line of the chunk that mentions `keyword`, as a careful model would."""
    chunk = messages[-1]["content"].split("\nEND OF CHUNK")[0]
    found = [line for line in chunk.splitlines() if keyword in line]
    if not found:
        body = "NO RELEVANT DATA FOUND\nonly INFO lines"
    else:
        quotes = [*found, "ERROR the moon is made of cheese"] if hallucinate else found
        body = "\n".join(found) + "\nEVIDENCE:\n" + "\n".join(f'> "{q}"' for q in quotes)
    return f'<claimcheck-{nonce}-FINAL format="text">{body}</claimcheck-{nonce}-FINAL>'


class FakeOpenAI:
    """A deterministic `/v1/chat/completions` on 127.0.0.1; `behaviour` picks a fault."""

    def __init__(self) -> None:
        self.behaviour = "good"
        self.keyword = "ERROR"
        self.requests: list[dict[str, Any]] = []
        self.never = anyio.Event()
        self.held: list[anyio.Event] = []
        """`held`: one event per request, in the order they came; each is answered once the test sets its event."""
        self.answering = 0
        self.most_answering = 0
        self._arrived = anyio.Event()

    async def until_held(self, count: int) -> None:
        """Until `count` requests have come (behaviour `held`)."""
        while len(self.held) < count:
            await self._arrived.wait()
            self._arrived = anyio.Event()

    async def completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.answering += 1
        self.most_answering = max(self.most_answering, self.answering)
        try:
            return await self._complete(body)
        finally:
            self.answering -= 1

    async def _complete(self, body: dict[str, Any]) -> Response:
        if self.behaviour == "slow":
            await self.never.wait()
        if self.behaviour == "held":
            go = anyio.Event()
            self.held.append(go)
            self._arrived.set()
            await go.wait()
        if self.behaviour == "malformed":
            return PlainTextResponse("{not json", media_type="application/json")
        if self.behaviour == "tools" and not any(m["role"] == "tool" for m in body["messages"]):
            call = {"id": "call-1", "type": "function", "function": {"name": "Grep", "arguments": '{"regex": "ERROR"}'}}
            message = {"role": "assistant", "content": "", "tool_calls": [call]}
            return JSONResponse({"choices": [{"message": message}]})
        if self.behaviour == "tools":
            system = body["messages"][0]["content"]
            nonce = re.search(r"claimcheck-([0-9a-f]+)-FINAL", system).group(1)  # type: ignore[union-attr]
            grep_reply = next(m["content"] for m in body["messages"] if m["role"] == "tool")
            lines = [line.split("→ ", 1)[1] for line in grep_reply.splitlines() if "→ " in line]
            evidence = "\n".join(f'> "{line}"' for line in lines)
            text = f'<claimcheck-{nonce}-FINAL format="text">{"; ".join(lines)}\nEVIDENCE:\n{evidence}'
            return JSONResponse({"choices": [{"message": {"role": "assistant", "content": text}}]})
        if self.behaviour == "no wrapper":
            text = f"Here are the errors, but I forgot the wrapper:\n{ERRORS[120]}"
        elif self.behaviour == "empty":
            text = ""
        else:
            system = body["messages"][0]["content"]
            nonce = re.search(r"claimcheck-([0-9a-f]+)-FINAL", system).group(1)  # type: ignore[union-attr]
            text = answer_from(body["messages"], nonce, self.behaviour == "hallucinate", self.keyword)
        usage = {"prompt_tokens": 100, "completion_tokens": 20}
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": text}}], "usage": usage})


@asynccontextmanager
async def fake_openai() -> AsyncIterator[tuple[str, FakeOpenAI]]:
    fake = FakeOpenAI()
    app = Starlette(routes=[Route("/v1/chat/completions", fake.completions, methods=["POST"])])
    async with served(app) as root:
        try:
            yield f"{root}/v1", fake
        finally:
            fake.never.set()


def extraction_settings(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "asyncTokenThreshold": 1000,
        "extraction": {
            "provider": "openai",
            "baseUrl": base_url,
            "model": "fake-1",
            "contextWindow": 3000,
            "maxOutputTokens": 300,
            "retries": 1,
            **extra,
        },
    }
