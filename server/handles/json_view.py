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
Queries are measured before they are parsed and evaluated under a memory and time budget
(`server.handles.json_eval`); no value deeper than `MAX_DEPTH` is built. Blocking (callers run it in a
worker thread).
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from jmespath.exceptions import JMESPathError

from extraction import Source
from server.downstream.json_depth import deeper_than
from server.errors import clip
from server.handles.json_eval import BadQuery, Evaluator, QueryTooBig, compile_query
from server.handles.json_reader import (
    MAX_DEPTH,
    VALUE_MAX_CHARS,
    Ends,
    JsonViewError,
    Reader,
    Stop,
    TooBig,
    TooDeep,
    elements,
    kind_of,
    lone_value,
    not_json,
    walk,
)
from server.handles.json_shape import head_shape, shape

__all__ = ["WHOLE_MAX_BYTES", "JsonViewError", "head_shape", "query", "shape"]

WHOLE_MAX_BYTES = 8 << 20
"""The largest output a query that cannot be streamed may load whole (a parsed document takes ~10× its size)."""
COLLECT_MAX_CHARS = 16 << 20
"""The most characters of results collected before a pipe is applied to them."""


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
    if kind in ("subexpression", "index_expression"):  # `a.b.c`, `a[0][1]`: one node with every step
        first, *rest = node["children"]
        steps = _path(first)
        for child in rest:
            if kind == "subexpression":
                step = _path(child)
            elif child["type"] == "index" and child["value"] >= 0:
                step = [child["value"]]
            else:
                step = None
            if steps is None or step is None:
                return None
            steps = steps + step
        return steps
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


def query(source: Source, expression: str, *, max_chars: int, grep_hint: str) -> tuple[str, str]:
    """The JSON text of `expression`'s result (at most `max_chars` characters) and a note on how it was read."""
    try:
        parsed = compile_query(expression)
    except JMESPathError as exc:
        raise JsonViewError(f"Invalid JMESPath query: {_reason(exc)}") from None
    except BadQuery as exc:
        raise JsonViewError(f"The query is refused: {exc}. Write a shorter, flatter one, or {grep_hint}.") from None
    evaluator = Evaluator()
    try:
        return _query(source, parsed, evaluator, max_chars, grep_hint)
    except QueryTooBig as exc:
        raise JsonViewError(
            f"The query was stopped: {exc}. Narrow it (a filter, fewer fields, no repeated `to_string` or `join` "
            f"of the whole), or {grep_hint}."
        ) from None
    except TooDeep:
        raise JsonViewError(
            f"A value the query needs is nested deeper than {MAX_DEPTH} levels. Query a path into it, read it "
            f"with Read, or {grep_hint}."
        ) from None


def _query(source: Source, parsed: Any, evaluator: Evaluator, max_chars: int, grep_hint: str) -> tuple[str, str]:
    visit = evaluator.evaluate
    plan = _plan(cast(dict[str, Any], parsed.parsed))
    if plan is None:
        return _whole(source, parsed, visit, max_chars, grep_hint)
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
            raise not_json("it is empty")
        if reader.peek() not in "[{":  # a single scalar or string: the whole document, which is small enough?
            if source.size > WHOLE_MAX_BYTES:
                raise JsonViewError(f"The output is one JSON value too big to query; {grep_hint}.")
            alone = Reader(source)
            kind = kind_of(alone.peek())
            alone.skip()
            lone_value(alone, kind)
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
            raise not_json(str(exc)) from None
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


def _whole(
    source: Source, parsed: Any, visit: Callable[[Any, Any], Any], max_chars: int, grep_hint: str
) -> tuple[str, str]:
    if source.size > WHOLE_MAX_BYTES:
        raise JsonViewError(
            f"This query needs the whole document in memory, and the output is {source.size} bytes "
            f"(the limit is {WHOLE_MAX_BYTES}). Queries read as a stream go down a path from the top and may "
            "end in a projection or filter over an array, then a pipe: e.g. `items[?status == 'error'].id`, "
            f"`[*].name`, `[0]`, `items[?contains(msg, 'word')] | [0]`. Or {grep_hint}."
        )
    text = source.read(0, source.size).decode("utf-8", "replace")
    if deeper_than(text):
        raise TooDeep
    try:
        document = json.loads(text, strict=False)
    except ValueError as exc:
        raise not_json(str(exc)) from None
    try:
        return _render(visit(parsed.parsed, document), max_chars), ""
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


def _reason(exc: Exception) -> str:
    """The first line of a JMESPath error, quoted briefly: it may hold a token of the query or a value of the output."""
    lines = str(exc).splitlines()
    if not lines:
        return type(exc).__name__
    first = lines[0]
    if first.endswith(", for expression:") and len(lines) > 1:  # a parse error: the expression follows, quoted
        first = f"{first.removesuffix(', for expression:')}, in {lines[1]}"
    return clip(first)
