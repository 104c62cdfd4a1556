"""Resources, templates, prompts and completion through claimcheck, in memory, in both protocol eras."""

from __future__ import annotations

import base64
import logging
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated

from server.config import parse_config
from server.downstream.offerings import parse_template, template_matches
from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support import peers
from tests.support.proxies import proxied, text_of

pytestmark = pytest.mark.anyio

MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])
LOGO = b"\x89PNG\r\n\x1a\n"


def docs_server(greeting: str = "Hello") -> MCPServer:
    """Text and binary resources, a page template, a prompt, and completion that says what it was asked."""
    down = MCPServer("docs")

    @down.resource("docs://readme", mime_type="text/plain")
    def readme() -> str:
        return f"{greeting} readme"

    @down.resource("docs://logo", mime_type="image/png")
    def logo() -> bytes:
        return LOGO

    @down.resource("docs://pages/{page}", mime_type="text/plain")
    def page(page: str) -> str:
        return f"page {page} of docs"

    @down.prompt()
    def greet(name: str, style: str = "plain") -> str:
        return f"{greeting} {name} ({style}) from docs"

    @down.completion()
    async def complete(
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion:
        about = ref.name if isinstance(ref, types.PromptReference) else ref.uri
        return types.Completion(values=[f"{about}:{argument.name}={argument.value}"])

    return down


def notes_server() -> MCPServer:
    """A second server: its own resource, a `{+path}` template, and a prompt of the same name as docs'."""
    down = MCPServer("notes")

    @down.resource("notes://todo", mime_type="text/plain")
    def todo() -> str:
        return "buy milk"

    @down.resource("notes://files/{+path}", mime_type="text/plain")
    def file(path: str) -> str:
        return f"file {path}"

    @down.prompt()
    def greet(name: str) -> str:
        return f"Hi {name} from notes"

    return down


class Live:
    """A low-level downstream whose lists change on demand and that tells subscribers about updates."""

    def __init__(self) -> None:
        self.resources = {"live://a": "A"}
        self.prompts = ["first"]
        self.requests: list[tuple[str, str]] = []
        self.unsubscribed = anyio.Event()
        self.server: Server[Any] = Server(
            "live",
            on_list_resources=self._list_resources,
            on_read_resource=self._read,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_list_tools=self._list_tools,
            on_call_tool=self._call,
        )

    async def _list_resources(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(name=uri[-1], uri=uri) for uri in self.resources])

    async def _read(self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
        text = self.resources[params.uri]
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text=text)])

    async def _subscribe(self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> Any:
        self.requests.append(("subscribe", params.uri))
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> Any:
        self.requests.append(("unsubscribe", params.uri))
        self.unsubscribed.set()
        return types.EmptyResult()

    async def _list_prompts(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name=name) for name in self.prompts])

    async def _get_prompt(self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=params.name))
        return types.GetPromptResult(messages=[message])

    async def _list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
        return types.ListToolsResult(
            tools=[types.Tool(name="grow", input_schema=schema), types.Tool(name="touch", input_schema=schema)]
        )

    async def _call(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        if params.name == "grow":
            self.resources["live://b"] = "B"
            self.prompts.append("second")
            await ctx.session.send_resource_list_changed()
            await ctx.session.send_prompt_list_changed()
        else:
            await ctx.session.send_resource_updated((params.arguments or {})["uri"])
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])


