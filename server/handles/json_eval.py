"""JMESPath for the JSON view under a budget: the query's size and nesting before it is parsed, and the memory
and time its evaluation may take.

The budget is kept by the evaluator itself, in this process, rather than by a bounded worker process: the
JSON view builds the values a query needs as it streams the output (one element at a time, in a thread), so a
worker would have to take the whole streaming reader with it and pay a process (and jmespath's import) per
query on a small shared machine, and an rlimit kills the worker without saying which part of the query was
too much. JMESPath makes new values in few places: multi-selects, projections, flatten and functions (only
`join` and `to_string` make strings longer than their arguments). After each of those the result's weight is
measured: about its JSON text's length (an upper bound: escapes counted), with 8 per list slot and 48 per
object member, which is about the memory a new container takes. Weights count a value shared several times
(`[@, @]`) as often as it is reachable, since `to_string`, `==` and the final JSON walk it that often; values
already weighed in the same evaluation are remembered by identity, so a shared value is walked once. A value
over `VALUE_MAX` or a sum of new weight over `TOTAL_MAX` stops the evaluation with `QueryTooBig` before the
next step could multiply it; `join` is checked before it runs, since its separator repeats once per element.
The time spent evaluating is checked at every node (each step's work is bounded by the weight of its inputs).

What of jmespath this relies on beyond `jmespath.compile` and its documented custom functions (a
`functions.Functions` subclass with `@signature`-decorated `_func_*` methods, passed in `Options`):
`TreeInterpreter.visit` is overridden to see every node (the only way to observe evaluation; jmespath has no
hooks), `ParsedResult.parsed` and the AST's node dicts (`type`, `children`, `value`) are read, and
`jmespath.lexer.Lexer` is not used: the query is measured here on its text, since jmespath's lexer and parser
recurse (parentheses, `!`, `&`, backtick JSON literals) and would raise RecursionError on deep input. If
jmespath grew evaluation limits, this module would shrink to passing them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import jmespath
from jmespath import functions
from jmespath.exceptions import JMESPathError
from jmespath.visitor import Options, TreeInterpreter

__all__ = [
    "AST_MAX_DEPTH",
    "EVAL_MAX_SECONDS",
    "QUERY_MAX_CHARS",
    "QUERY_MAX_DEPTH",
    "TOTAL_MAX",
    "VALUE_MAX",
    "BadQuery",
    "Evaluator",
    "QueryTooBig",
    "compile_query",
]

QUERY_MAX_CHARS = 4096
"""The longest query accepted (a JMESPath query a model writes is a line or two)."""
QUERY_MAX_DEPTH = 32
"""The deepest nesting of brackets, parentheses, braces and `!`/`&` prefixes in a query's text."""
AST_MAX_DEPTH = 100
"""The deepest parsed query: evaluation recurses once per level (`a.b.c…` and `a | b | …` nest too)."""
VALUE_MAX = 32 << 20
"""The largest weight (about JSON characters, or bytes of new containers) of one value a query makes."""
TOTAL_MAX = 128 << 20
"""The most new weight one evaluation may make in all (what it holds at once is at most this)."""
EVAL_MAX_SECONDS = 10.0
"""The most time a query's evaluation may take, summed over the elements it is applied to."""
_MEMO_MIN = 256  # containers at least this heavy are remembered by identity within one evaluation
_MEMO_MAX = 1 << 16
_TICK_NODES = 1 << 14  # a weighing looks at the clock every so many values
_MAKERS = frozenset(
    {"multi_select_list", "multi_select_dict", "projection", "value_projection", "filter_projection", "flatten"}
)
_OPENING, _CLOSING, _QUOTES = "([{", ")]}", "'\"`"


class BadQuery(Exception):
    """The query is refused before it runs; the message says why."""


class QueryTooBig(Exception):
    """The evaluation went past its memory or time budget; the message says which."""


