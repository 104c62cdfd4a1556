"""`tool_output(mode="json")`: the shape of a JSON output, or a JMESPath query over it, read as a stream.

JMESPath rather than JSONPath: it has one specification with a compliance suite that every implementation
passes, so a query means the same everywhere, and its Python implementation (`jmespath`, the one boto
uses) is small, pure Python and without dependencies; JSONPath was standardised only in 2024 (RFC 9535)
and Python's JSONPath packages disagree on filters.

Memory stays bounded by reading the output through the incremental tokenizer
(`server.downstream.jsonstream`) and building only what a query needs: a path from the top (`a.b[0]`),
optionally ending in a projection or filter over an array (`a[*].b`, `a[?x == 'y'].z`, `a[]`), each of
whose elements is built and evaluated alone, then optionally a pipe (`… | [0]`) over what was collected.
Any other query needs the whole document, which is allowed only for outputs up to `WHOLE_MAX_BYTES`.
Blocking (callers run it in a worker thread).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.visitor import Options, TreeInterpreter

from extraction import Source
from server.downstream.jsonstream import JsonStream, JsonStreamError

__all__ = ["WHOLE_MAX_BYTES", "JsonViewError", "head_shape", "query", "shape"]

WHOLE_MAX_BYTES = 8 << 20
"""The largest output a query that cannot be streamed may load whole (a parsed document takes ~10× its size)."""
VALUE_MAX_CHARS = 16 << 20
"""The most characters of one value a streamed query builds (an element of the projected array, or the target)."""
COLLECT_MAX_CHARS = 16 << 20
"""The most characters of results collected before a pipe is applied to them."""
SHAPE_KEYS = 100  # keys of an object listed in a shape
_PIECE = 1 << 20


class JsonViewError(Exception):
    """The JSON view cannot answer; the message says why and what to do instead."""


class _Stop(Exception):
    """Enough was read."""


class _TooBig(Exception):
    """A value the query needs is over `VALUE_MAX_CHARS`."""


# -- building values -------------------------------------------------------------------------------


class _Builder:
    """Builds one JSON value from tokens; `done` once it is complete."""

    def __init__(self, limit: int) -> None:
        self._stack: list[Any] = []  # containers being filled; for an object, [dict, pending key]
        self._keys: list[str | None] = []
        self._parts: list[str] = []
        self._chars = 0
        self._limit = limit
        self.value: Any = None
        self.done = False

    def _add(self, value: Any) -> None:
        if not self._stack:
            self.value, self.done = value, True
            return
        top = self._stack[-1]
        if isinstance(top, list):
            top.append(value)
        else:
            top[self._keys[-1]] = value

    def _count(self, chars: int) -> None:
        self._chars += chars
        if self._chars > self._limit:
            raise _TooBig

    def start_object(self) -> None:
        self._count(2)
        self._stack.append({})
        self._keys.append(None)

    def start_array(self) -> None:
        self._count(2)
        self._stack.append([])
        self._keys.append(None)

    def end_object(self) -> None:
        self._end()

    def end_array(self) -> None:
        self._end()

    def _end(self) -> None:
        value = self._stack.pop()
        self._keys.pop()
        self._add(value)

    def key(self, name: str) -> None:
        self._count(len(name) + 4)
        self._keys[-1] = name

    def scalar(self, value: int | float | bool | None) -> None:
        self._count(5)
        self._add(value)

    def string_start(self) -> None:
        self._parts = []
        self._count(2)

    def string_piece(self, text: str) -> None:
        self._count(len(text))
        self._parts.append(text)

    def string_end(self) -> None:
        text, self._parts = "".join(self._parts), []
        self._add(text)


# -- walking to what a query needs ------------------------------------------------------------------


@dataclass(slots=True)
class _Frame:
    is_array: bool
    on_path: bool  # every step from the top up to this container matched
    index: int = -1  # the current element of an array
    key: str | None = None  # the current key of an object


class _Navigator:
    """Walks to the value at `steps`; builds it (or each of its elements, with `each`) and hands it to `emit`.
    Everything off the path is skipped by the tokenizer in C."""

    def __init__(self, steps: list[str | int], each: bool, emit: Callable[[Any], None]) -> None:
        self.steps, self.each, self.emit = steps, each, emit
        self.stream: JsonStream | None = None
        self.stack: list[_Frame] = []
        self.builder: _Builder | None = None
        self.builder_depth = 0
        self.found = False  # the target exists (and, with `each`, is an array)
        self.target_kind = ""

    def _role(self) -> str:
        """What the value starting now is: 'path', 'target', 'element' or 'skip'."""
        depth = len(self.stack)
        if depth == 0:
            return "target" if not self.steps else "path"
        parent = self.stack[-1]
        if not parent.on_path:
            return "skip"
        if depth > len(self.steps):  # inside the target array
            return "element"
        step = self.steps[depth - 1]
        matches = (parent.index == step) if parent.is_array else (parent.key == step)
        if not matches or isinstance(step, int) != parent.is_array:
            return "skip"
        return "target" if depth == len(self.steps) else "path"

    def _value(self, kind: str) -> str:
        """Note the start of a value in its parent; its role."""
        if self.stack and self.stack[-1].is_array:
            self.stack[-1].index += 1
        role = self._role()
        if role == "target":
            self.found, self.target_kind = True, kind
            if self.each:
                role = "each" if kind == "array" else "skip"
        return role

    def _open(self, is_array: bool) -> None:
        if self.builder is not None:
            self.builder_depth += 1
            (self.builder.start_array if is_array else self.builder.start_object)()
            return
        role = self._value("array" if is_array else "object")
        if role in ("target", "element"):
            self.builder, self.builder_depth = _Builder(VALUE_MAX_CHARS), 1
            (self.builder.start_array if is_array else self.builder.start_object)()
            return
        on_path = role in ("path", "each")
        self.stack.append(_Frame(is_array=is_array, on_path=on_path))
        if not on_path:
            assert self.stream is not None
            self.stream.skip()

    def _close(self, is_array: bool) -> None:
        if self.builder is not None:
            (self.builder.end_array if is_array else self.builder.end_object)()
            self.builder_depth -= 1
            if self.builder_depth == 0:
                self._built()
            return
        frame = self.stack.pop()
        if frame.on_path:  # the target array is done, or the target is not in this container
            raise _Stop

    def _built(self) -> None:
        assert self.builder is not None
        value, self.builder = self.builder.value, None
        self.emit(value)
        if not self.each:
            raise _Stop

    def _leaf(self, value: Any) -> None:
        role = self._value("string" if isinstance(value, str) else "scalar")
        if role in ("target", "element"):
            self.emit(value)
            if role == "target":
                raise _Stop

    def start_object(self) -> None:
        self._open(False)

    def start_array(self) -> None:
        self._open(True)

    def end_object(self) -> None:
        self._close(False)

    def end_array(self) -> None:
        self._close(True)

    def key(self, name: str) -> None:
        if self.builder is not None:
            self.builder.key(name)
        else:
            self.stack[-1].key = name

    def scalar(self, value: int | float | bool | None) -> None:
        if self.builder is not None:
            self.builder.scalar(value)
            if self.builder_depth == 0:
                self._built()
        else:
            self._leaf(value)

    def string_start(self) -> None:
        if self.builder is not None:
            self.builder.string_start()
            return
        role = self._value("string")
        if role in ("target", "element"):
            self.builder, self.builder_depth = _Builder(VALUE_MAX_CHARS), 0
            self.builder.string_start()

    def string_piece(self, text: str) -> None:
        if self.builder is not None:
            self.builder.string_piece(text)

    def string_end(self) -> None:
        if self.builder is not None:
            self.builder.string_end()
            if self.builder_depth == 0:
                self._built()


# -- planning a query ------------------------------------------------------------------------------


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


def _is_false(value: Any) -> bool:
    return value is None or value is False or value == "" or value == [] or value == {}


# -- reading ---------------------------------------------------------------------------------------


def _feed(source: Source, handler: Any) -> tuple[bool, JsonStreamError | None]:
    """Feed the whole output to a tokenizer driving `handler`: (stopped early, the error that ended it)."""
    stream = JsonStream(handler)
    if hasattr(handler, "stream"):
        handler.stream = stream
    offset = 0
    try:
        while offset < source.size:
            piece = source.read(offset, _PIECE)
            if not piece:
                break
            offset += len(piece)
            stream.feed(piece)
        stream.finish()
    except _Stop:
        return True, None
    except JsonStreamError as exc:
        return False, exc
    return False, None


def _not_json(error: JsonStreamError) -> JsonViewError:
    return JsonViewError(f"The output is not JSON ({error}). Search it with Grep or read it with Read instead.")


def query(source: Source, expression: str, *, max_chars: int, grep_hint: str) -> tuple[str, str]:
    """The JSON text of `expression`'s result (at most `max_chars` characters) and a note on how it was read."""
    try:
        parsed = jmespath.compile(expression)
    except JMESPathError as exc:
        raise JsonViewError(f"Invalid JMESPath query: {str(exc).splitlines()[0]}") from None
    interpreter = TreeInterpreter(Options())

    def visit(node: Any, value: Any) -> Any:
        return interpreter.visit(node, value)

    plan = _plan(cast(dict[str, Any], parsed.parsed))
    notes: list[str] = []
    if plan is None:
        if source.size > WHOLE_MAX_BYTES:
            raise JsonViewError(
                f"This query needs the whole document in memory, and the output is {source.size} bytes "
                f"(the limit is {WHOLE_MAX_BYTES}). Queries read as a stream go down a path from the top and may "
                "end in a projection or filter over an array, then a pipe: e.g. `items[?status == 'error'].id`, "
                f"`[*].name`, `[0]`, `items[?contains(msg, 'word')] | [0]`. Or {grep_hint}."
            )
        builder = _Builder(WHOLE_MAX_BYTES * 2)
        stopped, error = _feed(source, builder)
        if error is not None:
            raise _not_json(error)
        try:
            whole = parsed.search(builder.value)
        except JMESPathError as exc:
            raise JsonViewError(f"The query failed: {str(exc).splitlines()[0]}") from None
        return _render(whole, max_chars, notes)

    collected: list[Any] = []
    size = [2]  # the brackets
    single: list[Any] = []
    more = [False]

    def keep(element: Any) -> None:
        if plan.condition is not None and _is_false(visit(plan.condition, element)):
            return
        values = element if plan.flatten and isinstance(element, list) else [element]
        for value in values:
            result = value if plan.right is None else visit(plan.right, value)
            if result is None:
                continue
            size[0] += len(json.dumps(result, ensure_ascii=False)) + 2  # and its separator
            limit = COLLECT_MAX_CHARS if plan.then is not None else max_chars
            if size[0] > limit:
                if plan.then is not None:
                    raise _TooBig
                more[0] = True
                raise _Stop
            collected.append(result)

    def emit(value: Any) -> None:
        if plan.each:
            keep(value)
        else:
            single.append(value)

    navigator = _Navigator(plan.steps, plan.each, emit)
    try:
        stopped, error = _feed(source, navigator)
    except _TooBig:
        what = "the values it collects" if plan.then is not None else "one value it needs"
        raise JsonViewError(
            f"The output is too big for this query: {what} would take over {VALUE_MAX_CHARS} characters in "
            f"memory. Narrow the query (a filter, fewer fields, a path further down), or {grep_hint}."
        ) from None
    except JMESPathError as exc:
        raise JsonViewError(f"The query failed: {str(exc).splitlines()[0]}") from None
    if error is not None and not stopped:
        if not navigator.found and not collected and not single:
            raise _not_json(error)
        notes.append(f"the JSON ends early ({error}); results are from the part before that")
    if plan.each:
        result: Any = collected if navigator.target_kind == "array" else None
        if more[0]:
            notes.append(f"only the first {len(collected)} results are shown; narrow the query for the rest")
    else:
        value = single[0] if single else None
        result = value if plan.right is None else visit(plan.right, value)
    if plan.then is not None:
        try:
            result = visit(plan.then, result)
        except JMESPathError as exc:
            raise JsonViewError(f"The query failed: {str(exc).splitlines()[0]}") from None
    return _render(result, max_chars, notes)


