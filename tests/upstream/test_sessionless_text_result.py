"""A plain text result of the sessionless era is written from the SDK's shaping of an empty one, texts put in:
the same bytes as the SDK's runner shaping the result itself, over stdio and HTTP."""

from __future__ import annotations

from typing import Literal

import mcp_types as types
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.lowlevel.server import Server

from server.upstream.sessionless import SessionlessWire

SERVER: Server[None] = Server("claimcheck", version="9.9")
ANY_TEXT = st.text(alphabet=st.characters(blacklist_categories=()), max_size=40)  # lone surrogates too


@settings(max_examples=150)
@given(
    texts=st.lists(ANY_TEXT, max_size=4),
    is_error_sent=st.booleans(),
    ident=st.one_of(st.integers(min_value=-(2**53), max_value=2**53), st.text(max_size=8)),
    framing=st.sampled_from(["line", "body"]),
)
def test_a_text_result_is_written_as_the_sdks_runner_writes_it(
    texts: list[str], is_error_sent: bool, ident: int | str, framing: Literal["line", "body"]
) -> None:
    wire = SessionlessWire(SERVER, framing)
    raw: dict[str, object] = {"content": [{"type": "text", "text": text} for text in texts]}
    if is_error_sent:
        raw["isError"] = False
    model = types.CallToolResult.model_validate(raw, by_name=False)

    fast = wire.text_result(ident, texts, is_error_sent, "2026-07-28")

    assert fast is not None
    assert fast == wire.result(ident, model, "2026-07-28")
