"""What every downstream offers besides tools (resources, resource templates and prompts), and where a request
about one goes. (The tool catalog of `settings.catalog` is another thing: `handles/tool_catalog.py`.)

Prompt names, and the `name` of resources and templates, are public names like tool names
(`<prefix><separator><name>`; unchanged with `prefix: ""`). URIs and URI templates are not rewritten:
they stay readable, and clients may know them already. When two servers list the same URI, template
or public prompt name, the first server in config order keeps it and a warning is logged. A URI is
read from the server that lists it, else from the first whose template matches it, else from the
only server that offers resources.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError

from server.downstream.naming import public_name
from server.downstream.requests import forward_request
from server.downstream.server import Downstream
from server.errors import clip

__all__ = ["Announcer", "Offerings", "PromptRoute", "Subscriptions", "offers", "template_matches"]

logger = logging.getLogger(__name__)

UNSUBSCRIBE_TIMEOUT_S = 10.0
Feature = Literal["resources", "prompts", "completions"]
_D = TypeVar("_D", types.Resource, types.ResourceTemplate)


class Announcer(Protocol):
    """Tells the clients what changed (the proxy)."""

    async def announce_resources_changed(self) -> None: ...

    async def announce_prompts_changed(self) -> None: ...

    async def announce_resource_updated(self, uri: str) -> None: ...


@dataclass(frozen=True, slots=True)
class PromptRoute:
    """Where a public prompt name goes."""

    public: str
    downstream: Downstream
    name: str
    definition: types.Prompt


@dataclass(frozen=True, slots=True)
class _Listed(Generic[_D]):
    downstream: Downstream
    definition: _D


def offers(downstream: Downstream, feature: Feature) -> bool:
    """Whether the server advertised `feature` when it last connected."""
    capabilities = downstream.capabilities
    return capabilities is not None and getattr(capabilities, feature) is not None


class Offerings:
    """The routing tables of resources, templates and prompts, rebuilt when a server's lists change."""

    def __init__(self, separator: str, announcer: Announcer) -> None:
        """Made before the pool, which gives it to each server's first process as its observer; it follows the
        pool's servers from `follow` on."""
        self.downstreams: list[Downstream] = []
        self.separator = separator
        self.subscriptions = Subscriptions()
        self._announcer = announcer
        self._resources: dict[str, _Listed[types.Resource]] = {}
        self._templates: dict[str, _Listed[types.ResourceTemplate]] = {}
        self._patterns: dict[str, list[_Token]] = {}
        self._prompts: dict[str, PromptRoute] = {}
        self._warned: set[tuple[str, str, str]] = set()

    def follow(self, downstreams: Sequence[Downstream]) -> None:
        """The pool's servers (each of which has this as its observer) are now `downstreams`."""
        self.downstreams = list(downstreams)

    def resources(self) -> list[types.Resource]:
        return [listed.definition for listed in self._resources.values()]

    def templates(self) -> list[types.ResourceTemplate]:
        return [listed.definition for listed in self._templates.values()]

    def prompts(self) -> list[types.Prompt]:
        return [route.definition for route in self._prompts.values()]

    def prompt(self, name: str) -> PromptRoute:
        route = self._prompts.get(name)
        if route is None:
            why = f'Unknown prompt "{clip(name)}". Call prompts/list to see the prompts.'
            raise MCPError(types.INVALID_PARAMS, why)
        return route

    def resource_server(self, uri: str) -> Downstream:
        """The server a URI is read from: the one listing it, the first template match, or the only one."""
        if (listed := self._resources.get(uri)) is not None:
            return listed.downstream
        for template, candidate in self._templates.items():
            if template_matches(self._patterns[template], uri):
                return candidate.downstream
        offering = [downstream for downstream in self.downstreams if offers(downstream, "resources")]
        if len(offering) == 1:
            return offering[0]
        raise MCPError(
            types.INVALID_PARAMS,
            f'Unknown resource "{clip(uri)}": no server lists it or a template that matches it. '
            "Call resources/list or resources/templates/list to see the resources.",
            {"uri": clip(uri)},
        )

    def template_server(self, uri_template: str) -> Downstream:
        """The server of a resource template (for completion), else as for a URI."""
        template = self._templates.get(uri_template)
        return template.downstream if template is not None else self.resource_server(uri_template)

    # -- what the downstreams say ------------------------------------------------------------

    async def connected(self, downstream: Downstream) -> None:
        # The tables are rebuilt before the first await, so requests released by `pool.listable()`
        # (which this server's first connection may complete) find them whole.
        await self.lists_changed(downstream)
        await self.subscriptions.renew(downstream)

    async def servers_changed(self, downstreams: Sequence[Downstream]) -> None:
        """The pool's servers are now `downstreams` (a reloaded config): follow them, and tell the clients which
        of their lists changed (a server started now adds its own once it connects)."""
        self.follow(downstreams)
        await self._rebuilt()

    async def lists_changed(self, downstream: Downstream) -> None:
        await self._rebuilt()

    async def _rebuilt(self) -> None:
        before = (self.resources(), self.templates(), self.prompts())
        self.rebuild()
        if before[:2] != (self.resources(), self.templates()):
            await self._announcer.announce_resources_changed()
        if before[2] != self.prompts():
            await self._announcer.announce_prompts_changed()

    async def resource_updated(self, downstream: Downstream, uri: str) -> None:
        if self.subscriptions.holder(uri) is downstream:
            await self._announcer.announce_resource_updated(uri)

    def rebuild(self) -> None:
        resources: dict[str, _Listed[types.Resource]] = {}
        templates: dict[str, _Listed[types.ResourceTemplate]] = {}
        prompts: dict[str, PromptRoute] = {}
        for downstream in self.downstreams:
            prefix = downstream.name if downstream.config.prefix is None else downstream.config.prefix
            for resource in downstream.resources.values():
                if self._free(resources.get(resource.uri), resource.uri, downstream, "resource"):
                    name = public_name(prefix, self.separator, resource.name)
                    resources[resource.uri] = _Listed(downstream, resource.model_copy(update={"name": name}))
            for template in downstream.templates.values():
                if self._free(templates.get(template.uri_template), template.uri_template, downstream, "template"):
                    name = public_name(prefix, self.separator, template.name)
                    templates[template.uri_template] = _Listed(downstream, template.model_copy(update={"name": name}))
            for prompt in downstream.prompts.values():
                public = public_name(prefix, self.separator, prompt.name)
                if self._free(prompts.get(public), public, downstream, "prompt"):
                    definition = prompt.model_copy(update={"name": public})
                    prompts[public] = PromptRoute(public, downstream, prompt.name, definition)
        self._resources, self._templates, self._prompts = resources, templates, prompts
        self._patterns = {template: parse_template(template) for template in templates}

    def _free(self, holder: _Listed[Any] | PromptRoute | None, key: str, downstream: Downstream, kind: str) -> bool:
        """Whether `key` is still free; when an earlier server has it, warn once per clash."""
        if holder is None:
            return True
        if (kind, key, downstream.name) not in self._warned:
            self._warned.add((kind, key, downstream.name))
            logger.warning(
                "%s %r of server %r hides behind the one of server %r; %s",
                kind,
                key,
                downstream.name,
                holder.downstream.name,
                _CLASH_ADVICE[kind].format(server=downstream.name, holder=holder.downstream.name),
            )
        return False


