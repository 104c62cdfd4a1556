"""A file stored without a line index (an older output, or one written by other means) gets one on its first
Read or Grep, kept beside it in the same format, so the next Read seeks instead of counting from the start."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from fs_sandbox import INDEX_SUFFIX, IndexBuilder, Sandbox, _index, open_file, sandbox
from fs_sandbox.paths import keep_index

pytestmark = pytest.mark.anyio


def log(lines: int) -> bytes:
    return "".join(f"line {i} é{' NEEDLE' if i % 997 == 0 else ''}\r\n" for i in range(1, lines + 1)).encode()


def expected_index(data: bytes) -> bytes:
    builder = IndexBuilder()
    builder.feed(data)
    return builder.finish()


@pytest.fixture
def small_spacing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_index, "SPACING", 4096)  # entries every 4 KiB: a 300 KiB file has many
    monkeypatch.setattr(sandbox, "INDEX_FROM_BYTES", 64 << 10)


async def test_the_first_read_keeps_an_index_beside_the_file_and_the_second_read_uses_it(
    tmp_path: Path, small_spacing: None
) -> None:
    data = log(20_000)
    (tmp_path / "out").write_bytes(data)
    box = Sandbox(tmp_path)
    try:
        with anyio.fail_after(120):
            first = await box.read("out", start=15_000, lines=3)
        kept = tmp_path / ("out" + INDEX_SUFFIX)
        assert kept.read_bytes() == expected_index(data)
        assert oct(kept.stat().st_mode & 0o777) == "0o600"
        assert sorted(os.listdir(tmp_path)) == ["out", "out" + INDEX_SUFFIX]  # no temporary file left behind
        with open_file(tmp_path, "out") as opened:
            assert opened.index is not None and opened.index.lines == 20_000
            with anyio.fail_after(120):
                second = await box.read(opened, start=15_000, lines=3)
    finally:
        await box.aclose()
    assert first == second
    assert first.lines == tuple((n, f"line {n} é") for n in range(15_001, 15_004))
    assert first.total_lines == 20_000


async def test_the_first_grep_keeps_one_too_and_finds_the_same_lines(tmp_path: Path, small_spacing: None) -> None:
    data = log(20_000).replace(b"\r\n", b"\n")  # no CR: searched mapped, numbered from the index
    (tmp_path / "out").write_bytes(data)
    box = Sandbox(tmp_path, timeout=60)
    try:
        with anyio.fail_after(120):
            found = await box.grep("out", "needle", before=0, after=0, max_matches=100)
        assert (tmp_path / ("out" + INDEX_SUFFIX)).read_bytes() == expected_index(data)
        with anyio.fail_after(120):
            again = await box.grep("out", "needle", before=0, after=0, max_matches=100)
    finally:
        await box.aclose()
    numbers = [line.number for block in found.blocks for line in block]
    assert numbers == [n for n in range(1, 20_001) if n % 997 == 0]
    assert again == found


async def test_small_files_get_no_index(tmp_path: Path) -> None:
    (tmp_path / "out").write_bytes(log(100))
    box = Sandbox(tmp_path)
    try:
        assert (await box.read("out", start=50, lines=1)).lines == ((51, "line 51 é"),)
    finally:
        await box.aclose()
    assert os.listdir(tmp_path) == ["out"]


def test_where_the_index_cannot_be_kept_it_still_serves_in_memory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "out").write_bytes(log(2000))
    with open_file(tmp_path / "d", "out") as opened:
        (tmp_path / "d").rename(
            tmp_path / "moved"
        )  # the root it was opened under is gone (and root may write anywhere)
        index = keep_index(opened)
        assert index is not None and opened.index is index and index.lines == 2000
    assert os.listdir(tmp_path / "moved") == ["out"]


def test_a_file_replaced_since_it_was_opened_gets_no_index_beside_the_new_one(tmp_path: Path) -> None:
    (tmp_path / "out").write_bytes(log(2000))
    with open_file(tmp_path, "out") as opened:
        (tmp_path / "other").write_bytes(log(3000))
        os.rename(tmp_path / "other", tmp_path / "out")
        index = keep_index(opened)
        assert index is not None and index.lines == 2000  # what `opened` holds
    assert os.listdir(tmp_path) == ["out"]


def test_an_index_link_planted_beside_the_file_is_replaced_not_followed(tmp_path: Path) -> None:
    data = log(2000)
    (tmp_path / "out").write_bytes(data)
    (tmp_path / "elsewhere").write_bytes(b"keep me")
    (tmp_path / ("out" + INDEX_SUFFIX)).symlink_to(tmp_path / "elsewhere")
    with open_file(tmp_path, "out") as opened:
        assert opened.index is None  # a link is not read as the index
        keep_index(opened)
    assert (tmp_path / "elsewhere").read_bytes() == b"keep me"
    kept = tmp_path / ("out" + INDEX_SUFFIX)
    assert not kept.is_symlink() and kept.read_bytes() == expected_index(data)