def compile_query(expression: str) -> Any:
    """The parsed query; `BadQuery` when it is too long or nested too deep, jmespath's error when it is not
    JMESPath."""
    if len(expression) > QUERY_MAX_CHARS:
        raise BadQuery(f"the query is {len(expression)} characters, over the {QUERY_MAX_CHARS} allowed")
    if _text_depth(expression, QUERY_MAX_DEPTH) > QUERY_MAX_DEPTH:
        raise BadQuery(f"the query nests more than {QUERY_MAX_DEPTH} levels deep (brackets, parentheses, `!`, `&`)")
    try:
        parsed = jmespath.compile(expression)
    except (RecursionError, ValueError) as exc:  # a literal or number the text check let through
        if isinstance(exc, JMESPathError):  # jmespath's errors are ValueErrors
            raise
        raise BadQuery(f"jmespath cannot read it ({type(exc).__name__})") from None
    if (depth := _ast_depth(parsed.parsed)) > AST_MAX_DEPTH:
        raise BadQuery(f"the query has {depth} levels of expressions, over the {AST_MAX_DEPTH} allowed")
    return parsed


def _text_depth(expression: str, limit: int) -> int:
    """The deepest nesting in the query's text, or `limit + 1` once it is past `limit`: open brackets plus the
    `!` and `&` prefixes met since the innermost one opened (an overestimate: a prefix counts until its bracket
    closes). Quoted names and raw strings are passed over; the JSON of a backtick literal counts, as jmespath
    parses it recursively."""
    deepest = 0
    prefixes = [0]  # per open bracket, the prefixes met inside it
    quote = ""
    escaped = False
    for at, char in enumerate(expression):
        if escaped:
            escaped = False
            continue
        if quote in ("'", '"'):
            if char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if quote == "`":
            if char == "\\":
                escaped = True
                continue
            if char == "`":
                quote = ""
                continue
        elif char in _QUOTES:
            quote = char
            continue
        if char in _OPENING:
            prefixes.append(0)
        elif char in _CLOSING:
            if len(prefixes) > 1:
                prefixes.pop()
        elif not quote and char in "!&" and _prefix(expression, at):
            prefixes[-1] += 1
        deepest = max(deepest, len(prefixes) - 1 + sum(prefixes))
        if deepest > limit:
            return deepest
    return deepest


def _prefix(expression: str, at: int) -> bool:
    """Whether the `!` or `&` at `at` is a prefix (not `!=`, not part of `&&`)."""
    return expression[at + 1 : at + 2] not in ("=", "&") and expression[at - 1 : at] != "&"


def _ast_depth(root: Any) -> int:
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in node.get("children", ()) if isinstance(node, dict) else ():
            if isinstance(child, dict):
                stack.append((child, depth + 1))
    return deepest


def _scalar_weight(value: Any) -> int:
    if isinstance(value, str):
        if value.isascii():
            escapes = value.count('"') + value.count("\\") + (0 if value.isprintable() else 5 * len(value))
            return len(value) + 2 + escapes
        return 6 * len(value) + 2  # \uXXXX; an astral character is two of them, so at most twice this
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() // 3 + 2
    return 24  # a float's repr


