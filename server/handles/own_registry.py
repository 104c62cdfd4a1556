"""claimcheck's own tools as clients see them: each one's name, description and arguments model, in one registry.

An arguments model is the one source of both the tool's input schema in `tools/list` (generated from it once,
at import, by `input_schema_of`) and the validation of a call's arguments (`OwnTool.parse`): a field, default,
bound or description added to a model reaches both.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, model_validator

from server.config import Settings
from server.downstream.chain import OWN, mark

__all__ = [
    "FILE_TOOL_REGISTRY",
    "HANDLE_TOOL_REGISTRY",
    "LIST_PAGE",
    "LIST_PAGE_MAX",
    "OWN_TOOLS_BY_NAME",
    "OWN_TOOL_REGISTRY",
    "WAIT_HANDLES_MAX",
    "AnswerArgs",
    "CancelArgs",
    "GrepArgs",
    "ListArgs",
    "Mode",
    "OwnTool",
    "ReadArgs",
    "SliceArgs",
    "ToolOutputArgs",
    "WaitArgs",
    "input_schema_of",
    "own_tool_definitions",
]

LIST_PAGE = 20
LIST_PAGE_MAX = 100
Mode = Literal["auto", "full-chunked", "read-grep", "excerpts", "truncate", "raw", "slice", "json"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class SliceArgs(_Args):
    start: int | None = None
    length: int | None = None
    anchor: str | None = None
    window: int = 1000
    match_index: int = 0

    @model_validator(mode="after")
    def _one_kind(self) -> SliceArgs:
        if self.anchor is not None and (self.start is not None or self.length is not None):
            raise ValueError("give {start, length} (characters) or {anchor, window, match_index}, not both")
        return self


class ToolOutputArgs(_Args):
    handle: str = Field(description="the handle claimcheck gave for the output")
    extract: str | None = Field(default=None, description="precisely what to extract from the output")
    mode: Mode = "auto"
    slice: SliceArgs | None = None
    query: str | None = Field(
        default=None, description='for mode "json" (implied): a JMESPath query; without it, the shape of the JSON'
    )


class AnswerArgs(_Args):
    question: str = Field(description='the question\'s id, "q-…"')
    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, Any] | None = Field(default=None, description="for a question for input: the fields")
    text: str | None = Field(default=None, description="for a question for a completion: its text")


WAIT_HANDLES_MAX = 64  # one wait's handles: its work and its answer stay small whatever a client sends


class WaitArgs(_Args):
    handles: list[str] | None = Field(default=None, max_length=WAIT_HANDLES_MAX)
    timeout_secs: float | None = Field(
        default=None, ge=0, allow_inf_nan=False
    )  # its maximum, waitMaxSecs, is added per settings
    answer: AnswerArgs | None = Field(default=None, description="the answer to a question a running call asked")


class CancelArgs(_Args):
    handle: str


class ListArgs(_Args):
    limit: int = Field(default=LIST_PAGE, ge=1, le=LIST_PAGE_MAX)
    cursor: str | None = Field(default=None, description="where the previous page ended")


class ReadArgs(_Args):
    file: str = Field(description="a handle, e.g. session-…/…")
    start: int = Field(default=0, ge=0)
    lines: int = Field(default=200, ge=1)
    head_or_tail: Literal["head", "tail"] = Field(default="head", alias="headOrTail")


class GrepArgs(_Args):
    file: str
    regex: str = Field(min_length=1)
    before: int = Field(default=3, ge=0, le=50)
    after: int = Field(default=3, ge=0, le=50)
    case_sensitive: bool = Field(default=False, alias="caseSensitive")
    max_matches: int = Field(default=50, ge=1, le=1000, alias="maxMatches")


_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_FIRST_KEYS = {"type": 0, "description": 1}


def input_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of `model` as a tool's input schema: nested models inlined (no `$defs`), no titles, an
    optional field (`X | None = None`) shown as X without a default, no description of the model itself (the
    tool's description says what it is)."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    schema.pop("description", None)
    return _tidy(schema, definitions)


def _tidy(node: dict[str, Any], definitions: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    reference = node.get("$ref")
    if isinstance(reference, str):
        target = definitions[reference.rsplit("/", 1)[-1]]
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return _tidy({**target, **rest}, definitions)  # the field's description wins over the model's
    branches = node.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        kept = [branch for branch in branches if branch != {"type": "null"}]
        rest = {key: value for key, value in node.items() if key != "anyOf"}
        if "default" in rest and rest["default"] is None:
            del rest["default"]
        return _tidy({**(kept[0] if len(kept) == 1 else {"anyOf": kept}), **rest}, definitions)
    tidy: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" or (key == "additionalProperties" and value is True):
            continue  # titles are pydantic's names for models and fields; any other key is allowed by default
        if key == "properties":
            tidy[key] = {name: _tidy(schema, definitions) for name, schema in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            tidy[key] = _tidy(value, definitions)
        elif key in _SUBSCHEMA_LISTS:
            tidy[key] = [_tidy(branch, definitions) for branch in value]
        else:
            tidy[key] = value
    return dict(sorted(tidy.items(), key=lambda item: _FIRST_KEYS.get(item[0], len(_FIRST_KEYS))))


@dataclass(frozen=True, slots=True)
class OwnTool:
    """One own tool. `description` is a `str.format` template: `{wait_max_secs}` is the configured longest wait
    (literal braces are doubled). `wait_bound` names a property whose `maximum` is that wait."""

    name: str
    description: str
    arguments: type[BaseModel]
    wait_bound: str | None = None
    input_schema: Mapping[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_schema", input_schema_of(self.arguments))

    def parse(self, arguments: Mapping[str, Any] | None) -> BaseModel:
        """The validated arguments of a call; raises pydantic's `ValidationError`."""
        return self.arguments.model_validate(arguments or {})

    def definition(self, wait_max_secs: float) -> types.Tool:
        schema = copy.deepcopy(dict(self.input_schema))
        if self.wait_bound is not None:
            schema["properties"][self.wait_bound]["maximum"] = wait_max_secs
        description = self.description.format(wait_max_secs=wait_max_secs)
        return mark(types.Tool(name=self.name, description=description, input_schema=schema), OWN, True)


