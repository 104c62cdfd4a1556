"""Where a JSON-RPC response's `result`, and the `content` array in it, lie in a message on disk, and whether the
message can be passed on as it came: found without parsing it into objects or holding it, for an answer that passes
a server's message on a piece at a time (`server.upstream.kept_message`).

The message was read once already (`MessageSpool` checked it is one JSON value, leniently: as Python's `json`
reads it), so this walks only its brackets, separators and strings, a megabyte at a time: a string is skipped to
its closing quote with `find` (a base64 image is a few jumps), and only the keys at the top level, in the result and
in its content items are kept. What a strict reader (a browser's `JSON.parse`, the SDK's pydantic) would refuse, or
what claimcheck would not build itself, makes the message one that cannot be passed on as it came (`NotPassable`):
bytes that are not UTF-8, control characters in a string, `NaN` or `Infinity`, a number of 1 000 digits, nesting
past `MAX_DEPTH`, a `content` that is not an array of objects, a `structuredContent` that is not an object.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from server.downstream.json_depth import MAX_DEPTH

__all__ = ["ItemSpan", "NotPassable", "ResultSpans", "result_spans", "spans_in_file"]

_TOKENS = re.compile(rb'[{}\[\]":,]')
_NEVER = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # a control character that is no JSON whitespace
_CONTROL = re.compile(rb"[\x00-\x1f]")  # in a string: refused by a strict reader
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # up to the closing quote, or a last backslash
_TRAILING_DIGITS = re.compile(rb"[0-9]*\Z")
_LEADING_DIGITS = re.compile(rb"[0-9]*")
_LONG_NUMBER = 1000
_LONG_RUN = re.compile(rb"[0-9]{%d}" % _LONG_NUMBER)
_KEY_BYTES = 64  # a longer key is none of those looked for
_READ_BYTES = 1 << 20
_SPACE = b" \t\r\n"


class NotPassable(ValueError):
    """The message is one claimcheck does not pass on as it came (the reason says why)."""


@dataclass(frozen=True, slots=True)
class ItemSpan:
    """One content item: `[start, end)`, and its `type` when that is a short string."""

    start: int
    end: int
    type: str | None


@dataclass(frozen=True, slots=True)
class ResultSpans:
    """Byte offsets in a response message: its `result` object is `[start, end)`; `content_end` is the offset of
    the `]` that closes the result's `content` array (None when it has none), `content_empty` whether that array
    holds nothing, `result_empty` whether the result object does; `items`, the content's items."""

    start: int
    end: int
    content_end: int | None
    content_empty: bool
    result_empty: bool
    items: list[ItemSpan] = field(default_factory=list)
    members: frozenset[str] = frozenset()
    """The result's keys (those of up to 64 bytes)."""


def spans_in_file(path: Path, proven: Sequence[Sequence[int]] = ()) -> ResultSpans | None:
    """`result_spans` of the message in `path`, read a megabyte at a time, but for the `proven` ranges (the middles
    of strings the spool's reader read strictly: `JsonStream.proven`), which are passed over unread. Blocking; raises
    `NotPassable`."""
    with path.open("rb") as file:

        def read_at(offset: int) -> bytes:
            file.seek(offset)
            return file.read(_READ_BYTES)

        return _walked(read_at, proven)


def result_spans(data: bytes, piece: int = _READ_BYTES, proven: Sequence[Sequence[int]] = ()) -> ResultSpans | None:
    """Where the `result` object of the response `data` is (its first `result` key, at the top level); None when
    `data` has no object `result` there. Raises `NotPassable` (see the module's doc). Walked `piece` bytes at a
    time, as a file is, passing over the `proven` ranges (see `spans_in_file`)."""
    return _walked(lambda offset: data[offset : offset + piece], proven)


def _walked(read_at: Callable[[int], bytes], proven: Sequence[Sequence[int]]) -> ResultSpans | None:
    """The walk over the pieces `read_at(offset)` gives, from 0 on, each where the last ended or past a proven
    range."""
    walk = _Walk(proven)
    offset = 0
    while not walk.ended:
        if walk.jump_to > offset:
            offset = walk.jump_to
            walk.skipped(offset)
        piece = read_at(offset)
        if not piece:
            break
        walk.feed(piece)
        offset += len(piece)
    return walk.finish()


