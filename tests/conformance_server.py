"""The fixtures the official MCP conformance suite's server scenarios call, as one MCP server.

Built from the "Server Implementation Requirements" of `@modelcontextprotocol/conformance` 0.1.16
(`docs/conformance.md`). It runs over stdio, the way claimcheck starts a downstream
(`python tests/conformance_server.py`), or over streamable HTTP at `/mcp` so the suite can be run
against it alone (`python tests/conformance_server.py --http PORT`; 0 picks a free port, and the URL
is announced on stderr). Sampling and elicitation use the handshake era's server-to-client requests,
which is what the suite speaks (2025-11-25).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import socket
import sys
import warnings
import wave
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata

from server.event_store import BoundedEventStore
from server.relay import LOG_LEVELS

__all__ = ["build_server"]

STEP_S = 0.05  # the ~50 ms the suite asks for between log messages and progress notifications
RETRY_MS = 500  # what the HTTP transport tells a client to wait before it reconnects (SEP-1699)
PNG_1X1_RED = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_TEMPLATE = re.compile(r"test://template/(?P<id>[^/]+)/data")
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


class Fixtures:
    """Per-process state: the log level clients set, and the resources they watch."""

    def __init__(self) -> None:
        self.log_level: types.LoggingLevel = "debug"
        self.subscribed: set[str] = set()
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

    # -- resources -------------------------------------------------------------------------------

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        def resource(uri: str, name: str, mime_type: str, description: str) -> types.Resource:
            return types.Resource(uri=uri, name=name, mime_type=mime_type, description=description)

        return types.ListResourcesResult(
            resources=[
                resource("test://static-text", "static-text", "text/plain", "A static text resource"),
                resource("test://static-binary", "static-binary", "image/png", "A static binary resource"),
                resource("test://watched-resource", "watched-resource", "text/plain", "A resource to subscribe to"),
            ]
        )

    async def list_resource_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            name="template-data",
            uri_template="test://template/{id}/data",
            mime_type="application/json",
            description="Data for one id",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = params.uri
        contents: types.TextResourceContents | types.BlobResourceContents
        if uri == "test://static-text":
            text = "This is the content of the static text resource."
            contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)
        elif uri == "test://static-binary":
            contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG_1X1_RED)
        elif uri == "test://watched-resource":
            contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content.")
        elif match := _TEMPLATE.fullmatch(uri):
            data = {"id": match["id"], "templateTest": True, "data": f"Data for ID: {match['id']}"}
            contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(data))
        else:
            raise MCPError(-32002, f"Resource not found: {uri}", {"uri": uri})
        return types.ReadResourceResult(contents=[contents])

    async def subscribe(self, ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.add(params.uri)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.subscribed.discard(params.uri)
        return types.EmptyResult()

    # -- prompts, completion, logging ------------------------------------------------------------

    async def list_prompts(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        def argument(name: str, description: str) -> types.PromptArgument:
            return types.PromptArgument(name=name, description=description, required=True)

        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
                types.Prompt(
                    name="test_prompt_with_arguments",
                    description="A prompt with two required arguments",
                    arguments=[argument("arg1", "First test argument"), argument("arg2", "Second test argument")],
                ),
                types.Prompt(
                    name="test_prompt_with_embedded_resource",
                    description="A prompt that embeds a resource",
                    arguments=[argument("resourceUri", "URI of the resource to embed")],
                ),
                types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
            ]
        )

    async def get_prompt(self, ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        args = params.arguments or {}

        def user(content: types.TextContent | types.ImageContent | types.EmbeddedResource) -> types.PromptMessage:
            return types.PromptMessage(role="user", content=content)

        def text(value: str) -> types.PromptMessage:
            return user(types.TextContent(type="text", text=value))

        if params.name == "test_simple_prompt":
            messages = [text("This is a simple prompt for testing.")]
        elif params.name == "test_prompt_with_arguments":
            messages = [text(f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'")]
        elif params.name == "test_prompt_with_embedded_resource":
            resource = types.TextResourceContents(
                uri=args.get("resourceUri", "test://example-resource"),
                mime_type="text/plain",
                text="Embedded resource content for testing.",
            )
            embedded = types.EmbeddedResource(type="resource", resource=resource)
            messages = [user(embedded), text("Please process the embedded resource above.")]
        elif params.name == "test_prompt_with_image":
            image = types.ImageContent(type="image", data=PNG_1X1_RED, mime_type="image/png")
            messages = [user(image), text("Please analyze the image above.")]
        else:
            raise MCPError(types.INVALID_PARAMS, f"Prompt not found: {params.name}")
        return types.GetPromptResult(messages=messages)

    async def complete(self, ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        candidates = {"arg1": ["paris", "park", "party"], "arg2": ["hello", "world"], "id": ["123", "456"]}
        typed = params.argument.value
        values = [v for v in candidates.get(params.argument.name, []) if v.startswith(typed)]
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))

    async def set_logging_level(self, ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.log_level = params.level
        return types.EmptyResult()


def build_server() -> Server[Any]:
    """A fresh server with every conformance fixture."""
    fixtures = Fixtures()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is deprecated at 2026-07-28, not before
        return Server(
            "claimcheck-conformance-fixture",
            version="1.0.0",
            on_list_tools=fixtures.list_tools,
            on_call_tool=fixtures.call_tool,
            on_list_resources=fixtures.list_resources,
            on_list_resource_templates=fixtures.list_resource_templates,
            on_read_resource=fixtures.read_resource,
            on_subscribe_resource=fixtures.subscribe,
            on_unsubscribe_resource=fixtures.unsubscribe,
            on_list_prompts=fixtures.list_prompts,
            on_get_prompt=fixtures.get_prompt,
            on_completion=fixtures.complete,
            on_set_logging_level=fixtures.set_logging_level,
        )


async def serve_stdio() -> None:
    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(port: int) -> None:
    server = build_server()
    app = server.streamable_http_app(
        streamable_http_path="/mcp", host="127.0.0.1", event_store=BoundedEventStore(), retry_interval=RETRY_MS
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    print(f"conformance fixture: serving MCP over streamable HTTP at {url}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT (0: any)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    if args.http is None:
        anyio.run(serve_stdio)
    else:
        anyio.run(serve_http, args.http)


if __name__ == "__main__":
    main()
