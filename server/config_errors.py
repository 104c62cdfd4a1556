"""What a config's validation errors say: each problem at its key's path, and for an unknown key the known key
it was most likely meant to be (difflib's closest, or the same key written in another case or style)."""

from __future__ import annotations

import difflib
import json
import re
import shlex
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from server.errors import clip

__all__ = ["describe_errors", "known_keys"]


def describe_errors(exc: ValidationError, model: type[BaseModel], *, table: str = "mcpServers") -> str:
    """One line of problems, `path: message; …`, against the config `model` that refused the data; `table` is
    where the file keeps its servers, which the paths name (VS Code's `servers`, Codex's `mcp_servers`; "" for
    servers at the file's top level)."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        shown = ((table,) if table else ()) + tuple(loc[1:]) if loc and loc[0] == "mcpServers" else loc
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in shown).lstrip(".") or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"{path}: unknown key{_suggestion(str(loc[-1]), known_keys(model, loc[:-1]))}")
        else:
            lines.append(f"{path}: {_said(err)}")
    return "invalid config: " + "; ".join(lines)


def _said(err: Any) -> str:
    """pydantic's message, or for a value of the wrong shape the shape to give (a server's entry written as its
    command line, `args` as one string: both the way to write them, from the text given)."""
    given = err.get("input")
    if err["type"] in ("model_type", "model_attributes_type", "dict_type"):
        if isinstance(given, str) and len(err["loc"]) == 2 and err["loc"][0] == "mcpServers":
            return f"give an object, such as {_shown(_entry_of(given))}"
        pairs = _pairs(given, "=" if err["loc"][-1] == "env" else ":")
        if pairs:  # `"env": ["KEY=value"]`, as docker writes it; `"headers": ["Name: value"]`, as curl does
            return f"give an object, such as {_shown(pairs)}"
        return "give an object ({…})"
    if err["type"] == "list_type" and isinstance(given, str):
        return f"give a list of strings, such as {_shown(_words(given))}"
    return str(err["msg"]).removeprefix("Value error, ")


def _shown(value: Any) -> str:
    """`value` as JSON, clipped: it is made from what the file holds, which may be long."""
    return clip(json.dumps(value, ensure_ascii=False), 300)


def _pairs(given: Any, separator: str) -> dict[str, str] | None:
    """A list of `NAME<separator>value` strings as the object it means, else None."""
    if not isinstance(given, list) or not given:
        return None
    if not all(isinstance(item, str) and separator in item for item in given):
        return None
    return {name.strip(): value.strip() for name, _, value in (item.partition(separator) for item in given)}


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # an unclosed quote
        return line.split()


def _entry_of(line: str) -> dict[str, Any]:
    """A server's entry for a command line (`uvx mcp-server-git` → command and args), or a URL's."""
    if re.match(r"https?://", line.strip(), re.IGNORECASE):
        return {"url": line.strip()}
    words = _words(line) or [line]
    return {"command": words[0], "args": words[1:]} if len(words) > 1 else {"command": words[0]}


def _suggestion(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:  # a key spelled in another case or style (`async_timeout_secs`, `AsyncTimeoutSecs`)
        folded = {k.lower().replace("_", ""): k for k in known}
        found = folded.get(key.lower().replace("_", "").replace("-", ""))
        close = [found] if found else []
    return f" (did you mean `{close[0]}`?)" if close else ""


def known_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the object at `loc` (a path into data `model` validates) may have; [] where that is not known."""
    target: Any = model
    for part in loc:
        target = _step(target, part)
        if target is None:
            return []
    models = [t for t in _members(target) if _is_model(t)]
    return [field.alias or name for m in models for name, field in m.model_fields.items()]


def _step(annotation: Any, part: int | str) -> Any:
    """The type of the value at `part` inside a value of type `annotation`, or None."""
    for member in _members(annotation):
        if _is_model(member):
            for name, field in member.model_fields.items():
                if part in (field.alias, name):
                    return field.annotation
        origin = typing.get_origin(member)
        args = typing.get_args(member)
        if origin in (dict, Mapping):
            return args[1] if len(args) == 2 else None
        if origin in (list, tuple, set, frozenset) and isinstance(part, int):
            return args[0] if args else None
    return None


def _members(annotation: Any) -> list[Any]:
    """The types an annotation may be: the members of a union (Optional included), Annotated unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
