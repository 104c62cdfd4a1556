"""The fixtures the official MCP conformance suite's server scenarios call, as one MCP server.

Built from the "Server Implementation Requirements" of `@modelcontextprotocol/conformance` 0.1.16
(`docs/conformance.md`). It runs over stdio, the way claimcheck starts a downstream
(`python -m tests.support.servers.conformance_server`), or over streamable HTTP at `/mcp` so the suite can be run
against it alone (`python -m tests.support.servers.conformance_server --http PORT`; 0 picks a free port, and the URL
is announced on stderr). Sampling and elicitation use the handshake era's server-to-client requests,
which is what the suite speaks (2025-11-25).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from server.upstream.event_store import BoundedEventStore
from tests.support.servers.conformance_tools import PNG_1X1_RED, RETRY_MS, Context, ToolFixtures

__all__ = ["build_server"]

_TEMPLATE = re.compile(r"test://template/(?P<id>[^/]+)/data")


class Fixtures(ToolFixtures):
    """The tools plus resources (and the ones clients watch), prompts, completion and logging."""

    def __init__(self) -> None:
        super().__init__()
        self.subscribed: set[str] = set()

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
