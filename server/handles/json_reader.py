"""The reading half of the JSON view (`server.handles.json_view`): an output's JSON text a piece at a time,
and the errors of the view.

`Reader` holds a window of the text and a position; `walk` follows a path from the top, `elements` and
`read_batch` build an array's elements one at a time (or runs of them in one call of json's C scanner), and
values off the path are skipped without being built. Memory is bounded by `PIECE` plus the value being
built (at most `VALUE_MAX_CHARS`), and depth by `MAX_DEPTH`: a deeper value is `TooDeep` to build, and is
passed over by counting brackets, so the output's depth never matters to skipping it.
"""

from __future__ import annotations

import codecs
import json
import json.scanner
import re
from collections.abc import Callable
from typing import Any

from extraction import Source
from server.downstream.json_depth import MAX_DEPTH, deeper_than

__all__ = [
    "BATCH_TRIES",
    "KEY_MAX_CHARS",
    "MAX_DEPTH",
    "PIECE",
    "VALUE_MAX_CHARS",
    "Ends",
    "JsonViewError",
    "Reader",
    "Stop",
    "TooBig",
    "TooDeep",
    "elements",
    "kind_of",
    "lone_value",
    "not_json",
    "read_batch",
    "walk",
]

VALUE_MAX_CHARS = 16 << 20
"""The most characters of one value a streamed query builds (an element of the projected array, or the target)."""
PIECE = 1 << 20
KEY_MAX_CHARS = 64 * 1024
SPACE = re.compile(r"[ \t\n\r]*")
STRUCTURAL = re.compile(r'[\[\]{}"]')
STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*')
scan_once: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(  # the C scanner json.loads uses
    json.JSONDecoder(strict=False)  # type: ignore[arg-type]  # typeshed types the argument as the scanner itself
)


class JsonViewError(Exception):
    """The JSON view cannot answer; the message says why and what to do instead."""


def not_json(why: str) -> JsonViewError:
    return JsonViewError(f"The output is not JSON ({why}). Search it with Grep or read it with Read instead.")


def kind_of(char: str) -> str:
    """The kind of JSON value that starts with `char`."""
    return {"{": "object", "[": "array", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}.get(char, "number")


def lone_value(reader: Reader, kind: str) -> None:
    """Refuse a top-level string, number, boolean or null that more text follows: a log whose first token
    happens to read as JSON (a number, a date) is text, not JSON."""
    if reader.peek():
        raise not_json(f"it starts like a {kind}, then goes on as text at {reader.where()}")


class Stop(Exception):
    """Enough was read."""


class TooBig(Exception):
    """A value the query needs is over its limit."""


class TooDeep(Exception):
    """A value the query needs nests deeper than `MAX_DEPTH`."""


class Ends(Exception):
    """The JSON ends early, or is not JSON from here on; the message says where."""