_CLASH_ADVICE = {
    # URIs are never prefixed: only the order of mcpServers decides which server serves one.
    "resource": "URIs are not prefixed, so the first server in mcpServers serves it; to read it from {server!r}, "
    "list {server!r} before {holder!r} (or disable one of them)",
    "template": "URI templates are not prefixed, so the first server in mcpServers serves it; to read from "
    "{server!r}, list {server!r} before {holder!r} (or disable one of them)",
    "prompt": 'prompt names carry the server\'s prefix: give {server!r} or {holder!r} a "prefix" of its own in '
    "mcpServers (they share one now)",
}
"""What to do about a clash of each kind: advice that works (a prefix changes names, never URIs)."""


# -- URI templates (RFC 6570) ----------------------------------------------------------------

_Token = str | tuple[str, str]
"""A literal, or one expression as (the character it starts with when present, characters its value cannot hold)."""

_OPERATORS: dict[str, tuple[str, str]] = {
    "": ("", "/?#"),
    "+": ("", ""),
    "#": ("#", ""),
    ".": (".", "/?#"),
    "/": ("/", "?#"),
    ";": (";", "/?#"),
    "?": ("?", "#"),
    "&": ("&", "#"),
}


def parse_template(template: str) -> list[_Token]:
    """`{var}` is one value without `/`, `?` or `#` (level 1); `{+var}` and exploded `{var*}` take anything;
    the other operators match their part when it is there. Anything unparsable is literal text."""
    tokens: list[_Token] = []
    position = 0
    while (start := template.find("{", position)) >= 0 and (end := template.find("}", start)) >= 0:
        tokens.append(template[position:start])
        body = template[start + 1 : end]
        operator = body[:1] if body[:1] in _OPERATORS and body[:1] else ""
        lead, stops = _OPERATORS[operator]
        tokens.append((lead, "" if operator == "" and "*" in body else stops))
        position = end + 1
    tokens.append(template[position:])
    return [token for token in tokens if token != ""]