class _Walk:
    """The walk over one message, fed in pieces (see the module's doc)."""

    def __init__(self, proven: Sequence[Sequence[int]]) -> None:
        self._proven = [(start, end) for start, end in proven if end > start]
        self._next = 0  # the first proven range that does not end before the walk
        self.jump_to = 0
        """Where the walk goes on, when a proven range runs past the piece: its reader passes over the bytes up to
        there, and says so (`skipped`)."""
        self._base = 0  # the offset of the piece being fed
        self._depth = 0  # containers open
        self._in_string = False
        self._escaping = False  # the last piece ended inside a string, on the backslash that begins an escape
        self._capture: bytearray | None = None  # the string's first bytes, while it may be a key or an item's type
        self._string: bytes | None = None  # the last string, when it may be a key (its colon not seen yet)
        self._key: bytes | None = None  # the key whose value comes next (after its colon, nothing but space yet)
        self._key_depth = 0
        self._digits = 0  # digits in a row that ended the last piece, outside strings
        self._after_item_type = False
        self._start = self._content_start = self._content_end = self._item_start = -1
        self._item_type: str | None = None
        self._items: list[ItemSpan] = []
        self._members: set[str] = set()
        self._empty_result = self._empty_content = False
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._found: ResultSpans | None = None
        self.ended = False

    def finish(self) -> ResultSpans | None:
        if not self.ended:
            self._utf8(b"", final=True)
        return self._found

    def skipped(self, offset: int) -> None:
        """The reader passed over the bytes up to `offset` (`jump_to`): the next piece starts there."""
        self._base = offset

    def feed(self, piece: bytes) -> None:
        position, size = 0, len(piece)
        while position < size and not self.ended:
            if self._in_string:
                position = self._string_part(piece, position)
                continue
            match = _TOKENS.search(piece, position)
            end = size if match is None else match.start()
            self._gap(piece, position, end)
            if match is None:
                break
            position = end + 1
            self._token(piece[end], self._base + end)
        self._base += size

    def _utf8(self, piece: bytes, *, final: bool) -> None:
        try:
            self._decoder.decode(piece, final=final)
        except UnicodeDecodeError:
            raise NotPassable("bytes that are not UTF-8") from None

    def _proven_from(self, offset: int) -> tuple[int, int] | None:
        """The first proven range that does not end at or before `offset`."""
        proven = self._proven
        while self._next < len(proven) and proven[self._next][1] <= offset:
            self._next += 1
        return proven[self._next] if self._next < len(proven) else None

    def _string_part(self, piece: bytes, position: int) -> int:
        """Go through the string from `position`: to its end, or to the piece's end; where the walk goes on."""
        size, base = len(piece), self._base
        while True:
            if self._escaping:  # the last piece ended on the backslash of an escape: its next byte is escaped
                position, self._escaping = position + 1, False
            ahead = self._proven_from(base + position)
            if ahead is not None and ahead[0] <= base + position:  # read strictly already: passed over
                if ahead[1] >= base + size:
                    self.jump_to = ahead[1]
                    self._capture = None if self._capture is None else bytearray(_KEY_BYTES + 1)  # long: no key
                    return size
                position = ahead[1] - base
                continue
            limit = size if ahead is None else min(size, ahead[0] - base)
            end = _STRING_BODY.match(piece, position, limit).end()  # type: ignore[union-attr]  # always matches
            if _CONTROL.search(piece, position, end):
                raise NotPassable("a control character in a string")
            if not piece.isascii():
                self._utf8(piece[position:end], final=False)
            if self._capture is not None and len(self._capture) <= _KEY_BYTES:
                self._capture += piece[position : min(end, position + _KEY_BYTES + 1)]
            if end == limit and limit < size:  # a proven range begins: go on past it
                position = end
                continue
            if end == size or piece[end] == 0x5C:  # the string goes on in the next piece
                self._escaping = end < size
                return size
            break
        self._in_string = False
        captured, self._capture = self._capture, None
        text = bytes(captured) if captured is not None and len(captured) <= _KEY_BYTES else None
        if self._after_item_type:
            self._item_type = text.decode("utf-8") if text is not None else None
            self._after_item_type = False
        elif self._depth in (1, 2, 4):
            self._string = text if text is not None else b""
        return end + 1

    def _gap(self, piece: bytes, start: int, end: int) -> None:
        """What lies between two tokens outside strings: space, numbers, `true`, `false`, `null`."""
        carry = self._digits if start == 0 else 0
        self._digits = 0
        if start == end:
            return
        gap = piece[start:end]
        if _NEVER.search(gap) or not gap.isascii():
            raise NotPassable("a control character" if gap.isascii() else "bytes that are not JSON")
        if b"N" in gap or b"I" in gap:
            raise NotPassable("NaN or Infinity")
        leading = _LEADING_DIGITS.match(gap).end()  # type: ignore[union-attr]  # always matches
        if carry + leading >= _LONG_NUMBER or _LONG_RUN.search(gap):
            raise NotPassable("a number of 1 000 digits")
        if end == len(piece):
            trailing = len(_TRAILING_DIGITS.search(gap).group())  # type: ignore[union-attr]  # always matches
            self._digits = trailing + (carry if trailing == len(gap) else 0)
        value = gap.strip(_SPACE)
        if not value:
            return
        self._string = None
        if self._depth == 3 and self._content_start >= 0 and self._content_end < 0:
            raise NotPassable("a content item that is not an object")
        if self._key is not None:  # a scalar value: the key is done with
            self._member_value(value[:1], self._key)
            self._key = None

    def _token(self, byte: int, at: int) -> None:
        if byte == 0x22:  # "
            self._in_string = True
            key, self._key = self._key, None
            if key is not None:
                self._member_value(b'"', key)
            if self._depth == 2 and self._start >= 0:
                self._empty_result = False
            elif self._depth == 3 and self._content_start >= 0 and self._content_end < 0:
                raise NotPassable("a content item that is not an object")
            self._after_item_type = key == b"type" and self._depth == 4 and self._item_start >= 0
            self._capture = bytearray() if self._after_item_type or self._depth in (1, 2, 4) else None
            return
        if byte == 0x3A:  # :
            self._key, self._key_depth, self._string = self._string, self._depth, None
            if self._depth == 2 and self._start >= 0 and self._key:
                self._members.add(self._key.decode("utf-8", "replace"))
            return
        self._string = None
        if byte == 0x2C:  # ,
            self._key = None
            return
        if byte in b"{[":
            self._open(byte, at)
        else:
            self._close(byte, at)

    def _member_value(self, first: bytes, key: bytes) -> None:
        """A member of the result that a strict reader checks: `content` an array, `structuredContent` an object."""
        if self._key_depth != 2 or self._start < 0:
            return
        if key == b"content" and first != b"[":
            raise NotPassable("content that is not an array")
        if key == b"structuredContent" and first not in (b"{", b"n"):
            raise NotPassable("structuredContent that is not an object")

    def _open(self, byte: int, at: int) -> None:
        named, self._key = (self._key if self._key_depth == self._depth else None), None
        if named is not None:
            self._member_value(bytes([byte]), named)
        if self._depth == 3 and self._content_start >= 0 and self._content_end < 0:
            if byte != 0x7B:
                raise NotPassable("a content item that is not an object")
            self._item_start, self._item_type, self._empty_content = at, None, False
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise NotPassable(f"nested more than {MAX_DEPTH} deep")
        if self._depth == 2 and self._start < 0 and named == b"result" and byte == 0x7B:
            self._start, self._empty_result = at, True
        elif self._depth == 3 and self._start >= 0 and self._content_start < 0 and named == b"content":
            self._content_start, self._empty_content = at, True

    def _close(self, byte: int, at: int) -> None:
        self._key = None
        self._depth -= 1
        if self._depth == 3 and self._item_start >= 0:
            self._items.append(ItemSpan(self._item_start, at + 1, self._item_type))
            self._item_start = -1
        elif self._depth == 2 and self._content_start >= 0 and self._content_end < 0 and byte == 0x5D:
            self._content_end = at
        elif self._depth == 1 and self._start >= 0:
            self._found = ResultSpans(
                start=self._start,
                end=at + 1,
                content_end=self._content_end if self._content_end >= 0 else None,
                content_empty=self._empty_content,
                result_empty=self._empty_result,
                items=self._items,
                members=frozenset(self._members),
            )
            self.ended = True
        elif self._depth < 0:
            self.ended = True
