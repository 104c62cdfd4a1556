"""The two tools of the catalog behind a ticket (`settings.catalog`): `find_tools` and `call_tool`.

Listed, instead of the servers' tools, when the catalog is searched (`server.upstream.tool_catalog`); their
arguments models are the source of their schemas and of the validation of a call, as for the other own tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from server.errors import OwnToolError, problems
from server.handles.own_registry import OwnTool

__all__ = [
    "CALL_TOOL",
    "CATALOG_TOOLS",
    "FIND_LIMIT_MAX",
    "FIND_TOOLS",
    "CallArgs",
    "FindArgs",
    "catalog_tool_definitions",
    "parse_call",
    "parse_find",
]

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
CATALOG_TOOLS = frozenset({FIND_TOOLS, CALL_TOOL})
FIND_LIMIT_MAX = 20
QUERY_MAX_CHARS = 1000


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FindArgs(_Args):
    query: str = Field(
        min_length=1, max_length=QUERY_MAX_CHARS, description="what you need to do, in plain words or a tool name"
    )
    limit: int = Field(default=5, ge=1, le=FIND_LIMIT_MAX, description="how many tools to answer")


class CallArgs(_Args):
    name: str = Field(min_length=1, max_length=256, description="the tool's name as find_tools gave it")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments, per its input schema")


CATALOG_TOOL_REGISTRY = (
    OwnTool(
        FIND_TOOLS,
        'Find the tools of the connected MCP servers for a need, e.g. "show the last commits" or "read a file". '
        "Answers each match's name, server, description and input schema, best first. Found tools are added to "
        "your tool list; you can also run any of them with call_tool.",
        FindArgs,
    ),
    OwnTool(
        CALL_TOOL,
        "Run a tool that find_tools found, by its name, with its arguments. Slow calls and large outputs are handed "
        "back as handles, exactly as for a tool called directly.",
        CallArgs,
    ),
)


def catalog_tool_definitions() -> list[types.Tool]:
    return [tool.definition(0) for tool in CATALOG_TOOL_REGISTRY]


def parse_find(arguments: Mapping[str, Any] | None) -> FindArgs:
    args = _parse(CATALOG_TOOL_REGISTRY[0], arguments)
    assert isinstance(args, FindArgs)
    return args


def parse_call(arguments: Mapping[str, Any] | None) -> CallArgs:
    args = _parse(CATALOG_TOOL_REGISTRY[1], arguments)
    assert isinstance(args, CallArgs)
    return args


def _parse(tool: OwnTool, arguments: Mapping[str, Any] | None) -> Any:
    try:
        return tool.parse(arguments)
    except ValidationError as exc:
        raise OwnToolError(f"Invalid arguments for {tool.name}: {problems(exc)}") from None
