"""An incremental JSON tokenizer whose string values arrive in pieces, so no value has to fit in memory.

Feed it bytes in any split; it calls a `JsonHandler` for each token. Strings (keys excepted) are
delivered as `string_start`, any number of `string_piece`s and `string_end`, decoded exactly as
`json.loads` would decode them (escapes, surrogate pairs and UTF-8 sequences cut across pieces
included; invalid UTF-8 becomes U+FFFD, control characters are accepted as `strict=False` does).
Everything outside strings is small by nature and tokenized in Python. Depth costs a list entry per level
(at most `MAX_DEPTH`), never recursion: a skipped member too deep for json's C scanner is tokenized here.

A piece that starts inside a long string (how a large tool output arrives: megabytes of one `text`) is
decoded as bytes by pydantic-core's parser, 2-5× faster than json's scanner on escaped text, when the whole
piece is the string's middle and reads the same either way; anything it refuses (the string's end, control
characters, lone surrogates, invalid UTF-8) goes the way described above, so what is decoded never differs.
"""

from __future__ import annotations

import json
import json.scanner
import re
from collections.abc import Callable
from typing import Protocol

from pydantic_core import from_json

from server.downstream.json_cuts import safe_cut, safe_cut_bytes, utf8_cut

__all__ = ["MAX_DEPTH", "JsonHandler", "JsonStream", "JsonStreamError"]

MAX_DEPTH = 1 << 20
"""The deepest value tokenized (8 MiB of stack entries); deeper is `JsonStreamError`, not memory without end."""

_SPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"[-+0-9.eEtrufalsn]*")
_SKIP_CARRY_CHARS = 256 * 1024  # a skipped member up to this long may wait for the next piece
_scan_once: Callable[[str, int], tuple[object, int]] = json.scanner.make_scanner(  # the C scanner json.loads uses
    json.JSONDecoder(strict=False)  # type: ignore[arg-type]  # typeshed types the argument as the scanner itself
)
_SLICE_BYTES = 64 * 1024
"""Longer pieces are decoded in slices of this size: the text made of each (4 bytes a character where one is
an emoji) then stays in the cache and in the allocator's heap; whole megabytes cost 5-7× as much, and 256 KiB
slices ~12% more CPU per GiB spooled than 64 KiB (raw UTF-8 or \\u-escaped text alike; 32 KiB gains no more)."""
_FAST_STRING_BYTES = 4096
"""A piece inside a string at least this long is offered to pydantic-core's parser first."""
_MAX_KEY_CHARS = 64 * 1024
_MAX_SCALAR_CHARS = 1024
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]  # the C scanner json.loads uses; typeshed omits it

# What may come next.
_VALUE, _KEY_OR_END, _KEY, _COLON, _COMMA_OR_END, _VALUE_OR_END, _STRING, _SCALAR_TOKEN, _DONE = range(9)
_BEFORE_MEMBER = frozenset((_VALUE, _VALUE_OR_END, _KEY_OR_END, _KEY))


class JsonStreamError(ValueError):
    """The bytes are not one well-formed JSON value."""


class JsonHandler(Protocol):
    """Receives the tokens of one JSON value, in order."""

    def start_object(self) -> None: ...
    def end_object(self) -> None: ...
    def start_array(self) -> None: ...
    def end_array(self) -> None: ...
    def key(self, name: str) -> None: ...
    def scalar(self, value: int | float | bool | None) -> None: ...
    def string_start(self) -> None: ...
    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        """A piece of a string's text; `escaped`, when given, is the piece as the message wrote it (the inside
        of a JSON string that pydantic-core's parser read as `text`: valid UTF-8, no control character, no lone
        surrogate), which a reader may pass on as it came instead of escaping `text` again."""
        ...

    def string_end(self) -> None: ...


