"""`tool_output(mode="json")`: the shape of a JSON output, or a JMESPath query over it, read as a stream.

JMESPath rather than JSONPath: it has one specification with a compliance suite that every implementation
passes, so a query means the same everywhere, and its Python implementation (`jmespath`, the one boto
uses) is small, pure Python and without dependencies; JSONPath was standardised only in 2024 (RFC 9535)
and Python's JSONPath packages disagree on filters.

Memory stays bounded: the output is read a piece at a time and only what a query needs is built, by
json's own C scanner: a path from the top (`a.b[0]`), optionally ending in a projection or filter over an
array (`a[*].b`, `a[?x == 'y'].z`, `a[]`), each of whose elements is built and evaluated alone, then
optionally a pipe (`… | [0]`) over what was collected. Values off the path are skipped without being built
(in C where they fit a piece, else by a bracket-counting scan), so a value of any size can be passed over.
Any other query needs the whole document, which is allowed only for outputs up to `WHOLE_MAX_BYTES`.
Blocking (callers run it in a worker thread).
"""

from __future__ import annotations

import json
import json.scanner
from dataclasses import dataclass
from typing import Any, cast

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.visitor import Options, TreeInterpreter

from extraction import Source, TextSource
from server.errors import clip
from server.handles.json_reader import (
    KEY_MAX_CHARS,
    VALUE_MAX_CHARS,
    Ends,
    Reader,
    Stop,
    TooBig,
    elements,
    read_batch,
    walk,
)

__all__ = ["WHOLE_MAX_BYTES", "JsonViewError", "head_shape", "query", "shape"]

WHOLE_MAX_BYTES = 8 << 20
"""The largest output a query that cannot be streamed may load whole (a parsed document takes ~10× its size)."""
COLLECT_MAX_CHARS = 16 << 20
"""The most characters of results collected before a pipe is applied to them."""
SHAPE_KEYS = 100  # keys of an object listed in a shape


class JsonViewError(Exception):
    """The JSON view cannot answer; the message says why and what to do instead."""


@dataclass(slots=True)
class _Plan:
    steps: list[str | int]
    each: bool = False  # the value at `steps` is an array whose elements are taken one by one
    flatten: bool = False  # `a[]`: elements that are arrays give their elements
    condition: dict[str, Any] | None = None  # a filter on each element
    right: dict[str, Any] | None = None  # applied to each element, or to the value at `steps`
    then: dict[str, Any] | None = None  # a pipe: applied to everything collected


def _path(node: dict[str, Any]) -> list[str | int] | None:
    kind = node["type"]
    if kind in ("identity", "current"):
        return []
    if kind == "field":
        return [node["value"]]
    if kind == "subexpression":
        left, right = (_path(child) for child in node["children"])
        return None if left is None or right is None else left + right
    if kind == "index_expression":
        left, index = node["children"]
        base = _path(left)
        if base is None or index["type"] != "index" or index["value"] < 0:
            return None
        return [*base, index["value"]]
    return None


def _plan(node: dict[str, Any]) -> _Plan | None:
    kind = node["type"]
    if kind == "pipe":
        left, right = node["children"]
        plan = _plan(left)
        if plan is None or plan.then is not None:
            return None
        plan.then = right
        return plan
    if kind == "filter_projection":
        left, right, condition = node["children"]
        steps = _path(left)
        return None if steps is None else _Plan(steps, each=True, condition=condition, right=right)
    if kind == "projection":
        left, right = node["children"]
        flatten = left["type"] == "flatten"
        steps = _path(left["children"][0] if flatten else left)
        return None if steps is None else _Plan(steps, each=True, flatten=flatten, right=right)
    steps = _path(node)
    return None if steps is None else _Plan(steps)


def _required(node: dict[str, Any] | None) -> list[str]:
    """Strings that an element's JSON text must contain for `node` to hold: from `contains(…, 'lit')` and
    `… == 'lit'`, joined by `&&`. Only text that JSON writes as itself (plain printable ASCII) is used."""
    if node is None:
        return []
    kind = node["type"]
    if kind == "and_expression":
        return [*_required(node["children"][0]), *_required(node["children"][1])]
    literal: Any = None
    if kind == "function_expression" and node["value"] == "contains" and len(node["children"]) == 2:
        literal = node["children"][1].get("value") if node["children"][1]["type"] == "literal" else None
    elif kind == "comparator" and node["value"] == "eq":
        for child in node["children"]:
            if child["type"] == "literal":
                literal = child["value"]
    plain = isinstance(literal, str) and literal and literal.isascii() and literal.isprintable()
    return [literal] if plain and not any(c in literal for c in '"\\/') else []


def _is_false(value: Any) -> bool:
    return value is None or value is False or value == "" or value == [] or value == {}


# -- answering -------------------------------------------------------------------------------------


def _not_json(why: str) -> JsonViewError:
    return JsonViewError(f"The output is not JSON ({why}). Search it with Grep or read it with Read instead.")


