"""The tool fixtures of the official MCP conformance suite's server scenarios (see conformance_server.py).

Text, image, audio, embedded resources, logging, progress, errors, sampling, elicitation (SEP-1034, SEP-1330)
and a tool that drops its SSE stream mid-call (SEP-1699), with the log level they honour.
"""

from __future__ import annotations

import base64
import io
import json
import warnings
import wave
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata

from server.downstream.relay import LOG_LEVELS

__all__ = ["PNG_1X1_RED", "RETRY_MS", "Context", "ToolFixtures"]

STEP_S = 0.05  # the ~50 ms the suite asks for between log messages and progress notifications
RETRY_MS = 500  # what the HTTP transport tells a client to wait before it reconnects (SEP-1699)
PNG_1X1_RED = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())
_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())

Context = ServerRequestContext[Any]
R = TypeVar("R", bound=types.Result)
ToolBody = Callable[[Context, dict[str, Any]], Awaitable[types.CallToolResult]]


def _wav_base64() -> str:
    """A tenth of a second of 8 kHz mono silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 800)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _object(properties: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return schema


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


class ToolFixtures:
    """Per-process state of the tools: the log level clients set, and the tools themselves."""

    def __init__(self) -> None:
        self.log_level: types.LoggingLevel = "debug"
        self.audio = _wav_base64()
        self.tools: dict[str, tuple[types.Tool, ToolBody]] = {}
        for name, description, schema, body in self._tool_table():
            self.tools[name] = (types.Tool(name=name, description=description, input_schema=schema), body)

    def _tool_table(self) -> list[tuple[str, str, dict[str, Any], ToolBody]]:
        address = _object({"street": {"type": "string"}, "city": {"type": "string"}})
        schema_2020_12 = {
            "$schema": JSON_SCHEMA_2020_12,
            "type": "object",
            "$defs": {"address": address},
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        }
        return [
            ("test_simple_text", "Returns simple text content", _object(), self.simple_text),
            ("test_image_content", "Returns a 1x1 red PNG", _object(), self.image),
            ("test_audio_content", "Returns a short WAV", _object(), self.audio_content),
            ("test_embedded_resource", "Returns an embedded text resource", _object(), self.embedded_resource),
            ("test_multiple_content_types", "Returns text, image and resource", _object(), self.mixed),
            ("test_tool_with_logging", "Sends three info log messages", _object(), self.with_logging),
            ("test_tool_with_progress", "Reports progress 0, 50, 100 of 100", _object(), self.with_progress),
            ("test_error_handling", "Always fails with an isError result", _object(), self.error),
            (
                "test_sampling",
                "Asks the client's LLM",
                _object({"prompt": _string("The prompt to send to the LLM")}, ["prompt"]),
                self.sampling,
            ),
            (
                "test_elicitation",
                "Asks the user for a username and email",
                _object({"message": _string("The message to show the user")}, ["message"]),
                self.elicitation,
            ),
            ("test_elicitation_sep1034_defaults", "Elicits with defaults (SEP-1034)", _object(), self.sep1034),
            ("test_elicitation_sep1330_enums", "Elicits with enum schemas (SEP-1330)", _object(), self.sep1330),
            ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", schema_2020_12, self.simple_text),
            ("test_reconnection", "Closes its SSE stream mid-call (SEP-1699)", _object(), self.reconnection),
        ]

    # -- tools ---------------------------------------------------------------------------------

    async def call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        entry = self.tools.get(params.name)
        if entry is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return await entry[1](ctx, params.arguments or {})

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool for tool, _ in self.tools.values()])

    async def simple_text(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return _text("This is a simple text response for testing.")

    async def image(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG_1X1_RED, mime_type="image/png")])

    async def audio_content(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=self.audio, mime_type="audio/wav")])

    async def embedded_resource(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        resource = types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
        )
        return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])

    async def mixed(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        resource = types.TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text=json.dumps({"test": "data", "value": 123}),
        )
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="Multiple content types test:"),
                types.ImageContent(type="image", data=PNG_1X1_RED, mime_type="image/png"),
                types.EmbeddedResource(type="resource", resource=resource),
            ]
        )

    async def with_logging(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        for i, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if i:
                await anyio.sleep(STEP_S)
            await self._log(ctx, "info", message)
        return _text("Tool with logging executed successfully")

    async def with_progress(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        for i, progress in enumerate((0, 50, 100)):
            if i:
                await anyio.sleep(STEP_S)
            await ctx.session.report_progress(progress, 100, f"{progress}% done")
        return _text("Tool with progress executed successfully")

    async def error(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return _text("This tool intentionally returns an error for testing", is_error=True)

    async def sampling(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        if not ctx.session.check_client_capability(_SAMPLING):
            return _text("The client does not support sampling", is_error=True)
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=str(args["prompt"])))
        params = types.CreateMessageRequestParams(messages=[message], max_tokens=100)
        request = types.CreateMessageRequest(params=params)
        answer = await self._ask(ctx, request, types.CreateMessageResult)
        content = answer.content
        text = content.text if isinstance(content, types.TextContent) else content.model_dump_json(by_alias=True)
        return _text(f"LLM response: {text}")

    async def elicitation(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        schema = _object(
            {"username": _string("User's response"), "email": _string("User's email address")}, ["username", "email"]
        )
        answer = await self._elicit(ctx, str(args["message"]), schema)
        if isinstance(answer, types.CallToolResult):
            return answer
        return _text(f"User response: action={answer.action}, content={json.dumps(answer.content)}")

    async def sep1034(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        schema = _object(
            {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            }
        )
        return await self._elicit_completed(ctx, "Please review and update the form fields with defaults", schema)

    async def sep1330(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        def titled(prefix: str, titles: tuple[str, ...]) -> list[dict[str, str]]:
            return [{"const": f"{prefix}{i}", "title": title} for i, title in enumerate(titles, 1)]

        schema = _object(
            {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": titled("value", ("First Option", "Second Option", "Third Option")),
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "items": {"anyOf": titled("value", ("First Choice", "Second Choice", "Third Choice"))},
                },
            }
        )
        return await self._elicit_completed(ctx, "Please select options from the enum fields", schema)

    async def reconnection(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        """Close this request's SSE stream (HTTP with an event store only); the answer is replayed on reconnect."""
        if ctx.close_sse_stream is not None:
            await anyio.sleep(STEP_S)
            await ctx.close_sse_stream()
            await anyio.sleep(STEP_S * 4)
        return _text("Reconnection test completed successfully")

    async def _elicit_completed(self, ctx: Context, message: str, schema: dict[str, Any]) -> types.CallToolResult:
        answer = await self._elicit(ctx, message, schema)
        if isinstance(answer, types.CallToolResult):
            return answer
        return _text(f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}")

    async def _elicit(
        self, ctx: Context, message: str, schema: dict[str, Any]
    ) -> types.ElicitResult | types.CallToolResult:
        if not ctx.session.check_client_capability(_ELICITATION):
            return _text("The client does not support elicitation", is_error=True)
        params = types.ElicitRequestFormParams(message=message, requested_schema=schema)
        return await self._ask(ctx, types.ElicitRequest(params=params), types.ElicitResult)

    async def _ask(self, ctx: Context, request: types.ServerRequest, result_type: type[R]) -> R:
        metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
        return await ctx.session.send_request(request, result_type, metadata=metadata)

    async def _log(self, ctx: Context, level: types.LoggingLevel, message: str) -> None:
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message(level, message, logger="conformance", related_request_id=ctx.request_id)
