"""A JSON-with-comments file edited as text, so that its comments, layout and other keys stay as they were: the
members of one object, found by their path of keys, taken out, replaced or added.

VS Code, Cursor and Zed allow `//` and `/* */` comments and trailing commas in their files (Zed's settings.json
begins with comments), which `json.dumps` would drop. `edit_members` finds the object by scanning the text once
(strings, comments and nesting respected), cuts and inserts at the offsets it found, and the caller checks the
result parses to what was meant (`server.client_files.rewritten`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NotEditable", "edit_members"]


class NotEditable(ValueError):
    """The text is not one this edit can change with certainty (not JSON with comments, or the path missing)."""


@dataclass(slots=True)
class _Member:
    key: str
    start: int  # the key's opening quote
    value_start: int
    value_end: int  # past the value
    after: int  # past the comma that follows it, or `value_end` when none does
    value: _Object | None = None  # when the value is an object


@dataclass(slots=True)
class _Object:
    open: int  # the `{`
    close: int  # the `}`
    members: list[_Member] = field(default_factory=list)

    def get(self, key: str) -> _Member | None:
        return next((member for member in self.members if member.key == key), None)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def gap(self) -> None:
        """Skip whitespace and comments."""
        text = self.text
        while self.at < len(text):
            if text[self.at] in " \t\r\n\ufeff":
                self.at += 1
            elif text.startswith("//", self.at):
                end = text.find("\n", self.at)
                self.at = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.at):
                end = text.find("*/", self.at + 2)
                if end < 0:
                    raise NotEditable("a comment is not closed")
                self.at = end + 2
            else:
                return

    def value(self) -> _Object | None:
        """Scan one value; the object, when it is one."""
        self.gap()
        if self.at >= len(self.text):
            raise NotEditable("the text ends where a value should be")
        char = self.text[self.at]
        if char == "{":
            return self.object()
        if char == "[":
            self.at += 1
            self.gap()
            while self.text[self.at : self.at + 1] != "]":
                self.value()
                self.gap()
                if self.text[self.at : self.at + 1] == ",":
                    self.at += 1
                    self.gap()
                elif self.text[self.at : self.at + 1] != "]":
                    raise NotEditable("an array's items are not separated by commas")
            self.at += 1
        elif char == '"':
            self.string()
        else:
            match = re.compile(r"[-+0-9.eEa-zA-Z]+").match(self.text, self.at)
            if match is None:
                raise NotEditable(f"unexpected {char!r}")
            self.at = match.end()
        return None

    def string(self) -> str:
        start = self.at
        self.at += 1
        while self.at < len(self.text) and self.text[self.at] != '"':
            self.at += 2 if self.text[self.at] == "\\" else 1
        self.at += 1
        if self.at > len(self.text):
            raise NotEditable("a string is not closed")
        return str(json.loads(self.text[start : self.at]))

    def object(self) -> _Object:
        found = _Object(self.at, -1)
        self.at += 1
        self.gap()
        while self.text[self.at : self.at + 1] != "}":
            if self.text[self.at : self.at + 1] != '"':
                raise NotEditable("an object's key is not a string")
            start = self.at
            key = self.string()
            self.gap()
            if self.text[self.at : self.at + 1] != ":":
                raise NotEditable("a key is not followed by ':'")
            self.at += 1
            self.gap()
            value_start = self.at
            nested = self.value()
            member = _Member(key, start, value_start, self.at, self.at, nested)
            self.gap()
            if self.text[self.at : self.at + 1] == ",":
                self.at += 1
                member.after = self.at
                self.gap()
            elif self.text[self.at : self.at + 1] != "}":
                raise NotEditable("an object's members are not separated by commas")
            found.members.append(member)
        found.close = self.at
        self.at += 1
        return found


def edit_members(text: str, path: Sequence[str], remove: Sequence[str], name: str, value: Any) -> str:
    """`text` with the object at `path` (keys from the top) missing the members `remove` and having `name` set to
    `value` (replaced where it was, else added last), everything else as it was. An object missing at the end of
    `path` is added to its parent. `NotEditable` when the text cannot be changed so."""
    scanner = _Scanner(text)
    top = scanner.value()
    scanner.gap()
    if top is None or scanner.at != len(text):
        raise NotEditable("the text is not one object")
    target = top
    for depth, key in enumerate(path):
        member = target.get(key)
        if member is None and depth == len(path) - 1:
            return _insert(text, target, key, {name: value})
        if member is None or member.value is None:
            raise NotEditable(f"{key} is not an object")
        target = member.value
    edits: list[tuple[int, int, str]] = []
    replaced = False
    for member in target.members:
        if member.key == name:
            nl = "\r\n" if "\r\n" in text else "\n"
            edits.append((member.value_start, member.value_end, _dumped(value, _indent_of(text, member.start), nl)))
            replaced = True
        elif member.key in remove:
            edits.append(_cut(text, member))
    out = text
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    if replaced:
        return out
    again = _Scanner(out).value()
    assert again is not None
    for key in path:
        member = again.get(key)
        assert member is not None and member.value is not None
        again = member.value
    last = target.members[-1] if target.members else None
    return _insert(out, again, name, value, trailing=last is not None and last.after > last.value_end)


def set_value(text: str, path: Sequence[str], value: Any) -> str:
    """`text` with the value of the member at `path` (keys from the top, the member there) replaced by `value`,
    on one line where the old value had one line. `NotEditable` when the member is missing, or when its old value
    holds a comment, which the new value would drop."""
    scanner = _Scanner(text)
    target = scanner.value()
    scanner.gap()
    if target is None or scanner.at != len(text):
        raise NotEditable("the text is not one object")
    member: _Member | None = None
    for key in path:
        member = target.get(key) if target is not None else None
        if member is None:
            raise NotEditable(f"{key} is missing")
        target = member.value
    if member is None:
        raise NotEditable("no member named")
    old = text[member.value_start : member.value_end]
    if _has_comment(old):
        raise NotEditable(f"{path[-1]} holds a comment")
    nl = "\r\n" if "\r\n" in text else "\n"
    indent = _indent_of(text, member.start)
    new = json.dumps(value, ensure_ascii=False) if "\n" not in old else _dumped(value, indent, nl)
    return text[: member.value_start] + new + text[member.value_end :]


def _has_comment(text: str) -> bool:
    """Whether JSON-with-comments `text` (one value) holds a comment outside its strings."""
    return bool(re.search(r"//|/\*", re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)))


def _cut(text: str, member: _Member) -> tuple[int, int, str]:
    """The span that takes `member` out: its whole lines where it has them to itself, else from its key to past its
    comma."""
    start, end = member.start, member.after
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if not text[line_start:start].strip() and not text[end:line_end].strip():
        return line_start, line_end, ""
    return start, end, ""


def _insert(text: str, target: _Object, key: str, value: Any, *, trailing: bool = False) -> str:
    """`text` with `"key": value` added as the last member of `target`, followed by a comma where `trailing` (the
    object's last member had one before the edit); its lines end as the text's do (CRLF as Windows editors write)."""
    nl = "\r\n" if "\r\n" in text else "\n"
    if target.members:
        last = target.members[-1]
        indent = _indent_of(text, last.start)
        member = f"{json.dumps(key, ensure_ascii=False)}: {_dumped(value, indent, nl)}" + ("," if trailing else "")
        comma = last.after > last.value_end  # a comma after the last member already
        anchor = last.after if comma else last.value_end
        line_end = text.find("\n", anchor)
        rest = text[anchor : len(text) if line_end < 0 else line_end]
        added = "" if comma else ","
        if line_end >= 0 and (not rest.strip() or rest.lstrip().startswith("//")):  # after the line and its comment
            at = line_end + 1
            return text[: last.value_end] + added + text[last.value_end : at] + indent + member + nl + text[at:]
        return text[: last.value_end] + added + text[last.value_end : anchor] + nl + indent + member + text[anchor:]
    outer = _indent_of(text, target.open)
    indent = outer + "  "
    member = f"{json.dumps(key, ensure_ascii=False)}: {_dumped(value, indent, nl)}"
    inside = text[target.open + 1 : target.close]
    if inside.strip():  # only comments inside: the member goes after them
        return text[: target.close].rstrip() + nl + indent + member + nl + outer + text[target.close :]
    return text[: target.open + 1] + nl + indent + member + nl + outer + text[target.close :]


def _indent_of(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    head = text[line_start:at]
    return head if not head.strip() else head[: len(head) - len(head.lstrip())]


def _dumped(value: Any, indent: str, nl: str = "\n") -> str:
    """`value` as JSON of two-space indents, its later lines under `indent`, ending in `nl`."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", nl + indent)
