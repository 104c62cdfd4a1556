"""What the status API and the history keep of a call: metadata, with errors and arguments capped.

A failed call's error can be its whole output, and arguments can carry secrets or whole documents; both
are cut to a short head with a note of the full size, one way for the history, `/v1/*` and the live events.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ARGUMENT_BYTES",
    "ERROR_BYTES",
    "TEXT_BYTES",
    "arguments_column",
    "arguments_value",
    "cap_arguments_text",
    "cap_text",
    "error_summary",
]

ERROR_BYTES = 2048
"""An error is kept as its first 2 KB and a note of its full size."""
ARGUMENT_BYTES = 4096
"""Arguments are kept whole up to 4 KB of JSON; longer ones as their first 4 KB, marked as cut."""
TEXT_BYTES = 2048
"""Other free text a call carries (progress messages, log details)."""
NOTE_ROOM = 80
"""Room for the note a cut value ends with; a value within its cap plus this was cut already."""


def _head(text: str, limit: int) -> tuple[str, int]:
    """`text` cut to at most `limit` UTF-8 bytes (on a character boundary), and its full size in bytes."""
    if len(text) * 4 <= limit:  # cheap: no character takes more than 4 bytes
        return text, -1
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, len(data)
    return data[:limit].decode("utf-8", "ignore"), len(data)


def _sqlite_safe(text: str) -> str:
    """Text SQLite can store: lone surrogates (from undecodable bytes) become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def error_summary(error: str | None) -> str | None:
    """The first 2 KB of an error, with a note of its full size when it was longer."""
    return cap_text(error, ERROR_BYTES, "error")


def cap_text(text: str | None, limit: int = TEXT_BYTES, what: str = "text") -> str | None:
    if text is None:
        return None
    head, size = _head(text, limit)
    if head is text:
        return _sqlite_safe(text)
    return f"{_sqlite_safe(head)}… [{what} cut: {size} bytes in full]"


def cap_arguments_text(text: str) -> str:
    """Arguments JSON as the history column keeps it: whole up to 4 KB, else a JSON string of its head and a note."""
    head, size = _head(text, ARGUMENT_BYTES)
    if head is text:
        return _sqlite_safe(text)
    return json.dumps(f"{head}… [arguments cut: {size} bytes in full]", ensure_ascii=False)


def arguments_column(arguments: dict[str, Any], *, store: bool) -> str | None:
    """The history's `arguments` column: None when arguments are not stored (`settings.history.storeArguments`)."""
    if not store:
        return None
    return cap_arguments_text(json.dumps(arguments, ensure_ascii=False))


def arguments_value(arguments: dict[str, Any], *, store: bool) -> Any:
    """What the API shows as `arguments`: the object, a string when cut (its head and a note), or None."""
    if not store:
        return None
    text = json.dumps(arguments, ensure_ascii=False)
    if len(text) * 4 <= ARGUMENT_BYTES:
        return arguments
    column = cap_arguments_text(text)
    return arguments if column is text else json.loads(column)