def query(source: Source, expression: str, *, max_chars: int, grep_hint: str) -> tuple[str, str]:
    """The JSON text of `expression`'s result (at most `max_chars` characters) and a note on how it was read."""
    try:
        parsed = jmespath.compile(expression)
    except JMESPathError as exc:
        raise JsonViewError(f"Invalid JMESPath query: {_reason(exc)}") from None
    interpreter = TreeInterpreter(Options())

    def visit(node: Any, value: Any) -> Any:
        return interpreter.visit(node, value)

    plan = _plan(cast(dict[str, Any], parsed.parsed))
    if plan is None:
        return _whole(source, parsed, max_chars, grep_hint)
    reader = Reader(source)
    collected: list[Any] = []
    size = [2]  # the brackets
    more = [False]
    single: list[Any] = []
    required = _required(plan.condition)

    def keep(element: Any, text: str | None) -> None:
        if required and text is not None and "\\u" not in text and not all(part in text for part in required):
            return  # cannot match: the condition needs text this element does not have
        if plan.condition is not None and _is_false(visit(plan.condition, element)):
            return
        values = element if plan.flatten and isinstance(element, list) else [element]
        for value in values:
            result = value if plan.right is None else visit(plan.right, value)
            if result is None:
                continue
            size[0] += len(json.dumps(result, ensure_ascii=False)) + 2  # and its separator
            if size[0] > (COLLECT_MAX_CHARS if plan.then is not None else max_chars):
                if plan.then is not None:
                    raise TooBig
                more[0] = True
                raise Stop
            collected.append(result)

    notes: list[str] = []
    array = False
    try:
        if not reader.peek():
            raise _not_json("it is empty")
        if reader.peek() not in "[{":  # a single scalar or string: the whole document, which is small enough?
            if source.size > WHOLE_MAX_BYTES:
                raise JsonViewError(f"The output is one JSON value too big to query; {grep_hint}.")
        if walk(reader, plan.steps):
            if plan.each:
                array = elements(reader, keep, required)
            else:
                single.append(reader.value(VALUE_MAX_CHARS))
    except Stop:
        notes.append(f"only the first {len(collected)} results are shown; narrow the query for the rest")
    except TooBig:
        what = "the values it collects" if plan.then is not None else "one value it needs"
        raise JsonViewError(
            f"The output is too big for this query: {what} would take over {VALUE_MAX_CHARS} characters in "
            f"memory. Narrow the query (a filter, fewer fields, a path further down), or {grep_hint}."
        ) from None
    except Ends as exc:
        if reader.dropped + reader.pos == 0 or (reader.dropped == 0 and reader.buf[: reader.pos].strip() == ""):
            raise _not_json(str(exc)) from None
        notes.append(f"the JSON ends early or is broken ({exc}); results are from the part before that")
        array = array or bool(collected)
    except JMESPathError as exc:
        raise JsonViewError(f"The query failed: {_reason(exc)}") from None
    try:
        if plan.each:
            result: Any = collected if array or collected else None
        else:
            value = single[0] if single else None
            result = value if plan.right is None else visit(plan.right, value)
        if plan.then is not None:
            result = visit(plan.then, result)
    except JMESPathError as exc:
        raise JsonViewError(f"The query failed: {_reason(exc)}") from None
    return _render(result, max_chars), "; ".join(notes)


def _whole(source: Source, parsed: Any, max_chars: int, grep_hint: str) -> tuple[str, str]:
    if source.size > WHOLE_MAX_BYTES:
        raise JsonViewError(
            f"This query needs the whole document in memory, and the output is {source.size} bytes "
            f"(the limit is {WHOLE_MAX_BYTES}). Queries read as a stream go down a path from the top and may "
            "end in a projection or filter over an array, then a pipe: e.g. `items[?status == 'error'].id`, "
            f"`[*].name`, `[0]`, `items[?contains(msg, 'word')] | [0]`. Or {grep_hint}."
        )
    text = source.read(0, source.size).decode("utf-8", "replace")
    try:
        document = json.loads(text, strict=False)
    except ValueError as exc:
        raise _not_json(str(exc)) from None
    try:
        return _render(parsed.search(document), max_chars), ""
    except JMESPathError as exc:
        raise JsonViewError(f"The query failed: {_reason(exc)}") from None


def _render(result: Any, max_chars: int) -> str:
    text = json.dumps(result, ensure_ascii=False)
    if len(text) > max_chars:
        raise JsonViewError(
            f"The result is {len(text)} characters, over what fits ({max_chars}): narrow the query "
            "(a filter, a slice such as `[:10]`, fewer fields with `.{a: a, b: b}`)."
        )
    return text


# -- shape -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Shape:
    top: str = ""
    count: int = 0  # members of the top value
    members: list[list[Any]] | None = None  # [key, kind, size] for the first keys of a top-level object
    first_keys: list[str] | None = None  # keys of the first element of a top-level array
    size: int | None = None  # characters of a top-level string


def _kind(char: str) -> str:
    return {"{": "object", "[": "array", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}.get(char, "number")