class Evaluator:
    """Evaluates parsed queries under one budget: `VALUE_MAX` and `TOTAL_MAX` per evaluation, and
    `EVAL_MAX_SECONDS` over all the evaluations of one query."""

    def __init__(self) -> None:
        self.value_max, self.total_max, self.seconds = VALUE_MAX, TOTAL_MAX, EVAL_MAX_SECONDS
        self._spent = 0.0
        self._deadline = 0.0
        self._total = 0
        self._memo: dict[int, tuple[object, int]] = {}
        self._interpreter = _Interpreter(self)

    def evaluate(self, node: Any, value: Any) -> Any:
        """`node` (a parsed query's AST, or part of it) applied to `value`; `QueryTooBig` past the budget."""
        started = time.monotonic()
        self._deadline = started + self.seconds - self._spent
        self._total = 0
        try:
            return self._interpreter.visit(node, value)
        finally:
            self._memo.clear()
            self._spent += time.monotonic() - started

    def tick(self) -> None:
        if time.monotonic() > self._deadline:
            raise QueryTooBig(f"the query took over {self.seconds:g} s to evaluate")

    def weigh(self, root: Any) -> int:
        """The weight of `root` as it is reachable; what was not weighed before in this evaluation is added
        to its total. `QueryTooBig` past either limit."""
        if not isinstance(root, (list, dict)):
            weight = _scalar_weight(root)
            self._add(weight, weight)
            return weight
        memo = self._memo
        if (known := memo.get(id(root))) is not None:
            return known[1]
        frames: list[list[Any]] = [[root, _members(root), 16, 16]]  # value, members, reachable, new
        nodes = 0
        while True:
            frame = frames[-1]
            for member in frame[1]:
                nodes += 1
                if nodes % _TICK_NODES == 0:
                    self.tick()
                if isinstance(member, tuple):  # an object's (key, value)
                    key, member = member
                    step = _scalar_weight(key) + 48
                    frame[2] += step
                    frame[3] += step
                else:
                    frame[2] += 8
                    frame[3] += 8
                if isinstance(member, (list, dict)):
                    if (known := memo.get(id(member))) is not None:
                        frame[2] += known[1]
                    else:
                        frames.append([member, _members(member), 16, 16])
                        break
                else:
                    weight = _scalar_weight(member)
                    frame[2] += weight
                    frame[3] += weight
                if frame[2] > self.value_max:
                    raise QueryTooBig(_over("a value the query makes", self.value_max))
            else:
                frames.pop()
                value, _, reachable, new = frame
                if reachable >= _MEMO_MIN and len(memo) < _MEMO_MAX:
                    memo[id(value)] = (value, reachable)
                if not frames:
                    self._add(reachable, new)
                    return int(reachable)
                frames[-1][2] += reachable
                frames[-1][3] += new

    def _add(self, reachable: int, new: int) -> None:
        if reachable > self.value_max:
            raise QueryTooBig(_over("a value the query makes", self.value_max))
        self._total += new
        if self._total > self.total_max:
            raise QueryTooBig(_over("the values the query makes, in all,", self.total_max))


def _over(what: str, limit: int) -> str:
    return f"{what} would take over {limit >> 20} MiB"


def _members(value: list[Any] | dict[str, Any]) -> Any:
    return iter(value) if isinstance(value, list) else iter(value.items())


class _Functions(functions.Functions):
    """jmespath's functions, with `join` and `to_string` weighed before they build a string."""

    def __init__(self, budget: Evaluator) -> None:
        super().__init__()
        self._budget = budget

    @functions.signature({"types": ["string"]}, {"types": ["array-string"]})
    def _func_join(self, separator: str, array: list[str]) -> str:
        size = len(separator) * max(0, len(array) - 1) + sum(map(len, array))
        if size > self._budget.value_max:
            raise QueryTooBig(_over(f"join would make a string of {size} characters; that", self._budget.value_max))
        return separator.join(array)

    @functions.signature({"types": []})
    def _func_to_string(self, arg: Any) -> str:
        if isinstance(arg, str):
            return arg
        self._budget.weigh(arg)  # raises when its text would be too long
        return json.dumps(arg, separators=(",", ":"), default=str)  # as jmespath's own to_string


class _Interpreter(TreeInterpreter):
    """jmespath's interpreter, looking at the clock at every node and weighing what the making nodes make."""

    def __init__(self, budget: Evaluator) -> None:
        super().__init__(Options(custom_functions=_Functions(budget)))
        self._budget = budget

    def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        self._budget.tick()
        result = super().visit(node, *args, **kwargs)
        kind = node["type"]
        if kind in _MAKERS or (kind == "function_expression" and isinstance(result, (str, list, dict))):
            self._budget.weigh(result)
        return result