class JsonStream:
    """Tokenizes one JSON value fed in pieces; `finish()` checks that it was complete."""

    def __init__(self, handler: JsonHandler) -> None:
        self._handler = handler
        self._state = _VALUE
        self._stack: list[int] = []  # 0 for an object, 1 for an array
        self._bytes = b""  # an unfinished UTF-8 sequence at the end of the last piece
        self._carry = ""  # the unfinished end of a string piece, or of a scalar
        self._in_key = False
        self._key_parts: list[str] = []
        self._key_chars = 0
        self._skipping: set[int] = set()  # depths of containers whose members are skipped
        self._fast_strings = True  # off once a string's middle was refused for what it holds
        self._fed = 0  # bytes fed so far
        self.proven: list[list[int]] | None = None
        """When a list (its owner sets it): the byte ranges of the value that are the middle of a string, none cut
        inside a character or an escape, which pydantic-core read as strict JSON (UTF-8, no control character),
        one `[start, end]` for each run of them (`server.downstream.json_spans` walks over them)."""

    @property
    def done(self) -> bool:
        return self._state == _DONE

    def _prove(self, start: int, end: int) -> None:
        """Bytes `[start, end)` of the value are the middle of a string that pydantic-core read strictly."""
        assert self.proven is not None
        if self.proven and self.proven[-1][1] == start:
            self.proven[-1][1] = end
        else:
            self.proven.append([start, end])

    def feed(self, data: bytes) -> None:
        if len(data) <= _SLICE_BYTES:
            self._feed(data)
            return
        for start in range(0, len(data), _SLICE_BYTES):
            self._feed(data[start : start + _SLICE_BYTES])

    def _feed(self, data: bytes) -> None:
        origin = self._fed - len(self._bytes)  # where `data` starts in the value, once the held bytes lead it
        self._fed += len(data)
        if self._bytes:
            data, self._bytes = self._bytes + data, b""
        refused = False
        if self._state == _STRING and not self._in_key and not self._carry and self._fast_strings:
            taken = self._string_middle(data)
            if taken:
                if self.proven is not None:
                    self._prove(origin, origin + len(data) - len(self._bytes))
                return
            refused = taken is False
        cut = utf8_cut(data)
        if cut < len(data):
            data, self._bytes = data[:cut], data[cut:]
        self._feed_text(data.decode("utf-8", "replace"))
        if refused and self._state == _STRING:
            self._fast_strings = False  # refused, yet the string goes on: its text is one json reads otherwise

    def finish(self) -> None:
        """Raise unless exactly one complete value was fed (trailing whitespace allowed)."""
        if self._bytes:
            rest, self._bytes = self._bytes, b""
            self._feed_text(rest.decode("utf-8", "replace"))
        if self._state == _SCALAR_TOKEN and not self._stack:
            text, self._carry = self._carry, ""
            self._scalar_token(text, 0, final=True)
        if self._state != _DONE:
            raise JsonStreamError("the JSON value ends early")

    def _feed_text(self, text: str) -> None:
        if self._carry:
            text, self._carry = self._carry + text, ""
        position, end = 0, len(text)
        while position < end:
            state = self._state
            if state == _STRING:
                position = self._string(text, position)
            elif state == _SCALAR_TOKEN:
                position = self._scalar_token(text, position, final=False)
            else:
                position = _SPACE.match(text, position).end()  # type: ignore[union-attr]  # always matches
                if position < end:
                    if len(self._stack) in self._skipping:
                        position = self._skip_elements(text, position)
                    else:
                        position = self._structural(text[position], position)

    # -- skipping --------------------------------------------------------------------------------

    def skip(self) -> None:
        """Called by the handler from `start_object`/`start_array`: it wants no events for the members of
        the container just opened. They are then parsed whole by json's C scanner where they fit in a
        piece, which is many times faster; the container's end is still reported."""
        self._skipping.add(len(self._stack))

    def _skip_elements(self, text: str, position: int) -> int:
        """Go through the skipped container's members in C; return where normal tokenizing must go on."""
        end = len(text)
        depth = len(self._stack)
        in_object = self._stack[-1] == 0
        scan, space = _scan_once, _SPACE.match
        batched = False
        while position < end:
            char = text[position]
            if char in " \t\n\r":
                position = space(text, position).end()  # type: ignore[union-attr]  # always matches
                continue
            state = self._state
            if not batched and state in _BEFORE_MEMBER and char not in "]}" and (state == _VALUE) != in_object:
                batched = True
                position = self._skip_batch(text, position, in_object)
                continue
            if state in _BEFORE_MEMBER and char not in "]}":
                if in_object and state != _VALUE and char != '"':
                    raise JsonStreamError(f"expected a key, found {char!r}")
                try:
                    after = scan(text, position)[1]
                except (StopIteration, ValueError):
                    after = end  # perhaps cut by the end of this piece
                except RecursionError:  # deeper than C recursion goes: tokenize this member, level by level
                    return self._structural(char, position)
                if after < end and char not in '"[{' and text[after] in "eE.+-0123456789":
                    after = end  # a number cut inside its fraction or exponent: wait for the rest
                if after >= end:  # a number ending here may go on in the next piece, so wait for it too
                    if end - position < _SKIP_CARRY_CHARS:
                        self._carry = text[position:]
                        return end
                    return self._structural(char, position)  # too big for one piece: tokenize this member
                position = after
                following = text[position] if position < end else ""
                if in_object and state != _VALUE:
                    self._state = _COLON
                    if following == ":":
                        self._state, position = _VALUE, position + 1
                else:
                    self._state = _COMMA_OR_END
                    if following == ",":
                        self._state, position = (_KEY if in_object else _VALUE), position + 1
                continue
            position = self._structural(char, position)
            if len(self._stack) < depth:  # the container closed
                self._skipping.discard(depth)
                return position
        return position

    def _skip_batch(self, text: str, position: int, in_object: bool) -> int:
        """Skip the run of whole members up to one of the last commas of this piece in one C call.

        A comma is a separator of this container exactly when the members before it, closed as a container
        of its kind, parse to the end; one inside a string or a nested value leaves that text invalid."""
        opening, closing = ("{", "}") if in_object else ("[", "]")
        comma = text.rfind(",", position)
        for _ in range(4):
            if comma <= position or not text[position:comma].strip():
                break
            candidate = f"{opening}{text[position:comma]}{closing}"
            try:
                whole = _scan_once(candidate, 0)[1] == len(candidate)
            except (StopIteration, ValueError, RecursionError):  # not a run of whole members, or too deep for C
                whole = False
            if whole:
                self._state = _KEY if in_object else _VALUE
                return comma + 1
            comma = text.rfind(",", position, comma)
        return position

    # -- outside strings ---------------------------------------------------------------------------

    def _structural(self, char: str, position: int) -> int:
        state = self._state
        handler = self._handler
        if state == _DONE:
            raise JsonStreamError(f"unexpected {char!r} after the end of the value")
        if state in (_VALUE, _VALUE_OR_END):
            if char == "]" and state == _VALUE_OR_END:
                self._close(1)
                handler.end_array()
            elif char in "{[" and len(self._stack) >= MAX_DEPTH:
                raise JsonStreamError(f"the JSON value nests deeper than {MAX_DEPTH} levels")
            elif char == "{":
                self._stack.append(0)
                self._state = _KEY_OR_END
                handler.start_object()
            elif char == "[":
                self._stack.append(1)
                self._state = _VALUE_OR_END
                handler.start_array()
            elif char == '"':
                self._in_key = False
                self._state = _STRING
                handler.string_start()
            else:
                self._state = _SCALAR_TOKEN
                return position
            return position + 1
        if state in (_KEY_OR_END, _KEY):
            if char == "}" and state == _KEY_OR_END:
                self._close(0)
                handler.end_object()
            elif char == '"':
                self._in_key = True
                self._key_parts, self._key_chars = [], 0
                self._state = _STRING
            else:
                raise JsonStreamError(f"expected a key, found {char!r}")
            return position + 1
        if state == _COLON:
            if char != ":":
                raise JsonStreamError(f"expected ':', found {char!r}")
            self._state = _VALUE
            return position + 1
        # _COMMA_OR_END
        container = self._stack[-1]
        if char == ",":
            self._state = _KEY if container == 0 else _VALUE
        elif char == ("}" if container == 0 else "]"):
            self._close(container)
            if container == 0:
                handler.end_object()
            else:
                handler.end_array()
        else:
            raise JsonStreamError(f"expected ',' or the end of the {'object' if container == 0 else 'array'}")
        return position + 1

    def _close(self, container: int) -> None:
        if not self._stack or self._stack.pop() != container:
            raise JsonStreamError("mismatched brackets")
        self._after_value()

    def _after_value(self) -> None:
        self._state = _COMMA_OR_END if self._stack else _DONE

    def _scalar_token(self, text: str, position: int, *, final: bool) -> int:
        end = _SCALAR.match(text, position).end()  # type: ignore[union-attr]  # always matches
        if end == len(text) and not final:  # the token may go on in the next piece
            self._carry = text[position:]
            if len(self._carry) > _MAX_SCALAR_CHARS:
                raise JsonStreamError("a number or literal is too long")
            return end
        token = text[position:end]
        if not token:
            raise JsonStreamError(f"unexpected {text[position : position + 1]!r}")
        try:
            value = json.loads(token)
        except ValueError:
            raise JsonStreamError(f"not a JSON value: {token[:40]!r}") from None
        self._handler.scalar(value)
        self._after_value()
        return end

    # -- strings -----------------------------------------------------------------------------------

    def _string(self, text: str, position: int) -> int:
        """Decode what there is of the current string; return where the caller goes on."""
        quote = text.find('"', position)
        if quote >= 0 and text.find("\\", position, quote) < 0:  # the common short string: no escapes
            self._piece(text[position:quote])
            self._end_string()
            return quote + 1
        rest = text[position:]
        cut = safe_cut(rest)
        candidate = rest[:cut]
        # One C pass: the quote appended here ends the string unless a real closing quote comes first
        # (one can only be inside `candidate`: what `safe_cut` holds back is part of an escape).
        try:
            value, end = _scanstring(f'"{candidate}"', 1, False)
        except ValueError as exc:
            raise JsonStreamError(f"a bad escape in a string: {exc}") from None
        self._piece(value)
        if end <= len(candidate) + 1:  # a real closing quote, at text index position + end - 2
            self._end_string()
            return position + end - 1
        self._carry = rest[cut:]
        return len(text)

    def _string_middle(self, data: bytes) -> bool | None:
        """Decode `data` as the middle of the current string in one call, when it is one and long enough: up to
        its last whole UTF-8 sequence and escape, the rest kept for the next piece. False: refused; None: too
        short to try."""
        cut = safe_cut_bytes(data, utf8_cut(data))
        if cut < _FAST_STRING_BYTES:
            return None
        middle = data if cut == len(data) else data[:cut]
        try:
            text = from_json(b"".join((b'"', middle, b'"')), cache_strings=False)  # one copy, not two
        except ValueError:  # the string ends in it, or holds what json reads otherwise: the way for every piece
            return False
        self._bytes = data[cut:]
        self._handler.string_piece(text, middle)
        return True

    def _piece(self, text: str) -> None:
        if not text:
            return
        if not self._in_key:
            self._handler.string_piece(text)
            return
        self._key_chars += len(text)
        if self._key_chars > _MAX_KEY_CHARS:
            raise JsonStreamError("an object key is too long")
        self._key_parts.append(text)

    def _end_string(self) -> None:
        if self._in_key:
            self._handler.key("".join(self._key_parts))
            self._state = _COLON
            return
        self._handler.string_end()
        self._after_value()
