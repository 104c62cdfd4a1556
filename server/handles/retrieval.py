"""The non-LLM ways of reading a stored output besides truncate: raw and slice (DESIGN §5)."""

from __future__ import annotations

from dataclasses import dataclass

from extraction import exceeds

__all__ = ["RetrievalError", "SliceRequest", "raw", "slice_text"]

_USE_INSTEAD = 'Use mode "auto" with `extract`, mode "slice", mode "truncate", or Read/Grep with the handle as `file`.'


class RetrievalError(Exception):
    """The request cannot be answered from this output; the message says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class SliceRequest:
    start: int | None = None
    length: int | None = None
    anchor: str | None = None
    window: int = 1000
    match_index: int = 0


def raw(text: str, *, size: str, threshold: int) -> str:
    """The whole output, when it is under the token threshold."""
    if exceeds(text, threshold):
        raise RetrievalError(
            f"The output is too large for raw ({size}; the threshold is {threshold} tokens). {_USE_INSTEAD}"
        )
    return text


def slice_text(text: str, request: SliceRequest, *, threshold: int) -> str:
    """Characters `start`..`start+length`, or a window centred on the `match_index`-th `anchor`."""
    if request.anchor is not None:
        if request.anchor == "":
            raise RetrievalError("`anchor` must not be empty.")
        if request.window < 0 or request.match_index < 0:
            raise RetrievalError("`window` and `match_index` must not be negative.")
        position, found = -1, 0
        while found <= request.match_index:
            position = text.find(request.anchor, position + 1)
            if position < 0:
                break
            found += 1
        if position < 0:
            seen = f" (it occurs {found} time{'s' if found != 1 else ''}; match_index is 0-based)" if found else ""
            raise RetrievalError(f"Anchor not found in content{seen}.")
        start = max(0, position - request.window // 2)
        end = min(len(text), position + len(request.anchor) + request.window // 2)
    else:
        if request.start is None or request.length is None:
            raise RetrievalError("slice needs either `anchor` or both `start` and `length` (in characters).")
        if request.start < 0 or request.length < 0:
            raise RetrievalError("`start` and `length` must not be negative.")
        if request.start >= len(text) and not (request.start == 0 and not text):
            raise RetrievalError(f"`start` {request.start} is past the end of the output ({len(text)} characters).")
        start, end = request.start, min(len(text), request.start + request.length)
    piece = text[start:end]
    if exceeds(piece, threshold):
        raise RetrievalError(
            f"The slice of {end - start} characters is over the {threshold}-token threshold; ask for a shorter one."
        )
    return f"[characters {start}-{end} of {len(text)}]\n{piece}"
