"""claimcheck behind claimcheck: what one claimcheck declares on purpose so that another in front of it
becomes the only layer that makes handles.

A claimcheck marks each tool it serves in the tool's `_meta`: its own tools with `OWN`, the tools it
forwards with `PROXIED` (naming the `background` argument it added, if it did). A claimcheck in front
of it leaves the `OWN` tools out of its listing, takes the added `background` argument as its own, and
calls a `PROXIED` tool with `PASSTHROUGH` in the request's `_meta`; the one behind then answers that call
as a plain pass-through (no time rule, no size rule, no footer). Marks on tools survive other proxies in
between that keep a tool's `_meta`, so mixed chains work as well. The server also declares the
`CAPABILITY` experimental capability, for people and tools that look.
"""

from __future__ import annotations

from typing import Any, cast

import mcp_types as types

__all__ = ["CAPABILITY", "OWN", "PASSTHROUGH", "PROXIED", "asks_passthrough", "mark", "mark_of", "passthrough_meta"]

CAPABILITY = "io.claimcheck"
OWN = "io.claimcheck/own"
PROXIED = "io.claimcheck/proxied"
PASSTHROUGH = "io.claimcheck/passthrough"


def mark(tool: types.Tool, key: str, value: Any) -> types.Tool:
    """`tool` with `key` set in its `_meta` (other keys kept; a downstream claimcheck's marks dropped)."""
    meta = {k: v for k, v in (tool.meta or {}).items() if k not in (OWN, PROXIED)}
    meta[key] = value
    return tool.model_copy(update={"meta": meta})


def mark_of(tool: types.Tool, key: str) -> Any:
    """The value of `key` in the tool's `_meta`, or None."""
    return (tool.meta or {}).get(key)


def asks_passthrough(params: types.CallToolRequestParams) -> bool:
    """Whether a claimcheck in front asks for this call to be served as a plain pass-through."""
    meta: Any = params.meta or {}
    return bool(meta.get(PASSTHROUGH))


def passthrough_meta(definition: types.Tool | None) -> types.RequestParamsMeta | None:
    """The `_meta` of a call to a tool a claimcheck behind this one forwards: asked to pass it through (handles
    are made here); None for any other tool."""
    if definition is None or mark_of(definition, PROXIED) is None:
        return None
    return cast(types.RequestParamsMeta, {PASSTHROUGH: True})