def template_matches(tokens: Sequence[_Token], uri: str) -> bool:
    """Whether `uri` is an expansion of the parsed template; linear in the URI per expression, no regex."""
    reach = {0}
    for token in tokens:
        if isinstance(token, str):
            reach = {at + len(token) for at in reach if uri.startswith(token, at)}
        else:
            lead, stops = token
            if lead:  # an optional part: absent, or its lead character and a value
                reach = reach | _value_ends(uri, {at + 1 for at in reach if uri.startswith(lead, at)}, stops)
            else:
                reach = _value_ends(uri, reach, stops)
        if not reach:
            return False
    return len(uri) in reach


def _value_ends(uri: str, starts: set[int], stops: str) -> set[int]:
    """Every place a value that begins at one of `starts` and holds none of `stops` can end."""
    ends: set[int] = set()
    covered = -1
    for start in sorted(starts):
        if start <= covered:  # inside the previous value's run: its ends are counted already
            continue
        end = start
        while end < len(uri) and uri[end] not in stops:
            end += 1
        ends.update(range(start, end + 1))
        covered = end
    return ends


# -- subscriptions ---------------------------------------------------------------------------


@dataclass(eq=False)
class _Follower:
    session: ServerSession
    uris: set[str]


@dataclass(eq=False)
class _Held:
    downstream: Downstream
    count: int
    generation: int
    """The server's restart count when it was subscribed: a restarted server has to be asked again."""


class Subscriptions:
    """Who follows which URI, and the one downstream subscription per URI that serves them all.

    Followers are handshake-era client connections (`resources/subscribe`) and 2026-era
    `subscriptions/listen` streams; the downstream is subscribed for the first and unsubscribed
    after the last. A server that cannot send updates is not asked; its URIs never fire.
    """

    def __init__(self) -> None:
        self._followers: dict[object, _Follower] = {}
        self._held: dict[str, _Held] = {}

    def holder(self, uri: str) -> Downstream | None:
        held = self._held.get(uri)
        return held.downstream if held is not None else None

    def followers(self, uri: str) -> list[tuple[object, ServerSession]]:
        return [(key, f.session) for key, f in self._followers.items() if uri in f.uris]

    async def follow(self, key: object, session: ServerSession, uri: str, downstream: Downstream) -> None:
        follower = self._followers.setdefault(key, _Follower(session, set()))
        if uri not in follower.uris:
            await self.hold(uri, downstream)
            follower.uris.add(uri)

    async def unfollow(self, key: object, uri: str) -> None:
        follower = self._followers.get(key)
        if follower is not None and uri in follower.uris:
            follower.uris.discard(uri)
            await self.release(uri)

    async def forget(self, key: object) -> None:
        """Drop a client that went away, with every URI it followed."""
        follower = self._followers.pop(key, None)
        for uri in follower.uris if follower is not None else ():
            await self.release(uri)

    async def hold(self, uri: str, downstream: Downstream) -> None:
        held = self._held.get(uri)
        if held is not None:
            held.count += 1
            return
        self._held[uri] = held = _Held(downstream, 1, downstream.restarts)
        try:
            await _subscribe(downstream, uri, subscribe=True)
        except BaseException:
            held.count -= 1
            if held.count == 0 and self._held.get(uri) is held:
                del self._held[uri]
            raise

    async def release(self, uri: str) -> None:
        held = self._held.get(uri)
        if held is None:
            return
        held.count -= 1
        if held.count > 0:
            return
        del self._held[uri]
        if held.downstream.state != "ready":
            return  # a server that is down has no subscriptions left
        with anyio.move_on_after(UNSUBSCRIBE_TIMEOUT_S, shield=True):
            try:
                await _subscribe(held.downstream, uri, subscribe=False)
            except MCPError as exc:
                logger.warning("%s", exc.error.message)

    async def renew(self, downstream: Downstream) -> None:
        """Subscribe a server that restarted to the URIs followed through it."""
        for uri, held in list(self._held.items()):
            if held.downstream is downstream and held.generation != downstream.restarts:
                held.generation = downstream.restarts
                with anyio.move_on_after(UNSUBSCRIBE_TIMEOUT_S):
                    try:
                        await _subscribe(downstream, uri, subscribe=True)
                    except MCPError as exc:
                        logger.warning("%s", exc.error.message)


async def _subscribe(downstream: Downstream, uri: str, *, subscribe: bool) -> None:
    capabilities = downstream.capabilities
    if capabilities is None or capabilities.resources is None or not capabilities.resources.subscribe:
        return
    if subscribe:
        await forward_request(downstream, "resources/subscribe", lambda client: client.subscribe_resource(uri))
    else:
        await forward_request(downstream, "resources/unsubscribe", lambda client: client.unsubscribe_resource(uri))
