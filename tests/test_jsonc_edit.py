"""A JSON-with-comments file edited in place (`server.jsonc_edit`): what is meant changes, and nothing else does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.config_text import loads_jsonc
from server.jsonc_edit import NotEditable, edit_members, set_value

ZED = """// Zed settings
//
// For information on how to configure Zed, see the Zed documentation.
{
  "theme": "One Dark", // the dark one
  /* servers */
  "context_servers": {
    // the extension's
    "github": {"source": "extension"},
    "git": {
      "command": "uvx",
      "args": ["mcp-server-git"] // pinned later
    },
    "web": {"url": "https://x/mcp"}
  }
}
"""
ENTRY = {"command": "claimcheck", "args": ["serve"]}


def test_servers_taken_out_and_one_put_in_leave_every_comment_and_other_line_as_it_was() -> None:
    after = edit_members(ZED, ["context_servers"], ["git", "web"], "claimcheck", ENTRY)
    assert loads_jsonc(after) == {
        "theme": "One Dark",
        "context_servers": {"github": {"source": "extension"}, "claimcheck": ENTRY},
    }
    kept = ZED[: ZED.index('    "git"')]
    assert after.startswith(kept)  # the header, the theme's comment, the block comment, the extension's comment
    assert "pinned later" not in after  # the comment on a line of a server taken out goes with it
    assert after.endswith("  }\n}\n")


def test_an_entry_of_that_name_is_replaced_where_it_is() -> None:
    after = edit_members(ZED, ["context_servers"], [], "git", ENTRY)
    data = loads_jsonc(after)
    assert list(data["context_servers"]) == ["github", "git", "web"]
    assert data["context_servers"]["git"] == ENTRY


def test_a_missing_table_is_added_to_the_object_above_it_and_an_empty_one_filled() -> None:
    text = '// settings\n{\n  "theme": "One Dark", // dark\n}\n'
    after = edit_members(text, ["context_servers"], [], "claimcheck", ENTRY)
    assert loads_jsonc(after) == {"theme": "One Dark", "context_servers": {"claimcheck": ENTRY}}
    assert after.startswith('// settings\n{\n  "theme": "One Dark", // dark\n')
    empty = '{\n  "servers": {\n    // none yet\n  }\n}'
    assert loads_jsonc(edit_members(empty, ["servers"], [], "c", ENTRY)) == {"servers": {"c": ENTRY}}
    assert "// none yet" in edit_members(empty, ["servers"], [], "c", ENTRY)


def test_a_nested_table_is_found_by_its_path() -> None:
    text = '{"projects": {"/p": {"mcpServers": {"a": {"command": "x"}}}}, "other": 1 /* kept */}'
    after = edit_members(text, ["projects", "/p", "mcpServers"], ["a"], "claimcheck", ENTRY)
    assert loads_jsonc(after) == {"projects": {"/p": {"mcpServers": {"claimcheck": ENTRY}}}, "other": 1}
    assert "/* kept */" in after


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"servers": [1, 2]}', ["servers"]),  # not an object
        ('{"servers": {}', ["servers"]),  # not closed
        ('{"a": 1} {"b": 2}', ["servers"]),  # two values
        ("[1]", ["servers"]),
        ('{"a": 1 "b": 2}', ["a"]),
        ('{"a": /* open', ["a"]),
    ],
    ids=["array", "unclosed", "two", "top-array", "no-comma", "open-comment"],
)
def test_a_text_this_edit_cannot_be_sure_of_is_refused(text: str, path: list[str]) -> None:
    with pytest.raises(NotEditable):
        edit_members(text, path, [], "claimcheck", ENTRY)


NAMES = st.sampled_from(["a", "b", "c", "d", "é", "with space", 'q"uote'])
VALUES = st.dictionaries(st.sampled_from(["command", "url", "args"]), st.text(max_size=5), max_size=3)


def _written(data: dict[str, Any], comments: list[bool], trailing: bool) -> str:
    """`data` as JSON with a comment after some lines (`comments`, cycled) and, where `trailing`, a comma after the
    last member of each object."""
    lines = json.dumps(data, indent=2, ensure_ascii=False).split("\n")
    out = []
    for i, line in enumerate(lines):
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if trailing and following.startswith("}") and not line.rstrip().endswith(("{", ",")):
            line += ","
        if comments[i % len(comments)]:
            line += f" // note {i}" if not line.rstrip().endswith("{") or i % 2 else "\n  /* a block */"
        out.append(line)
    return "// head\n" + "\n".join(out) + "\n"


@given(
    servers=st.dictionaries(NAMES, VALUES, max_size=5),
    others=st.dictionaries(st.sampled_from(["theme", "font", "x"]), st.integers(), max_size=2),
    removed=st.sets(NAMES),
    name=NAMES,
    comments=st.lists(st.booleans(), min_size=1, max_size=4),
    trailing=st.booleans(),
    crlf=st.booleans(),
)
def test_any_servers_written_with_comments_are_edited_to_exactly_what_was_meant(
    servers: dict[str, Any],
    others: dict[str, int],
    removed: set[str],
    name: str,
    comments: list[bool],
    trailing: bool,
    crlf: bool,
) -> None:
    data = {**others, "servers": servers}
    text = _written(data, comments, trailing)
    if crlf:  # as Windows editors write it: the edit's lines end the same way
        text = text.replace("\n", "\r\n")
    assert loads_jsonc(text) == data  # the text is what it stands for
    after = edit_members(text, ["servers"], sorted(removed), name, ENTRY)
    kept = {key: value for key, value in servers.items() if key not in removed or key == name}
    expected: dict[str, Any] = {**others, "servers": {**kept, name: ENTRY}}
    assert loads_jsonc(after) == expected
    assert list(loads_jsonc(after)["servers"]) == list(expected["servers"])
    assert after.startswith("// head\r\n" if crlf else "// head\n")
    if crlf:
        assert "\n" not in after.replace("\r\n", "")  # no line of the edit ends another way


def test_a_value_set_in_place_keeps_its_line_and_every_comment_around_it() -> None:
    text = '{\n  // lists\n  "mcp": {"allowed": ["a"], /* why */ "x": 1},\n  "list": [\n    "a"\n  ]\n}\n'
    after = set_value(text, ["mcp", "allowed"], ["a", "b"])
    assert after == text.replace('["a"], /*', '["a", "b"], /*')
    again = set_value(after, ["list"], ["a", "c"])
    assert loads_jsonc(again) == {"mcp": {"allowed": ["a", "b"], "x": 1}, "list": ["a", "c"]}
    assert '  "list": [\n    "a",\n    "c"\n  ]\n}' in again  # spread over lines as it was


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"mcp": {"allowed": ["a" /* the only one */]}}', ["mcp", "allowed"]),
        ('{"mcp": {"allowed": [\n  "a" // the only one\n]}}', ["mcp", "allowed"]),
        ('{"mcp": {}}', ["mcp", "allowed"]),
        ('{"mcp": []}', ["mcp", "allowed"]),
    ],
    ids=["block-comment-inside", "line-comment-inside", "missing", "not-an-object"],
)
def test_a_value_that_holds_a_comment_or_is_missing_is_not_set(text: str, path: list[str]) -> None:
    with pytest.raises(NotEditable):
        set_value(text, path, ["a", "b"])


def test_a_comment_marker_inside_a_string_is_no_comment() -> None:
    text = '{"allowed": ["http://x", "a/*b"]}'
    assert loads_jsonc(set_value(text, ["allowed"], ["c"])) == {"allowed": ["c"]}