def _measure(reader: Reader) -> int | None:
    """Members of the container (or characters of the string) at the reader, passing over it."""
    char = reader.peek()
    if char == '"':
        try:
            return len(reader.value(VALUE_MAX_CHARS))
        except TooBig:
            reader.skip()
            return None
    if char not in "[{":
        reader.value(1024)
        return None
    reader.pos += 1
    closing = "}" if char == "{" else "]"
    if reader.peek() == closing:
        reader.pos += 1
        return 0
    if char == "[":
        return _count_elements(reader, 0)
    count = 0
    while True:
        reader.value(KEY_MAX_CHARS)
        reader.expect(":")
        reader.skip()
        count += 1
        if reader.expect(",}") == "}":
            return count


def _count_elements(reader: Reader, count: int) -> int:
    """`count` plus the elements left in the array at the reader (at an element's start), passing over them:
    runs of them in one C call where the text at hand allows (`read_batch`), else one by one."""
    batch_from = 0
    while True:
        if reader.dropped + reader.pos >= batch_from:
            batch = read_batch(reader)
            if batch is not None:
                count += len(batch[0])
                reader.pos = batch[2]
                continue
            batch_from = reader.dropped + len(reader.buf)
        reader.skip()
        count += 1
        if reader.expect(",]") == "]":
            return count


def _read_shape(reader: Reader, shape: _Shape, key_limit: int, measure: bool = True) -> None:
    """Fill `shape` as far as the text goes (it stays filled that far when the text ends early)."""
    char = reader.peek()
    shape.top = _kind(char) if char else ""
    if char == "{":
        shape.members = []
        reader.pos += 1
        if reader.peek() == "}":
            reader.pos += 1
            return
        while True:
            key = reader.value(KEY_MAX_CHARS)
            reader.expect(":")
            shape.count += 1
            member = [key, _kind(reader.peek()), None]
            if len(shape.members) < key_limit:
                shape.members.append(member)
            if measure:
                member[2] = _measure(reader)
            else:
                reader.skip()
            if reader.expect(",}") == "}":
                return
    elif char == "[":
        reader.pos += 1
        if reader.peek() == "]":
            reader.pos += 1
            return
        if reader.peek() == "{":
            try:
                first = reader.value(VALUE_MAX_CHARS)
                shape.first_keys = list(first)[:key_limit]
            except TooBig:
                reader.skip()
        else:
            reader.skip()
        shape.count = 1
        if reader.expect(",]") == "]" or not measure:
            return
        shape.count = _count_elements(reader, 1)
    elif char == '"':
        shape.size = _measure(reader)
    elif char:
        reader.value(1024)


def shape(source: Source) -> tuple[str, str]:
    """The top-level shape: for an object its keys with each value's kind and size, for an array its
    length and the keys of its first element. Reads the whole output, building little."""
    reader = Reader(source)
    recorded = _Shape()
    note = ""
    try:
        _read_shape(reader, recorded, SHAPE_KEYS)
    except Ends as exc:
        if recorded.top not in ("object", "array") or not recorded.count:
            raise _not_json(str(exc)) from None
        note = f"the JSON ends early or is broken ({exc}); the shape is of the part before that"
    if reader.peek() and not note:
        note = f"there is more text after the JSON value, at {reader.where()}"
    return _shape_text(recorded), note


def _describe(kind: str, size: int | None) -> str:
    unit = {"object": "keys", "array": "items", "string": "characters"}.get(kind)
    return kind if unit is None or size is None else f"{kind} ({size} {unit})"


def _shape_text(recorded: _Shape) -> str:
    if recorded.top == "object":
        members = recorded.members or []
        lines = [f"object with {recorded.count} keys:"]
        lines += [f"  {json.dumps(key, ensure_ascii=False)}: {_describe(kind, size)}" for key, kind, size in members]
        if recorded.count > len(members):
            lines.append(f"  … and {recorded.count - len(members)} more keys")
        return "\n".join(lines)
    if recorded.top == "array":
        lines = [f"array with {recorded.count} items"]
        if recorded.first_keys:
            keys = ", ".join(json.dumps(k, ensure_ascii=False) for k in recorded.first_keys)
            lines.append(f"  the first item is an object with keys: {keys}")
        return "\n".join(lines)
    return f"a single {_describe(recorded.top, recorded.size)}"


def head_shape(head: bytes) -> tuple[str, list[str], str | None] | None:
    """From the first bytes of an output: (top kind, its first keys or the first element's keys, the key of
    the first member that is an array), or None when they do not start a JSON object or array."""
    text = head.decode("utf-8", "ignore")
    if text.lstrip()[:1] not in ("{", "["):
        return None
    recorded = _Shape()
    try:
        _read_shape(Reader(TextSource.of(text)), recorded, 20, measure=False)
    except (Ends, TooBig):
        pass
    if recorded.top == "object":
        members = recorded.members or []
        arrays = [m[0] for m in members if m[1] == "array"]
        if not members:
            return None
        return "object", [m[0] for m in members], arrays[0] if arrays else None
    if recorded.top == "array" and (recorded.count or recorded.first_keys):
        return "array", recorded.first_keys or [], None
    return None


def _reason(exc: Exception) -> str:
    """The first line of a JMESPath error, quoted briefly: it may hold a token of the query or a value of the output."""
    lines = str(exc).splitlines()
    return clip(lines[0] if lines else type(exc).__name__)
