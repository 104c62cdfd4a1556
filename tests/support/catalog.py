"""A stand-in for the pool's routes, for catalog tests that rank tool definitions without running servers:
what `server.upstream.tool_catalog` reads of a route (its server's name, the tool, its definition)."""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types as types

__all__ = ["CatalogRoute", "catalog_route"]


@dataclass(frozen=True)
class _Named:
    name: str


@dataclass(frozen=True)
class CatalogRoute:
    downstream: _Named
    tool: str
    definition: types.Tool
    background_param: str | None = None


def catalog_route(server: str, tool: str, definition: types.Tool) -> CatalogRoute:
    return CatalogRoute(_Named(server), tool, definition)