class Reader:
    """The output's text a piece at a time, with a position; consumed text is dropped."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self._offset = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dropped = 0  # characters before `buf`
        self.start = 0  # where the value `value` returned last begins in `buf`

    def more(self) -> bool:
        if self.eof:
            return False
        data = self._source.read(self._offset, PIECE)
        self._offset += len(data)
        final = not data or self._offset >= self._source.size
        text = self._decoder.decode(data, final=final)
        self.eof = final
        self.dropped += self.pos
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return True

    def where(self) -> str:
        return f"character {self.dropped + self.pos}"

    def peek(self) -> str:
        """The next character after white space; "" at the end."""
        while True:
            self.pos = SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # always matches
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        char = self.peek()
        if not char or char not in chars:
            found = f"found {char!r}" if char else "found the end"
            raise Ends(f"expected {' or '.join(repr(c) for c in chars)} at {self.where()}, {found}")
        self.pos += 1
        return char

    def value(self, limit: int) -> Any:
        """The next value, built by the C scanner; `TooBig` past `limit` characters, `TooDeep` past `MAX_DEPTH`
        levels (the position unchanged for both)."""
        if not self.peek():
            raise Ends(f"a value was expected at {self.where()}, found the end")
        while True:
            try:
                value, end = scan_once(self.buf, self.pos)
                if end < len(self.buf) or self.eof:
                    if isinstance(value, (list, dict)) and deeper_than(self.buf, MAX_DEPTH, self.pos, end):
                        raise TooDeep
                    self.start, self.pos = self.pos, end  # buf[start:pos] is the value's text
                    return value
            except RecursionError:  # the scanner's own depth limit, far past ours
                raise TooDeep from None
            except StopIteration as stop:  # at the value's start: not a value; inside it: the text ran out
                if self.eof or stop.value == self.pos:
                    raise Ends(f"not a JSON value at {self.where()}: {self.buf[self.pos : self.pos + 20]!r}") from None
            except ValueError as exc:
                if self.eof:
                    raise Ends(f"{str(exc).split(':')[0].lower()} at {self.where()}") from None
            if len(self.buf) - self.pos > limit:
                raise TooBig
            self.more()

    def skip(self) -> None:
        """Pass over the next value, of any size: in C when it fits the text at hand, else by counting brackets."""
        char = self.peek()
        if char not in ('"', "[", "{"):
            self.value(1024)
            return
        try:
            end = scan_once(self.buf, self.pos)[1]
            if end < len(self.buf):
                self.pos = end
                return
        except (StopIteration, ValueError, RecursionError):  # cut by the text at hand, or too deep for C
            pass
        depth = 0
        while True:
            match = STRUCTURAL.search(self.buf, self.pos)
            if match is None:
                self.pos = len(self.buf)
                if not self.more():
                    raise Ends("the JSON ends early")
                continue
            self.pos = match.end()
            mark = match.group()
            if mark == '"':
                self._string_rest()
            elif mark in "[{":
                depth += 1
            else:
                depth -= 1
            if depth == 0:
                return

    def _string_rest(self) -> None:
        while True:
            end = STRING_BODY.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # always matches
            if end < len(self.buf) and self.buf[end] == '"':
                self.pos = end + 1
                return
            self.pos = end  # at the end of the text, or at a backslash whose escape is in the next piece
            if not self.more():
                raise Ends("the JSON ends early, inside a string")


def walk(reader: Reader, steps: list[str | int]) -> bool:
    """Go to the value at `steps`; False when there is none (JMESPath's null)."""
    for step in steps:
        if isinstance(step, str):
            if reader.peek() != "{":
                return False
            reader.pos += 1
            if reader.peek() == "}":
                return False
            while True:
                key = reader.value(KEY_MAX_CHARS)
                reader.expect(":")
                if key == step:
                    break
                reader.skip()
                if reader.expect(",}") == "}":
                    return False
        else:
            if reader.peek() != "[":
                return False
            reader.pos += 1
            if reader.peek() == "]":
                return False
            for _ in range(step):
                reader.skip()
                if reader.expect(",]") == "]":
                    return False
    return bool(reader.peek())


def elements(reader: Reader, emit: Callable[[Any, str | None], None], required: list[str]) -> bool:
    """Each element of the array at the reader, with its text (None for an element read in a batch); False
    when the value is not an array. Runs of whole elements are read in one C call where the text at hand
    allows; a run whose text lacks one of the `required` strings is passed over without evaluating it."""
    if reader.peek() != "[":
        return False
    reader.pos += 1
    if reader.peek() == "]":
        return True
    batch_from = 0  # after a run that could not be read as one, go element by element to the end of the text
    while True:
        if reader.dropped + reader.pos >= batch_from:
            batch = read_batch(reader)
            if batch is None:
                batch_from = reader.dropped + len(reader.buf)
            else:
                values, text, after = batch
                if not required:
                    reader.pos = after
                    for value in values:
                        emit(value, None)
                    continue
                if "\\u" not in text and not all(part in text for part in required):
                    reader.pos = after  # no element of the run can match
                    continue
                batch_from = reader.dropped + after  # a match may be in it: element by element, each filtered
        value = reader.value(VALUE_MAX_CHARS)
        emit(value, reader.buf[reader.start : reader.pos])
        if reader.expect(",]") == "]":
            return True


BATCH_TRIES = 8


def read_batch(reader: Reader) -> tuple[list[Any], str, int] | None:
    """The whole elements from the reader's position up to one of the last element-ending commas of the text
    at hand, parsed in one call, their text and the position after that comma; None when no run parses."""
    buf, start = reader.buf, reader.pos
    end = len(buf)
    for _ in range(BATCH_TRIES):
        comma = max(buf.rfind("},", start, end), buf.rfind("],", start, end))
        if comma < 0:
            comma = buf.rfind(",", start, end) - 1
            if comma < start:
                return None
        candidate = f"[{buf[start : comma + 1]}]"
        try:
            values, stop = scan_once(candidate, 0)
        except (StopIteration, ValueError):
            values, stop = None, -1
        except RecursionError:
            return None  # element by element, each refused or passed over as too deep
        if stop == len(candidate) and isinstance(values, list):
            if deeper_than(candidate, MAX_DEPTH + 1):  # the brackets around the run add a level
                return None
            return values, candidate, comma + 2
        end = comma
    return None
