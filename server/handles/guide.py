"""What the messages about a stored output suggest (`server.handles.messages.Guide`), read from its first bytes."""

from __future__ import annotations

import re
from collections import Counter

import anyio

from server.handles.calls import Call
from server.handles.json_shape import head_shape
from server.handles.messages import Guide
from server.handles.sessions import Session
from server.handles.store import StoreError

__all__ = ["HEAD_BYTES", "guide_for", "guide_from_head"]

HEAD_BYTES = 64 * 1024
"""How much of an output's start is read for its examples: never the whole output."""
_WORD = re.compile(r"[A-Za-z][A-Za-z_]{3,30}")
_NOT_EXAMPLES = frozenset({"true", "false", "null", "claimcheck"})


async def guide_for(call: Call, session: Session, *, llm: bool) -> Guide:
    """The guide for `call`'s stored output; without examples when it cannot be read."""
    if not call.stored:
        return Guide(llm=llm)

    def head() -> bytes:
        with session.store.open_output(call.handle) as opened:
            return opened.read(0, HEAD_BYTES)

    try:
        data = await anyio.to_thread.run_sync(head)
    except (StoreError, OSError):
        return Guide(llm=llm)
    return guide_from_head(data, llm=llm)


def guide_from_head(data: bytes, *, llm: bool) -> Guide:
    text = data.decode("utf-8", "ignore")
    counts = Counter(w for w in _WORD.findall(text) if w.lower() not in _NOT_EXAMPLES)
    word = counts.most_common(1)[0][0] if counts else None
    shape = head_shape(data)
    if shape is None:
        return Guide(llm=llm, word=word)
    top, keys, array_key = shape
    return Guide(llm=llm, json_top=top, keys=tuple(keys), array_key=array_key, word=word)
