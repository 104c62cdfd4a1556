"""fs_sandbox: whatever name a model sends, the answer is an error or a regular file under the root."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fs_sandbox import NotAFile, NotFound, PathRefused, PatternError, PatternTimeout, Sandbox, SandboxError, confine

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A root with every kind of entry a hostile name could reach for, and a secret outside it."""
    base = tmp_path_factory.mktemp("sandbox")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("top secret\n", encoding="utf-8")
    (root / "a.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("inside sub\n", encoding="utf-8")
    (root / "link-in").symlink_to(root / "a.txt")
    (root / "link-out").symlink_to(outside / "secret")
    (root / "link-dir").symlink_to(root / "sub")
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    (root / "broken").symlink_to(root / "nothing-here")
    os.mkfifo(root / "fifo")
    return root, outside


NAMES = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.sampled_from(
            ["a.txt", "sub", "b.txt", "..", ".", "", "link-in", "link-out", "link-dir", "loop-a", "broken", "fifo",
             "outside", "secret", "C:", "\\", "\x00", "/"]
        ),
        max_size=6,
    ).map("/".join),
)  # fmt: skip


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
def test_confine_gives_an_error_or_a_regular_file_inside_the_root(tree: tuple[Path, Path], name: str) -> None:
    root, _ = tree
    try:
        path = confine(root, name)
    except SandboxError:
        return
    real_root = os.path.realpath(root)
    assert os.path.commonpath([real_root, os.path.realpath(path)]) == real_root
    assert path.is_file() and not path.is_symlink()


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(name=NAMES)
def test_read_gives_an_error_or_the_lines_of_a_file_under_the_root(tree: tuple[Path, Path], name: str) -> None:
    root, _ = tree
    allowed = {"alpha", "beta", "inside sub"}

    async def read() -> set[str] | None:
        try:
            result = await Sandbox(root).read(name)
        except SandboxError:
            return None
        return {text for _, text in result.lines}

    lines = anyio.run(read)
    assert lines is None or lines <= allowed


@pytest.mark.parametrize(
    ("name", "error", "why"),
    [
        ("/etc/passwd", PathRefused, "absolute"),
        ("\\etc\\passwd", PathRefused, "absolute"),
        ("C:\\x", PathRefused, "absolute"),
        ("../outside/secret", PathRefused, "'..'"),
        ("sub/../../outside/secret", PathRefused, "'..'"),
        ("a.txt\x00", PathRefused, "NUL"),
        ("", PathRefused, "empty"),
        ("link-out", PathRefused, "outside the sandbox"),
        ("loop-a", NotAFile, "symlink loop"),
        ("broken", NotFound, "no file"),
        ("fifo", NotAFile, "not a regular file"),
        ("sub", NotAFile, "not a regular file"),
        ("missing.txt", NotFound, "no file"),
    ],
)
def test_hostile_and_special_names_are_refused_with_a_reason(
    tree: tuple[Path, Path], name: str, error: type[SandboxError], why: str
) -> None:
    root, _ = tree
    with pytest.raises(error, match=why):
        confine(root, name)


def test_links_to_files_inside_and_backslash_paths_work(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    assert confine(root, "link-in") == (root / "a.txt").resolve()
    assert confine(root, "sub\\b.txt") == (root / "sub" / "b.txt").resolve()
    assert confine(root, "link-dir/b.txt") == (root / "sub" / "b.txt").resolve()


async def test_read_numbers_lines_and_reads_from_the_head_or_the_tail(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("".join(f"line {i}\n" for i in range(1, 11)), encoding="utf-8")
    sandbox = Sandbox(tmp_path)

    head = await sandbox.read("f", start=2, lines=2)
    tail = await sandbox.read("f", lines=3, from_end=True)
    past = await sandbox.read("f", start=50, lines=5)

    assert head.lines == ((3, "line 3"), (4, "line 4")) and head.total_lines == 10
    assert tail.lines == ((8, "line 8"), (9, "line 9"), (10, "line 10"))
    assert past.lines == () and past.total_lines == 10


async def test_invalid_utf8_is_shown_and_carriage_returns_are_stripped(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"ok\r\nbad \xff\xfe byte\rlast")
    (tmp_path / "empty").write_bytes(b"")
    sandbox = Sandbox(tmp_path)

    result = await sandbox.read("f")
    empty = await sandbox.read("empty")

    assert result.lines == ((1, "ok"), (2, "bad \ufffd\ufffd byte"), (3, "last"))
    assert empty.lines == () and empty.total_lines == 0


async def test_grep_is_case_insensitive_by_default_marks_matches_and_merges_context(tmp_path: Path) -> None:
    text = "".join(f"line {i}{' ERROR here' if i in (5, 7, 20) else ''}\n" for i in range(1, 31))
    (tmp_path / "f").write_text(text, encoding="utf-8")
    sandbox = Sandbox(tmp_path)
    try:
        found = await sandbox.grep("f", "error", before=1, after=1)
        strict = await sandbox.grep("f", "error", case_sensitive=True)
        capped = await sandbox.grep("f", "ERROR", max_matches=2)
        spanning = await sandbox.grep("f", r"line 5 ERROR here\nline 6")
    finally:
        await sandbox.aclose()

    assert found.matches == 3 and not found.more
    first, second = found.blocks
    assert [(line.number, line.is_match) for line in first] == [
        (4, False),
        (5, True),
        (6, False),
        (7, True),
        (8, False),
    ]
    assert [(line.number, line.is_match) for line in second] == [(19, False), (20, True), (21, False)]
    assert strict.matches == 0
    assert capped.matches == 2 and capped.more
    assert spanning.matches == 1 and spanning.blocks[0][3].number == 5


async def test_a_bad_or_oversized_pattern_is_a_pattern_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x\n", encoding="utf-8")
    sandbox = Sandbox(tmp_path)
    try:
        with pytest.raises(PatternError, match="invalid regular expression"):
            await sandbox.grep("f", "(unclosed")
        with pytest.raises(PatternError, match="longer than 1000"):
            await sandbox.grep("f", "a" * 1001)
    finally:
        await sandbox.aclose()


async def test_a_catastrophic_pattern_is_stopped_while_other_work_goes_on(tmp_path: Path) -> None:
    (tmp_path / "evil").write_text("a" * 50_000 + "b", encoding="utf-8")
    (tmp_path / "f").write_text("fine\n", encoding="utf-8")
    sandbox = Sandbox(tmp_path, timeout=0.5)
    meanwhile: list[str] = []

    async def other_work() -> None:
        result = await sandbox.read("f")
        meanwhile.append(result.lines[0][1])

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(other_work)
                with pytest.raises(PatternTimeout, match=r"took longer than 0\.5 s"):
                    await sandbox.grep("evil", "(a+)+$")
            after = await sandbox.grep("f", "fine")
    finally:
        await sandbox.aclose()
    assert meanwhile == ["fine"]
    assert after.matches == 1  # the killed worker was replaced


async def test_closing_stops_the_idle_workers(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x\n", encoding="utf-8")
    sandbox = Sandbox(tmp_path)
    with anyio.fail_after(10):
        await sandbox.grep("f", "x")
        (worker,) = sandbox._idle
        await sandbox.aclose()
    assert worker.process.returncode is not None