def _render(result: Any, max_chars: int, notes: list[str]) -> tuple[str, str]:
    text = json.dumps(result, ensure_ascii=False)
    if len(text) > max_chars:
        raise JsonViewError(
            f"The result is {len(text)} characters, over what fits ({max_chars}): narrow the query "
            "(a filter, a slice such as `[:10]`, fewer fields with `.{a: a, b: b}`)."
        )
    return text, "; ".join(notes)


# -- shape -----------------------------------------------------------------------------------------


class _Shape:
    """Records the top-level value's kind, its keys (or length) and each member's kind and size."""

    def __init__(self, key_limit: int) -> None:
        self.stream: JsonStream | None = None
        self.depth = 0  # containers open
        self.top = ""
        self.members: list[list[Any]] = []  # [key, kind, size] for the first keys of a top-level object
        self.count = 0  # members of the top value
        self.first_keys: list[str] = []  # keys of the first element of a top-level array
        self.arrays: list[str] = []  # keys of a top-level object whose values are arrays
        self.string_chars = 0
        self._limit = key_limit
        self._key: str | None = None
        self._current: list[Any] | None = None  # the member being measured

    def _start(self, kind: str) -> None:
        if self.depth == 0:
            self.top = kind
        elif self.depth == 1:
            self.count += 1
            self._current = None
            if self.top == "object" and len(self.members) < self._limit:
                self._current = [self._key, kind, 0]
                self.members.append(self._current)
                if kind == "array" and self._key is not None:
                    self.arrays.append(self._key)
        elif self.depth == 2 and self._current is not None and self._current[1] == "array":
            self._current[2] += 1

    def _open(self, kind: str) -> None:
        level = self.depth
        self._start(kind)
        self.depth += 1
        first_item = self.top == "array" and self.count == 1
        if level >= 2 or (level == 1 and self.top == "array" and not first_item):
            assert self.stream is not None
            self.stream.skip()

    def start_object(self) -> None:
        self._open("object")

    def start_array(self) -> None:
        self._open("array")

    def end_object(self) -> None:
        self.depth -= 1

    def end_array(self) -> None:
        self.depth -= 1

    def key(self, name: str) -> None:
        if self.depth == 1:
            self._key = name
        elif self.depth == 2:
            if self.top == "array" and self.count == 1 and len(self.first_keys) < self._limit:
                self.first_keys.append(name)
            elif self._current is not None and self._current[1] == "object":
                self._current[2] += 1

    def scalar(self, value: int | float | bool | None) -> None:
        self._start("null" if value is None else "boolean" if isinstance(value, bool) else "number")

    def string_start(self) -> None:
        self._start("string")
        self.string_chars = 0

    def string_piece(self, text: str) -> None:
        self.string_chars += len(text)

    def string_end(self) -> None:
        if self.depth == 0:
            self.members = [[None, "string", self.string_chars]]
        elif self.depth == 1 and self._current is not None and self._current[1] == "string":
            self._current[2] = self.string_chars