HANDLE_TOOL_REGISTRY = (
    OwnTool(
        "tool_output",
        "Read a stored tool output by its handle. mode: auto (default; needs `extract`), full-chunked, read-grep, "
        "excerpts (the lines that share the request's words, for a small model), "
        "truncate (head and tail), raw (whole output, only under the size threshold), slice ({{start, length}} in "
        "characters, or {{anchor, window, match_index}}), json (for a JSON output: its shape, or with `query` a "
        "JMESPath query such as `items[?status == 'error'].id`, read as a stream).",
        ToolOutputArgs,
    ),
    OwnTool(
        "wait_for_tool_output",
        "Wait until at least one background tool call finishes (default: any running one), at most "
        "{wait_max_secs:g} s; small finished outputs are returned inline. Also returns when a running call asks a "
        "question (for input, or for a completion from your model); answer it with `answer`, which is delivered "
        "before the wait begins.",
        WaitArgs,
        wait_bound="timeout_secs",
    ),
    OwnTool(
        "list_tool_outputs",
        "List the handles of this session with tool, status, duration, size and progress: running and unread ones "
        "first, a page at a time (`cursor` from the last line gives the next page).",
        ListArgs,
    ),
    OwnTool(
        "cancel_tool_output",
        'Cancel a running background call by handle, or every running call with "all".',
        CancelArgs,
    ),
)
FILE_TOOL_REGISTRY = (
    OwnTool(
        "Read",
        "Read numbered lines of a stored tool output. `file` is a handle of this session; `start` is the 0-based "
        "first line (counted from the end with headOrTail=tail).",
        ReadArgs,
    ),
    OwnTool(
        "Grep",
        "Search a stored tool output with a regular expression (Python syntax, run by RE2: \\d \\w \\s \\b are "
        "ASCII; backreferences and lookaround fall back to a slower engine with a time limit); matching lines are "
        "marked with →, with context lines around them; on a long line each match is shown in a window with its "
        "column. `file` is a handle of this session.",
        GrepArgs,
    ),
)
OWN_TOOL_REGISTRY = HANDLE_TOOL_REGISTRY + FILE_TOOL_REGISTRY
OWN_TOOLS_BY_NAME: Mapping[str, OwnTool] = MappingProxyType({tool.name: tool for tool in OWN_TOOL_REGISTRY})


def own_tool_definitions(settings: Settings) -> list[types.Tool]:
    """What `tools/list` shows of claimcheck's own tools, marked as its own (made once per `waitMaxSecs`)."""
    return list(_definitions(settings.wait_max_secs))


@functools.cache
def _definitions(wait_max_secs: float) -> tuple[types.Tool, ...]:
    return tuple(tool.definition(wait_max_secs) for tool in OWN_TOOL_REGISTRY)
