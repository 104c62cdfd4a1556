"""Connecting `tool_output`'s LLM modes to a backend: an OpenAI-compatible endpoint or the client's sampling."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from extraction import LLM, Completion, Document, Extraction, FileTool, LLMBadResponse, LLMUnavailable, Message
from extraction import Mode as ExtractMode
from extraction.llm import ToolSpec
from extraction.openai import OpenAICompatible
from server.calls import Call
from server.config import ExtractionSettings
from server.files import FileToolError, run_file_tool
from server.own_tools import ExtractFn
from server.proxy import Proxy
from server.relay import RequestRelay
from server.sessions import Session

__all__ = ["SamplingLLM", "choose_llm", "extract_function"]

_SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())


class SamplingLLM:
    """Completions from the connected client's model, through MCP sampling (handshake-era clients)."""

    supports_tools = False

    def __init__(self, relay: RequestRelay, settings: ExtractionSettings, client: str) -> None:
        self._relay = relay
        self.model = f"sampling:{client}"
        self.context_window = settings.context_window
        self.max_output_tokens = settings.max_output_tokens

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        turns = [
            types.SamplingMessage(
                role="assistant" if m.role == "assistant" else "user",
                content=types.TextContent(type="text", text=m.content),
            )
            for m in messages
            if m.role != "system"
        ]
        params = types.CreateMessageRequestParams(messages=turns, system_prompt=system or None, max_tokens=max_tokens)
        answer = await self._relay.sample(params)
        if isinstance(answer, types.ErrorData):
            raise LLMUnavailable(f"the client could not sample: {answer.message}")
        content = answer.content
        if not isinstance(content, types.TextContent):
            raise LLMBadResponse("the client's sampling answer is not text")
        self.model = f"sampling:{answer.model}" if answer.model else self.model
        return Completion(text=content.text)


def choose_llm(settings: ExtractionSettings, ctx: ServerRequestContext[Any]) -> tuple[LLM | None, str]:
    """The backend `provider` selects, or None and why there is none."""
    provider = settings.provider
    if provider == "none":
        return None, 'LLM extraction is turned off (settings.extraction.provider is "none")'
    if provider in ("openai", "auto") and settings.base_url and settings.model:
        api_key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
        if settings.api_key_env and not api_key:
            return None, f"the API key variable {settings.api_key_env} is not set"
        llm = OpenAICompatible(
            settings.base_url,
            settings.model,
            api_key=api_key,
            context_window=settings.context_window,
            max_output_tokens=settings.max_output_tokens,
            timeout_secs=settings.timeout_secs,
        )
        return llm, ""
    if provider == "openai":
        return None, "the openai provider needs settings.extraction.baseUrl and model"
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None, "no LLM is configured, and sampling through a 2026-07-28 client is not supported yet"
    if not ctx.session.check_client_capability(_SAMPLING):
        return None, "no LLM is configured (settings.extraction) and the client offers no sampling"
    params = ctx.session.client_params
    client = params.client_info.name if params is not None else "client"
    return SamplingLLM(RequestRelay(ctx), settings, client), ""


def extract_function(proxy: Proxy, ctx: ServerRequestContext[Any], session: Session, threshold: int) -> ExtractFn:
    """What `tool_output` calls for auto, full-chunked and read-grep in this request."""

    async def extract(call: Call, text: str, request: str, mode: ExtractMode) -> Extraction:
        settings = proxy.config.settings.extraction
        llm, reason = choose_llm(settings, ctx)
        document = Document(call.public_name, call.arguments_json, call.handle, call.bytes, call.lines, call.tokens)

        def file_tool(name: str) -> FileTool:
            async def run(arguments: dict[str, object]) -> str:
                assert proxy.sandbox is not None
                try:
                    result = await run_file_tool(
                        name,
                        dict(arguments),
                        session=session,
                        sessions=proxy.sessions,
                        sandbox=proxy.sandbox,
                        threshold=threshold,
                    )
                except FileToolError as exc:
                    return str(exc)
                return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))

            return run

        return await proxy.extractor.extract(
            document,
            text,
            call.sha256,
            request,
            mode,
            llm=llm,
            usage=session.usage,
            tools={"Read": file_tool("Read"), "Grep": file_tool("Grep")},
            threshold=threshold,
            unavailable_reason=reason,
        )

    return extract
