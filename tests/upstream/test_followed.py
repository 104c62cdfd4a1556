"""A pass-through's answer written while its output is still being spooled (`write_followed`): the same bytes as
the answer written from the whole file, and, when the output breaks off, a line that ends validly as an error."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest

from server.downstream.spool import CUT_MARKER, MessageSpool, SpoolPolicy
from server.downstream.spooled import FOLLOW_BUFFER, GrowingOutput, SpooledOutputs
from server.upstream.line_writer import LineWriter
from server.upstream.plain_call import line
from server.upstream.streamed import PIECE_BYTES, Followed, write_followed, write_spooled

pytestmark = pytest.mark.anyio

PLACEHOLDER = "0f" * 16
NOTE = "[claimcheck] the error above came from the tool"
TEXT = "".join(f'line {n:07d} "quoted" \\ back é 😀 \u2028 tab\t{"x" * (n % 50)}\n' for n in range(120_000))
ASCII_TEXT = "".join(f'line {n:07d} "quoted" \\ back tab\t{"x" * (n % 50)}\n' for n in range(150_000))
PIECE = 200_003  # cuts characters and escapes between pieces


def lines(ident: int) -> tuple[bytes, bytes, bytes]:
    """The answer's three possible lines, shaped as the fast path shapes them (plain, the tool's error, broken)."""
    text = {"type": "text", "text": PLACEHOLDER}
    result = {"content": [text]}
    error = {"content": [text, {"type": "text", "text": NOTE}], "isError": True}
    broken = {"content": [text], "isError": True}
    plain, errored, ended = (line({"jsonrpc": "2.0", "id": ident, "result": r}) for r in (result, error, broken))
    return plain, errored, ended


def message(*, is_error: bool = False, ascii_only: bool = False, text: str = TEXT) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": is_error}
    return json.dumps({"jsonrpc": "2.0", "id": 7, "result": result}, ensure_ascii=ascii_only).encode()


def spooler(directory: Path, outputs: SpooledOutputs, max_output_bytes: int = 1 << 30) -> MessageSpool:
    policy = SpoolPolicy(directory, max_output_bytes, outputs, raw_keep=4096)  # followed after 4 KiB
    return MessageSpool(policy, "test")


async def start_following(spool: MessageSpool, data: bytes) -> tuple[GrowingOutput, int]:
    """Feed `data` until its answer can be followed; the output, and how much of `data` was fed."""
    fed = 0
    while spool.followable_id() is None:
        assert fed < len(data) // 4, "the result should be followable once its content began"
        await spool.feed(data[fed : fed + PIECE])
        fed += PIECE
    assert spool.followable_id() == 7
    return spool.follow(), fed


@asynccontextmanager
async def writer_to(path: Path) -> AsyncIterator[LineWriter]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        yield LineWriter(fd)
    finally:
        os.close(fd)


async def followed_line(directory: Path, data: bytes, *, stall_s: float = 60, **policy: Any) -> bytes:
    """The answer written while `data` is fed to a spool piece by piece."""
    spool = spooler(directory, SpooledOutputs(), **policy)
    growing, fed = await start_following(spool, data)
    out = directory / "followed.jsonl"
    async with writer_to(out) as writer, anyio.create_task_group() as tg:
        tg.start_soon(write_followed, writer, Followed.of(PLACEHOLDER, lines(7), growing, stall_s))
        for start in range(fed, len(data), PIECE):
            await spool.feed(data[start : start + PIECE])
            await anyio.lowlevel.checkpoint()
        assert await spool.finish() is None  # the request has its answer: nothing goes to the session
    return out.read_bytes()


async def whole_line(directory: Path, data: bytes, **policy: Any) -> bytes:
    """The answer written from the whole file, as before (`write_spooled`)."""
    outputs = SpooledOutputs()
    spool = spooler(directory, outputs, **policy)
    for start in range(0, len(data), PIECE):
        await spool.feed(data[start : start + PIECE])
    answer = await spool.finish()
    assert isinstance(answer, bytes)
    spooled = outputs.claim(types.CallToolResult.model_validate(json.loads(answer)["result"]))
    assert spooled is not None and spooled.path is not None
    out = directory / "whole.jsonl"
    async with writer_to(out) as writer:
        assert await write_spooled(writer, 7, lines(7)[1 if spooled.is_error else 0], PLACEHOLDER, spooled)
    return out.read_bytes()


def spool_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.startswith("spool-"))


@pytest.mark.parametrize(
    ("is_error", "cut", "ascii_only", "text"),
    [
        (False, False, False, TEXT),
        (True, False, False, TEXT),
        (False, True, False, TEXT),
        (False, False, True, TEXT),
        (False, True, True, TEXT),
        (False, False, False, ASCII_TEXT),
        (False, True, False, ASCII_TEXT),
    ],
    ids=["text", "error", "cut", "escaped", "escaped-cut", "ascii", "ascii-cut"],
)
async def test_an_answer_written_as_its_output_grows_is_the_answer_written_from_the_whole_file(
    tmp_path: Path, is_error: bool, cut: bool, ascii_only: bool, text: str
) -> None:
    """The text after the first piece is passed on as the server escaped it: the same line as the whole file's
    where the server escapes as claimcheck does, and the same text where it escapes otherwise (`\\u00e9`); ASCII
    text as well, cut at the same byte."""
    data = message(is_error=is_error, ascii_only=ascii_only, text=text)
    policy = {"max_output_bytes": 3 << 20} if cut else {}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with anyio.fail_after(60):
        followed = await followed_line(tmp_path / "a", data, **policy)
        whole = await whole_line(tmp_path / "b", data, **policy)
    assert json.loads(followed) == json.loads(whole)
    if ascii_only:  # the server's own escapes, passed on as they came: not decoded and escaped again
        assert followed.count(b"\\u00e9") > 1000 and whole.count(b"\\u00e9") == 0
    else:
        assert followed == whole
    result = json.loads(followed)["result"]
    assert result.get("isError", False) is is_error
    if cut:
        assert result["content"][0]["text"].endswith(CUT_MARKER.format(limit=3 << 20, total=len(text.encode())))
        assert result["content"][0]["text"].startswith(text.encode()[: 3 << 20].decode("utf-8", "ignore"))
    else:
        assert result["content"][0]["text"] == text
    assert spool_files(tmp_path / "a") == [], "the followed output's files are removed once it was written"


async def broken_off(directory: Path, end: str) -> dict[str, Any]:
    """The answer written while a message is fed that breaks off (`end`: "broken" JSON, or "gone")."""
    spool = spooler(directory, SpooledOutputs())
    data = message()
    growing, fed = await start_following(spool, data)
    out = directory / "followed.jsonl"
    with anyio.fail_after(60):
        async with writer_to(out) as writer, anyio.create_task_group() as tg:
            tg.start_soon(write_followed, writer, Followed.of(PLACEHOLDER, lines(7), growing, 60))
            await spool.feed(data[fed : len(data) // 2])
            if end == "broken":
                await spool.feed(b"\n}")
                assert isinstance(await spool.finish(), ValueError)
            else:
                await spool.abort()
    written = out.read_bytes()
    assert written.endswith(b"\n") and written.count(b"\n") == 1
    answer: dict[str, Any] = json.loads(written)
    return answer


@pytest.mark.parametrize(
    ("end", "why"),
    [("broken", "the server's answer broke off after"), ("gone", "the server's connection closed after")],
)
async def test_an_output_that_breaks_off_while_it_is_written_ends_the_line_as_an_error(
    tmp_path: Path, end: str, why: str
) -> None:
    result = (await broken_off(tmp_path, end))["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    body = text[: text.rindex("\n[claimcheck] ")]
    assert TEXT.startswith(body.removesuffix("\n}"))  # what broke the JSON may be passed on: it was in the string
    assert text[text.rindex("\n[claimcheck] ") :].startswith(f"\n[claimcheck] {why}")
    assert spool_files(tmp_path) == []


async def test_a_followed_answer_interrupted_by_its_request_ends_at_once_and_its_files_go_when_the_output_ends(
    tmp_path: Path,
) -> None:
    spool = spooler(tmp_path, SpooledOutputs())
    data = message()
    growing, fed = await start_following(spool, data)
    out = tmp_path / "followed.jsonl"
    with anyio.fail_after(60):
        async with writer_to(out) as writer:
            growing.interrupt()  # the client cancelled: the line ends, though the output has not
            assert await write_followed(writer, Followed.of(PLACEHOLDER, lines(7), growing, 60))
        for start in range(fed, len(data), PIECE):
            await spool.feed(data[start : start + PIECE])
        assert await spool.finish() is None
    result = json.loads(out.read_bytes())["result"]
    assert result["isError"] is True
    cancelled = "\n[claimcheck] the request was cancelled while its output was passed on"
    assert result["content"][0]["text"].endswith(cancelled)
    assert spool_files(tmp_path) == []


async def test_a_followed_answer_whose_output_stops_growing_for_its_stall_limit_ends_as_an_error(
    tmp_path: Path,
) -> None:
    spool = spooler(tmp_path, SpooledOutputs())
    data = message()
    growing, _ = await start_following(spool, data)
    out = tmp_path / "followed.jsonl"
    with anyio.fail_after(60):
        async with writer_to(out) as writer:
            assert await write_followed(writer, Followed.of(PLACEHOLDER, lines(7), growing, 0.05))
        await spool.abort()
    result = json.loads(out.read_bytes())["result"]
    assert result["isError"] is True
    stalled = "\n[claimcheck] the server wrote nothing more of its answer for 0.05 s"
    assert result["content"][0]["text"].endswith(stalled)


@pytest.mark.parametrize("split", [b"\\\\", b"\\u00e9", "é".encode(), b"\\ud83d\\ude00"])
async def test_an_answer_that_breaks_off_where_a_piece_cut_an_escape_or_a_character_ends_on_a_whole_one(
    tmp_path: Path, split: bytes
) -> None:
    """The escaped text is passed on in the pieces it was handed over in, which may end inside an escape or a
    character: the note of why it broke off follows the last whole one, never half of one (which would change
    what it says)."""
    growing = GrowingOutput(tmp_path / "spool.out", prefix=0)
    growing.put(b"a" * (PIECE_BYTES - 1) + split[:1])  # and the rest never comes
    out = tmp_path / "followed.jsonl"
    with anyio.fail_after(60):
        async with writer_to(out) as writer:
            assert await write_followed(writer, Followed.of(PLACEHOLDER, lines(7), growing, 0.05))
    result = json.loads(out.read_bytes().decode("utf-8"))["result"]
    stalled = "\n[claimcheck] the server wrote nothing more of its answer for 0.05 s"
    assert result["content"][0]["text"] == "a" * (PIECE_BYTES - 1) + stalled


async def test_a_followed_output_is_handed_over_escaped_its_file_keeps_only_the_start_and_memory_is_bounded(
    tmp_path: Path,
) -> None:
    """Once followed, the rest of the output goes to its reader in memory, escaped, never to disk; while the
    reader does not take it, the spool waits with at most `FOLLOW_BUFFER` bytes (and one piece) waiting."""
    spool = spooler(tmp_path, SpooledOutputs())
    data = message(ascii_only=True)  # escaped otherwise than claimcheck escapes: what is taken is the server's
    growing, fed = await start_following(spool, data)
    taken: list[bytes] = []
    most_waiting = 0

    async def feed_all() -> None:
        for start in range(fed, len(data), PIECE):
            await spool.feed(data[start : start + PIECE])
        assert await spool.finish() is None

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed_all)
            while not (growing.ended and not growing.waiting):
                await growing.changed()
                most_waiting = max(most_waiting, growing.waiting)
                assert growing.waiting <= FOLLOW_BUFFER + PIECE  # what one piece of the message put past the bound
                taken.append(growing.take(1 << 30))
    assert growing.broken is None and most_waiting > FOLLOW_BUFFER
    assert growing.path.stat().st_size == growing.written == growing.prefix < len(TEXT.encode()) // 4
    rest = b"".join(taken)
    assert rest.count(b"\\u00e9") > 1000  # as the server wrote it
    assert TEXT.encode()[: growing.prefix].decode() + json.loads(b'"' + rest + b'"') == TEXT
    assert [name for name in spool_files(tmp_path) if not name.endswith(".out")] == []
    growing.release()
    assert spool_files(tmp_path) == []
