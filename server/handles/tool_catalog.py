"""The catalog behind a ticket: what `tools/list` holds when the servers' tools are searched, and `find_tools`.

In search mode a client's list is claimcheck's own tools, `find_tools` and `call_tool`, the pinned tools of each
server (`mcpServers.<name>.pinned`), and the tools that client found (`found`: its connection's, or for a
2026-07-28 client its session's; `server.upstream.tool_catalog`), in the pool's order. The index is the pool's,
one per process, so every session of the shared claimcheck and every HTTP owner searches the same one. A found tool
stays listed for as long as its connection or session lives (at most `FOUND_MAX`, the oldest leaving first).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase

import mcp_types as types

from extraction.wording import plural
from server.downstream.pool import Pool, Route
from server.downstream.server import Downstream
from server.handles.catalog_tools import CALL_TOOL, FindArgs, catalog_tool_definitions

__all__ = ["FOUND_MAX", "Found", "find_answer", "listed_routes", "pinned"]

Found = dict[str, None]
"""The tools a client found, oldest first (an ordered set)."""

FOUND_MAX = 64
"""The most found tools a session's list keeps."""
_DESCRIPTION_CHARS = 300


def pinned(route: Route) -> bool:
    return any(fnmatchcase(route.tool, pattern) for pattern in route.downstream.config.pinned)


def listed_routes(pool: Pool, found: Found) -> list[types.Tool]:
    """The servers' tools a searched list holds for a client: `find_tools`, `call_tool`, pinned, then `found`."""
    kept = [route.definition for public, route in pool.routes.items() if public in found or pinned(route)]
    return [*catalog_tool_definitions(), *kept]


def find_answer(pool: Pool, found: Found, args: FindArgs) -> tuple[str, list[str]]:
    """The text `find_tools` answers, and the names it added to `found`."""
    names = pool.tool_search.find(pool.routes, args.query, args.limit)
    routes = [pool.routes[name] for name in names]
    lines = [_entry(route) for route in routes]
    unknown = [d for d in pool.downstreams if d.state != "ready" and not d.tools]
    lines += [f'(Server "{d.name}" is {_down(d)}: its tools are not known until it starts.)' for d in unknown]
    if not routes:
        servers = ", ".join(f"{d.name} ({plural(len(d.tools), 'tool')})" for d in pool.downstreams) or "none"
        lines.insert(0, f'No tool matches "{args.query[:100]}". Try other words; the servers are: {servers}.')
        return "\n".join(lines), []
    added = _remember(found, names)
    lines.append(
        f"Call a tool by its name, or with {CALL_TOOL}(name, arguments) if your tool list does not show it yet."
    )
    return "\n\n".join(lines), added


def _remember(kept: Found, names: list[str]) -> list[str]:
    added = [name for name in names if name not in kept]
    for name in names:
        kept.pop(name, None)
        kept[name] = None
    while len(kept) > FOUND_MAX:
        kept.pop(next(iter(kept)))
    return added


def _entry(route: Route) -> str:
    definition = route.definition
    description = " ".join((definition.description or "").split())
    if len(description) > _DESCRIPTION_CHARS:
        description = description[: _DESCRIPTION_CHARS - 1] + "…"
    server = route.downstream
    state = "" if server.state == "ready" else f" [server {_down(server)}]"
    schema = json.dumps(definition.input_schema, separators=(",", ":"), ensure_ascii=False)
    return f"{definition.name} (server {server.name}){state}: {description}\ninputSchema: {schema}"


def _down(server: Downstream) -> str:
    why = f" ({server.last_error})" if server.last_error else ""
    if server.state == "failed":
        return f"down: it {server.backoff.not_started(server.last_error)}"
    if server.state == "down":
        return f"down{why}; a call restarts it"
    return f"still starting{why}"