def _describe(kind: str, size: int) -> str:
    if kind == "object":
        return f"object ({size} keys)"
    if kind == "array":
        return f"array ({size} items)"
    if kind == "string":
        return f"string ({size} characters)"
    return kind


def shape(source: Source) -> tuple[str, str]:
    """The top-level shape: for an object its keys with each value's kind and size, for an array its
    length and the keys of its first element. Reads the whole output, building nothing."""
    recorder = _Shape(SHAPE_KEYS)
    _, error = _feed(source, recorder)
    if error is not None and not recorder.top:
        raise _not_json(error)
    note = "" if error is None else f"the JSON ends early ({error}); the shape is of the part before that"
    return _shape_text(recorder), note


def _shape_text(recorder: _Shape) -> str:
    if recorder.top == "object":
        lines = [f"object with {recorder.count} keys:"]
        lines += [
            f"  {json.dumps(key, ensure_ascii=False)}: {_describe(kind, size)}" for key, kind, size in recorder.members
        ]
        if recorder.count > len(recorder.members):
            lines.append(f"  … and {recorder.count - len(recorder.members)} more keys")
        return "\n".join(lines)
    if recorder.top == "array":
        lines = [f"array with {recorder.count} items"]
        if recorder.first_keys:
            keys = ", ".join(json.dumps(k, ensure_ascii=False) for k in recorder.first_keys)
            lines.append(f"  the first item is an object with keys: {keys}")
        return "\n".join(lines)
    if recorder.top == "string":
        return f"a string of {recorder.members[0][2] if recorder.members else 0} characters"
    return f"a single {recorder.top or 'value'}"


def head_shape(head: bytes) -> tuple[str, list[str], str | None] | None:
    """From the first bytes of an output: (top kind, its first keys or the first element's keys, the key of
    the first member that is an array), or None when they do not start a JSON object or array."""
    text = head.lstrip()
    if text[:1] not in (b"{", b"["):
        return None
    recorder = _Shape(20)
    stream = JsonStream(recorder)
    recorder.stream = stream
    try:
        stream.feed(text)
    except JsonStreamError:
        return None
    keys = [m[0] for m in recorder.members] if recorder.top == "object" else recorder.first_keys
    return recorder.top, keys, recorder.arrays[0] if recorder.arrays else None
