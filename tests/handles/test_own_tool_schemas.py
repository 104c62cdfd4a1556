"""claimcheck's own tools show clients input schemas generated from the models that validate their arguments."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from server.config import Settings
from server.downstream.chain import OWN, mark_of
from server.errors import problems
from server.handles.own_registry import OWN_TOOL_REGISTRY, OWN_TOOLS_BY_NAME, own_tool_definitions

OBJECT = {"type": "object", "additionalProperties": False}
SLICE = {
    **OBJECT,
    "properties": {
        "start": {"type": "integer"},
        "length": {"type": "integer"},
        "anchor": {"type": "string"},
        "window": {"type": "integer", "default": 1000},
        "match_index": {"type": "integer", "default": 0},
    },
}
MODES = ["auto", "full-chunked", "read-grep", "excerpts", "truncate", "raw", "slice", "json"]
EXPECTED: dict[str, dict[str, Any]] = {
    "tool_output": {
        **OBJECT,
        "properties": {
            "handle": {"type": "string", "description": "the handle claimcheck gave for the output"},
            "extract": {"type": "string", "description": "precisely what to extract from the output"},
            "mode": {"type": "string", "enum": MODES, "default": "auto"},
            "slice": SLICE,
            "query": {
                "type": "string",
                "description": 'for mode "json" (implied): a JMESPath query; without it, the shape of the JSON',
            },
        },
        "required": ["handle"],
    },
    "wait_for_tool_output": {
        **OBJECT,
        "properties": {
            "handles": {"type": "array", "items": {"type": "string"}, "maxItems": 64},
            "timeout_secs": {"type": "number", "minimum": 0, "maximum": 50},
            "answer": {
                **OBJECT,
                "description": "the answer to a question a running call asked",
                "properties": {
                    "question": {"type": "string", "description": 'the question\'s id, "q-…"'},
                    "action": {"type": "string", "enum": ["accept", "decline", "cancel"], "default": "accept"},
                    "content": {"type": "object", "description": "for a question for input: the fields"},
                    "text": {"type": "string", "description": "for a question for a completion: its text"},
                },
                "required": ["question"],
            },
        },
    },
    "list_tool_outputs": {
        **OBJECT,
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            "cursor": {"type": "string", "description": "where the previous page ended"},
        },
    },
    "cancel_tool_output": {**OBJECT, "properties": {"handle": {"type": "string"}}, "required": ["handle"]},
    "Read": {
        **OBJECT,
        "properties": {
            "file": {"type": "string", "description": "a handle, e.g. session-…/…"},
            "start": {"type": "integer", "minimum": 0, "default": 0},
            "lines": {"type": "integer", "minimum": 1, "default": 200},
            "headOrTail": {"type": "string", "enum": ["head", "tail"], "default": "head"},
        },
        "required": ["file"],
    },
    "Grep": {
        **OBJECT,
        "properties": {
            "file": {"type": "string"},
            "regex": {"type": "string", "minLength": 1},
            "before": {"type": "integer", "minimum": 0, "maximum": 50, "default": 3},
            "after": {"type": "integer", "minimum": 0, "maximum": 50, "default": 3},
            "caseSensitive": {"type": "boolean", "default": False},
            "maxMatches": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
        },
        "required": ["file", "regex"],
    },
}


def definitions(**settings: Any) -> dict[str, Any]:
    return {tool.name: tool for tool in own_tool_definitions(Settings(**settings))}


def test_tools_list_shows_the_six_own_tools_in_order_each_marked_as_claimcheck_s_own() -> None:
    tools = own_tool_definitions(Settings())
    assert [tool.name for tool in tools] == list(EXPECTED)
    assert all(mark_of(tool, OWN) is True for tool in tools)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_own_tool_s_schema_has_the_properties_required_list_defaults_and_descriptions_clients_saw(
    name: str,
) -> None:
    schema = definitions()[name].input_schema
    assert schema == EXPECTED[name]
    assert list(schema["properties"]) == list(EXPECTED[name]["properties"])  # the order clients saw too


def test_no_schema_carries_pydantic_titles_or_definitions() -> None:
    for tool in own_tool_definitions(Settings()):
        text = repr(tool.input_schema)
        assert "'title'" not in text and "$defs" not in text and "$ref" not in text and "anyOf" not in text


def test_the_wait_s_description_and_bound_follow_wait_max_secs() -> None:
    wait = definitions(wait_max_secs=120)["wait_for_tool_output"]
    assert "at most 120 s;" in (wait.description or "")
    assert wait.input_schema["properties"]["timeout_secs"]["maximum"] == 120
    assert "at most 50 s;" in (definitions()["wait_for_tool_output"].description or "")


def test_the_descriptions_keep_their_literal_braces() -> None:
    output = definitions()["tool_output"].description or ""
    assert "slice ({start, length} in characters, or {anchor, window, match_index})" in output


def test_definitions_are_made_once_not_per_listing() -> None:
    first, second = own_tool_definitions(Settings()), own_tool_definitions(Settings())
    assert all(a is b for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize("tool", OWN_TOOL_REGISTRY, ids=lambda tool: tool.name)
def test_arguments_are_validated_by_the_model_the_schema_comes_from(tool: Any) -> None:
    with pytest.raises(ValidationError):
        tool.parse({"not_a_property": 1})
    required = tool.input_schema.get("required", [])
    if required:
        with pytest.raises(ValidationError, match=required[0]):
            tool.parse({})
    else:
        tool.parse(None)


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("tool_output", {"handle": "h", "slice": "0:100"}, "slice: Input should be an object"),
        ("wait_for_tool_output", {"answer": "yes"}, "answer: Input should be an object"),
        ("wait_for_tool_output", {"handles": ["h"] * 200}, "handles: List should have at most 64 items, not 200"),
        (
            "tool_output",
            {"handle": "h", "mode": "slice", "slice": {"anchor": "INFO", "start": 5, "length": 5}},
            "slice: give {start, length} (characters) or {anchor, window, match_index}, not both",
        ),
    ],
)
def test_a_bad_argument_is_said_without_claimcheck_s_own_class_names(
    name: str, arguments: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        OWN_TOOLS_BY_NAME[name].parse(arguments)
    assert problems(caught.value) == said