def tools_only() -> tuple[Server[Any], list[str]]:
    """A server without resources, prompts or completion, and the methods it was asked."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="ping", input_schema={"type": "object"})])

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])

    asked: list[str] = []

    async def record(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        asked.append(ctx.method)
        return await call_next(ctx)

    server: Server[Any] = Server("tools-only", on_list_tools=list_tools, on_call_tool=call)
    server.middleware.append(record)
    return server, asked


def only_text(contents: list[types.TextResourceContents | types.BlobResourceContents]) -> str:
    (content,) = contents
    assert isinstance(content, types.TextResourceContents)
    return content.text


def prompt_text(result: types.GetPromptResult) -> str:
    (message,) = result.messages
    assert isinstance(message.content, types.TextContent)
    return message.content.text


@MODES
async def test_resources_of_two_servers_are_listed_with_prefixed_names_and_read_by_their_own_uri(mode: str) -> None:
    async with proxied({"docs": docs_server(), "notes": notes_server()}, mode=mode) as client:
        with anyio.fail_after(5):
            listed = (await client.list_resources()).resources
            readme = await client.read_resource("docs://readme")
            logo = await client.read_resource("docs://logo")
            todo = await client.read_resource("notes://todo")
    assert [(r.name, r.uri) for r in listed] == [
        ("docs__readme", "docs://readme"),
        ("docs__logo", "docs://logo"),
        ("notes__todo", "notes://todo"),
    ]
    assert only_text(readme.contents) == "Hello readme"
    (blob,) = logo.contents
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob) == LOGO
    assert blob.mime_type == "image/png"
    assert only_text(todo.contents) == "buy milk"


@MODES
async def test_templates_are_listed_and_a_uri_is_read_from_the_server_whose_template_matches(mode: str) -> None:
    async with proxied({"docs": docs_server(), "notes": notes_server()}, mode=mode) as client:
        with anyio.fail_after(5):
            templates = (await client.list_resource_templates()).resource_templates
            page = await client.read_resource("docs://pages/7")
            nested = await client.read_resource("notes://files/a/b/c.txt")
    assert [(t.name, t.uri_template) for t in templates] == [
        ("docs__page", "docs://pages/{page}"),
        ("notes__file", "notes://files/{+path}"),
    ]
    assert only_text(page.contents) == "page 7 of docs"
    assert only_text(nested.contents) == "file a/b/c.txt"


@MODES
async def test_reading_a_uri_no_server_knows_is_a_json_rpc_error_naming_the_uri(mode: str) -> None:
    async with proxied({"docs": docs_server(), "notes": notes_server()}, mode=mode) as client:
        with anyio.fail_after(5), pytest.raises(MCPError) as caught:
            await client.read_resource("other://nothing")
        with anyio.fail_after(5):
            still = await client.read_resource("docs://readme")
    assert caught.value.error.code == types.INVALID_PARAMS
    assert 'Unknown resource "other://nothing"' in caught.value.error.message
    assert only_text(still.contents) == "Hello readme"


async def test_with_one_resource_server_an_unlisted_uri_goes_to_it_and_its_error_names_the_server() -> None:
    async with proxied({"docs": docs_server()}) as client:
        with anyio.fail_after(5), pytest.raises(MCPError) as caught:
            await client.read_resource("docs://missing")
    assert caught.value.error.code == types.INVALID_PARAMS
    assert caught.value.error.message.startswith('Server "docs" failed on resources/read: ')
    assert "docs://missing" in caught.value.error.message


@MODES
async def test_prompts_are_listed_prefixed_and_get_goes_to_the_right_server_under_its_own_name(mode: str) -> None:
    async with proxied({"docs": docs_server(), "notes": notes_server()}, mode=mode) as client:
        with anyio.fail_after(5):
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            from_docs = await client.get_prompt("docs__greet", {"name": "Ann", "style": "formal"})
            from_notes = await client.get_prompt("notes__greet", {"name": "Bo"})
            with pytest.raises(MCPError) as caught:
                await client.get_prompt("greet", {"name": "Cy"})
    assert sorted(prompts) == ["docs__greet", "notes__greet"]
    assert [a.name for a in prompts["docs__greet"].arguments or []] == ["name", "style"]
    assert prompt_text(from_docs) == "Hello Ann (formal) from docs"
    assert prompt_text(from_notes) == "Hi Bo from notes"
    assert caught.value.error.code == types.INVALID_PARAMS
    assert 'Unknown prompt "greet"' in caught.value.error.message


@MODES
async def test_completion_goes_to_the_prompts_or_templates_server_with_the_downstream_prompt_name(mode: str) -> None:
    async with proxied({"docs": docs_server(), "notes": notes_server()}, mode=mode) as client:
        with anyio.fail_after(5):
            for_prompt = await client.complete(
                types.PromptReference(type="ref/prompt", name="docs__greet"), {"name": "name", "value": "A"}
            )
            for_template = await client.complete(
                types.ResourceTemplateReference(type="ref/resource", uri="docs://pages/{page}"),
                {"name": "page", "value": "1"},
            )
            without_completion = await client.complete(
                types.PromptReference(type="ref/prompt", name="notes__greet"), {"name": "name", "value": "B"}
            )
    assert for_prompt.completion.values == ["greet:name=A"]
    assert for_template.completion.values == ["docs://pages/{page}:page=1"]
    assert without_completion.completion.values == []  # notes registered no completion handler


async def test_an_empty_prefix_leaves_resource_template_and_prompt_names_unchanged() -> None:
    async with proxied({"docs": docs_server()}, fields={"docs": {"prefix": ""}}) as client:
        with anyio.fail_after(5):
            resources = [r.name for r in (await client.list_resources()).resources]
            templates = [t.name for t in (await client.list_resource_templates()).resource_templates]
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            got = await client.get_prompt("greet", {"name": "Di"})
            completed = await client.complete(
                types.PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "D"}
            )
    assert resources == ["readme", "logo"]
    assert templates == ["page"]
    assert prompts == ["greet"]
    assert prompt_text(got) == "Hello Di (plain) from docs"
    assert completed.completion.values == ["greet:name=D"]


async def test_when_two_servers_list_the_same_uri_the_first_in_config_order_wins_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fields = {"one": {"prefix": ""}, "two": {"prefix": ""}}
    with caplog.at_level(logging.WARNING, logger="server.downstream.offerings"):
        async with proxied({"one": docs_server("First"), "two": docs_server("Second")}, fields=fields) as client:
            with anyio.fail_after(5):
                listed = [(r.name, r.uri) for r in (await client.list_resources()).resources]
                readme = await client.read_resource("docs://readme")
                got = await client.get_prompt("greet", {"name": "Ed"})
    assert listed == [("readme", "docs://readme"), ("logo", "docs://logo")]
    assert only_text(readme.contents) == "First readme"
    assert prompt_text(got) == "First Ed (plain) from docs"
    warnings = [r.getMessage() for r in caplog.records if r.name == "server.downstream.offerings"]
    assert "resource 'docs://readme' of server 'two' hides behind the one of server 'one'" in " ".join(warnings)
    assert any("prompt 'greet' of server 'two'" in w for w in warnings)
    resource = next(w for w in warnings if "resource 'docs://readme'" in w)
    assert "list 'two' before 'one'" in resource and "give" not in resource  # a prefix never changes a URI
    prompt = next(w for w in warnings if "prompt 'greet'" in w)
    assert "give 'two' or 'one' a \"prefix\" of its own" in prompt


@MODES
async def test_capabilities_advertise_resources_with_subscribe_prompts_and_completion(mode: str) -> None:
    async with proxied({"docs": docs_server()}, mode=mode) as client:
        capabilities = client.server_capabilities
    assert capabilities.resources == types.ResourcesCapability(subscribe=True, list_changed=True)
    assert capabilities.prompts == types.PromptsCapability(list_changed=True)
    assert capabilities.completions is not None


async def test_resource_and_prompt_list_changes_reach_a_handshake_era_client() -> None:
    live = Live()
    seen: set[str] = set()
    both = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification | types.PromptListChangedNotification):
            seen.add(message.method)
            if len(seen) == 2:
                both.set()

    async with proxied({"live": live.server}, message_handler=on_message) as client:
        with anyio.fail_after(5):
            before = [r.uri for r in (await client.list_resources()).resources]
            await client.call_tool("live__grow", {})
            await both.wait()
            after = [r.uri for r in (await client.list_resources(cache_mode="refresh")).resources]
            prompts = [p.name for p in (await client.list_prompts(cache_mode="refresh")).prompts]
            grown = await client.read_resource("live://b")
    assert before == ["live://a"]
    assert after == ["live://a", "live://b"]
    assert prompts == ["live__first", "live__second"]
    assert only_text(grown.contents) == "B"


async def test_resource_and_prompt_list_changes_reach_a_2026_client_through_listen() -> None:
    live = Live()
    async with proxied({"live": live.server}, mode="auto") as client:
        with anyio.fail_after(5):
            async with client.listen(resources_list_changed=True, prompts_list_changed=True) as events:
                await client.call_tool("live__grow", {})
                seen = set()
                async for event in events:
                    seen.add(type(event))
                    if len(seen) == 2:
                        break
            prompts = [p.name for p in (await client.list_prompts(cache_mode="refresh")).prompts]
    assert seen == {ResourcesListChanged, PromptsListChanged}
    assert prompts == ["live__first", "live__second"]


async def test_a_subscriber_gets_the_downstreams_updates_until_it_unsubscribes_or_leaves() -> None:
    live = Live()
    updated: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(message.params.uri)
            arrived.set()

    async with proxied({"live": live.server}, message_handler=on_message) as client:
        with anyio.fail_after(5):
            await client.subscribe_resource("live://a")
            await client.call_tool("live__touch", {"uri": "live://a"})
            await arrived.wait()
            await client.unsubscribe_resource("live://a")
            await client.call_tool("live__touch", {"uri": "live://a"})  # no longer followed: dropped
            await client.subscribe_resource("live://b")
            arrived = anyio.Event()
            await client.call_tool("live__touch", {"uri": "live://b"})
            await arrived.wait()
            followed = list(live.requests)
    assert followed == [("subscribe", "live://a"), ("unsubscribe", "live://a"), ("subscribe", "live://b")]
    assert sorted(updated) == ["live://a", "live://b"]
    assert live.requests[3:] == [("unsubscribe", "live://b")]  # the client went away


async def test_a_2026_client_listening_to_a_uri_gets_its_updates_and_the_downstream_is_unsubscribed_after() -> None:
    live = Live()
    received: list[object] = []
    async with proxied({"live": live.server}, mode="auto") as client:
        with anyio.fail_after(5):
            async with client.listen(resource_subscriptions=["live://a"]) as events:
                await client.call_tool("live__touch", {"uri": "live://a"})
                async for event in events:
                    received.append(event)
                    break
            await live.unsubscribed.wait()
    assert received == [ResourceUpdated(uri="live://a")]
    assert live.requests == [("subscribe", "live://a"), ("unsubscribe", "live://a")]


@MODES
async def test_a_server_without_resources_or_prompts_is_skipped_and_never_asked_for_them(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    bare, asked = tools_only()
    with caplog.at_level(logging.WARNING):
        async with proxied({"bare": bare, "docs": docs_server()}, mode=mode) as client:
            with anyio.fail_after(5):
                resources = [r.uri for r in (await client.list_resources()).resources]
                prompts = [p.name for p in (await client.list_prompts()).prompts]
                readme = await client.read_resource("docs://readme")
                pong = await client.call_tool("bare__ping", {})
    assert resources == ["docs://readme", "docs://logo"]
    assert prompts == ["docs__greet"]
    assert only_text(readme.contents) == "Hello readme"
    assert text_of(pong) == "pong"
    assert not {"resources/list", "resources/templates/list", "prompts/list"} & set(asked)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("test://template/{id}/data", "test://template/123/data", True),
        ("test://template/{id}/data", "test://template/1/2/data", False),
        ("test://template/{id}/data", "test://template/123/data/more", False),
        ("docs://pages/{page}.{ext}", "docs://pages/intro.md", True),
        ("file:///{+path}", "file:///etc/hosts", True),
        ("repo://{owner}/{name*}", "repo://me/a/b", True),
        ("search://items{?q,limit}", "search://items?q=x&limit=3", True),
        ("search://items{?q,limit}", "search://items", True),
        ("search://items{?q,limit}", "search://other", False),
        ("map://{x}{/path}", "map://here/a", True),
        ("plain://exact", "plain://exact", True),
        ("broken://{unclosed", "broken://{unclosed", True),
    ],
)
def test_uri_templates_match_the_uris_they_expand_to(template: str, uri: str, matches: bool) -> None:
    assert template_matches(parse_template(template), uri) is matches


def test_a_long_uri_against_adjacent_variables_is_refused_without_backtracking() -> None:
    # a regex of four adjacent `[^/]*` would try ~20 000**4 splits here before giving up
    assert not template_matches(parse_template("x://{a}{b}{c}{d}/end"), "x://" + "a" * 20_000 + "/nope")


@pytest.mark.interop
@pytest.mark.subprocess
async def test_server_everything_resources_and_prompts_through_claimcheck() -> None:
    command, *args = peers.everything_command()
    starting = Proxy.start(parse_config({"mcpServers": {"ev": {"command": command, "args": args}}}))
    async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
        with anyio.fail_after(60):
            resources = {r.uri: r for r in (await client.list_resources()).resources}
            document = await client.read_resource("demo://resource/static/document/architecture.md")
            dynamic = await client.read_resource("demo://resource/dynamic/text/7")
            prompt = await client.get_prompt("ev__args-prompt", {"city": "Lisbon"})
    architecture = resources["demo://resource/static/document/architecture.md"]
    assert architecture.name == "ev__architecture.md"
    assert len(only_text(document.contents)) > 100
    assert "7" in only_text(dynamic.contents)
    assert "Lisbon" in prompt_text(prompt)
