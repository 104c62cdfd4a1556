"""fs_sandbox: whatever name a model sends, the answer is an error or a regular file under the root."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fs_sandbox import (
    GrepResult,
    NotAFile,
    NotFound,
    PathRefused,
    PatternError,
    PatternTimeout,
    Sandbox,
    SandboxError,
    confine,
)

pytestmark = pytest.mark.anyio

FIXTURE_EXAMPLES = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A root with every kind of entry a hostile name could reach for, and a secret outside it."""
    base = tmp_path_factory.mktemp("sandbox")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("top secret\n", encoding="utf-8")
    (root / "a.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (root / "C:x").write_text("a file whose name looks like a drive\n", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("inside sub\n", encoding="utf-8")
    (root / "link-in").symlink_to("a.txt")
    (root / "link-out").symlink_to(outside / "secret")
    (root / "link-dir").symlink_to("sub")
    (root / "loop-a").symlink_to("loop-b")
    (root / "loop-b").symlink_to("loop-a")
    (root / "broken").symlink_to("nothing-here")
    os.mkfifo(root / "fifo")
    yield root
    try:  # if a reader ever blocked on the FIFO, let it go so the run can end
        os.close(os.open(root / "fifo", os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def regular_files(root: Path) -> dict[str, tuple[str, ...]]:
    """The lines of every regular file under `root` (links not followed), by real path."""
    found: dict[str, tuple[str, ...]] = {}
    for folder, _, files in os.walk(os.path.realpath(root)):
        for file in files:
            path = os.path.join(folder, file)
            if stat.S_ISREG(os.lstat(path).st_mode):
                found[path] = tuple(Path(path).read_text(encoding="utf-8").splitlines())
    return found


SEGMENTS = st.one_of(
    st.sampled_from(
        ["a.txt", "sub", "b.txt", "..", ".", "", "link-in", "link-out", "link-dir", "loop-a", "loop-b", "broken",
         "fifo", "outside", "secret", "C:", "C:x", "c:", "\x00", "é", "ß", "\u202e", "\uff0e\uff0e"]
    ),
    st.text(max_size=6),
)  # fmt: skip


@st.composite
def path_names(draw: st.DrawFn) -> str:
    """Names built from the root's own entries, `..`, drives, NUL and unicode, joined by either separator."""
    parts = draw(st.lists(SEGMENTS, max_size=6))
    separators = draw(st.lists(st.sampled_from(["/", "\\", "//", "/./"]), min_size=len(parts), max_size=len(parts)))
    lead = draw(st.sampled_from(["", "", "/", "\\", "C:", "c:\\", "./", "\\\\server\\share\\"]))
    name = lead + "".join(part + separator for part, separator in zip(parts, separators, strict=True))
    return name if draw(st.booleans()) else name.rstrip("/\\")


NAMES = st.one_of(st.text(max_size=40), path_names())


@FIXTURE_EXAMPLES
@given(name=NAMES)
def test_confine_gives_an_error_or_a_regular_file_inside_the_root(tree: Path, name: str) -> None:
    try:
        path = confine(tree, name)
    except SandboxError:
        return
    real_root = os.path.realpath(tree)
    assert os.path.commonpath([real_root, os.path.realpath(path)]) == real_root
    assert stat.S_ISREG(os.lstat(path).st_mode)  # the path itself: no link left to follow


@FIXTURE_EXAMPLES
@given(name=NAMES)
async def test_read_gives_an_error_or_the_whole_of_a_file_under_the_root(tree: Path, name: str) -> None:
    try:
        result = await Sandbox(tree).read(name, lines=1000)
    except SandboxError:
        return
    lines = tuple(text for _, text in result.lines)
    assert lines in regular_files(tree).values()
    assert (
        [number for number, _ in result.lines]
        == list(range(1, len(lines) + 1))
        == list(range(1, result.total_lines + 1))
    )


@pytest.mark.parametrize(
    ("name", "error", "why"),
    [
        ("/etc/passwd", PathRefused, "absolute"),
        ("\\etc\\passwd", PathRefused, "absolute"),
        ("C:\\x", PathRefused, "absolute"),
        ("C:x", PathRefused, "absolute"),
        ("../x", PathRefused, "'..'"),
        ("a/../../x", PathRefused, "'..'"),
        ("sub\\..\\..\\outside\\secret", PathRefused, "'..'"),
        ("x\x00y", PathRefused, "NUL"),
        ("", PathRefused, "empty"),
        ("  ", PathRefused, "empty"),
        ("./", PathRefused, "names no file"),
        ("link-out", NotAFile, "is a symbolic link"),
        ("link-in", NotAFile, "is a symbolic link"),
        ("loop-a", NotAFile, "is a symbolic link"),
        ("broken", NotAFile, "is a symbolic link"),
        ("link-dir", NotAFile, "is a symbolic link"),
        ("link-dir/b.txt", PathRefused, "leads through a symbolic link"),
        ("missing.txt", NotFound, "no file"),
        ("sub/missing.txt", NotFound, "no file"),
        ("nowhere/b.txt", NotFound, "no file"),
        ("a.txt/x", NotFound, "cannot be reached"),
        ("fifo", NotAFile, "is a FIFO, not a regular file"),
        ("sub", NotAFile, "is a directory, not a regular file"),
    ],
)
def test_hostile_and_special_names_are_refused_with_a_reason(
    tree: Path, name: str, error: type[SandboxError], why: str
) -> None:
    with pytest.raises(error, match=why):
        confine(tree, name)


def test_a_name_that_cannot_be_encoded_is_refused(tree: Path) -> None:
    with pytest.raises(SandboxError):
        confine(tree, "\ud800")


def test_backslash_and_dot_paths_lead_to_the_file(tree: Path) -> None:
    b_txt = (tree / "sub" / "b.txt").resolve()
    assert confine(tree, "sub\\b.txt") == b_txt
    assert confine(tree, "./sub//b.txt") == b_txt
    assert confine(tree, "a.txt") == (tree / "a.txt").resolve()


async def test_a_fifo_is_refused_without_blocking(tree: Path) -> None:
    sandbox = Sandbox(tree)
    with anyio.fail_after(5):
        with pytest.raises(NotAFile):
            await anyio.to_thread.run_sync(confine, tree, "fifo", abandon_on_cancel=True)
        with pytest.raises(NotAFile):
            await sandbox.read("fifo")
        with pytest.raises(NotAFile):
            await sandbox.grep("fifo", "x")
    await sandbox.aclose()


async def test_read_and_grep_refuse_what_confine_refuses(tree: Path) -> None:
    sandbox = Sandbox(tree)
    with anyio.fail_after(10):
        for name, error in [
            ("link-out", NotAFile),
            ("link-in", NotAFile),
            ("../outside/secret", PathRefused),
            ("link-dir/b.txt", PathRefused),
            ("loop-a", NotAFile),
        ]:
            with pytest.raises(error):
                await sandbox.read(name)
            with pytest.raises(error):
                await sandbox.grep(name, "secret")
    await sandbox.aclose()


# read


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    sandbox = Sandbox(tmp_path)
    yield sandbox
    with anyio.move_on_after(5, shield=True):
        await sandbox.aclose()


async def test_read_numbers_lines_from_one_and_reads_from_the_head_or_the_tail(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("".join(f"line {i}\n" for i in range(1, 11)), encoding="utf-8")

    with anyio.fail_after(5):
        first = await sandbox.read("f", lines=1)
        head = await sandbox.read("f", start=2, lines=2)
        tail = await sandbox.read("f", lines=3, from_end=True)
        before_tail = await sandbox.read("f", start=1, lines=2, from_end=True)
        everything = await sandbox.read("f", lines=100)

    assert first.lines == ((1, "line 1"),) and first.total_lines == 10
    assert head.lines == ((3, "line 3"), (4, "line 4"))
    assert tail.lines == ((8, "line 8"), (9, "line 9"), (10, "line 10"))
    assert before_tail.lines == ((8, "line 8"), (9, "line 9"))
    assert len(everything.lines) == 10 and everything.lines[-1] == (10, "line 10")


async def test_read_past_the_end_gives_no_lines_and_the_true_total(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("one\ntwo\nthree\n", encoding="utf-8")

    with anyio.fail_after(5):
        past = await sandbox.read("f", start=3, lines=5)
        far_past = await sandbox.read("f", start=50, lines=5)
        past_from_end = await sandbox.read("f", start=50, lines=5, from_end=True)

    assert (past.lines, past.total_lines) == ((), 3)
    assert (far_past.lines, far_past.total_lines) == ((), 3)
    assert (past_from_end.lines, past_from_end.total_lines) == ((), 3)


async def test_invalid_utf8_is_shown_as_replacement_characters(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_bytes(b"ok\nbad \xff\xfe byte\ncut \xe2\x82")

    with anyio.fail_after(5):
        result = await sandbox.read("f")

    assert result.lines == ((1, "ok"), (2, "bad \ufffd\ufffd byte"), (3, "cut \ufffd"))


async def test_crlf_and_lone_cr_end_lines_and_are_stripped(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_bytes(b"dos\r\nmac\runix\nlast")

    with anyio.fail_after(5):
        result = await sandbox.read("f")

    assert result.lines == ((1, "dos"), (2, "mac"), (3, "unix"), (4, "last")) and result.total_lines == 4


async def test_an_empty_file_has_no_lines(sandbox: Sandbox) -> None:
    (sandbox.root / "empty").write_bytes(b"")

    with anyio.fail_after(5):
        result = await sandbox.read("empty")
        tail = await sandbox.read("empty", from_end=True)

    assert (result.lines, result.total_lines) == ((), 0)
    assert (tail.lines, tail.total_lines) == ((), 0)


async def test_negative_start_or_count_is_refused(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("x\n", encoding="utf-8")
    with anyio.fail_after(5):
        with pytest.raises(SandboxError, match="negative"):
            await sandbox.read("f", start=-1)
        with pytest.raises(SandboxError, match="negative"):
            await sandbox.read("f", lines=-1)


# grep


def shown(result: GrepResult) -> list[list[tuple[int, bool]]]:
    """Each block as (line number, is a match) pairs."""
    return [[(line.number, line.is_match) for line in block] for block in result.blocks]


def numbered(count: int, matches: set[int]) -> str:
    return "".join(f"line {i}{' ERROR here' if i in matches else ''}\n" for i in range(1, count + 1))


async def test_grep_is_case_insensitive_by_default_and_case_sensitive_on_request(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("Error one\nerror two\nERROR three\nfine\n", encoding="utf-8")

    def texts(result: GrepResult) -> list[str]:
        return [line.text for block in result.blocks for line in block]

    with anyio.fail_after(10):
        for pattern in ("error", "err.r"):  # a plain literal and a regular expression
            default = await sandbox.grep("f", pattern, before=0, after=0)
            strict = await sandbox.grep("f", pattern, before=0, after=0, case_sensitive=True)
            upper = await sandbox.grep("f", pattern.upper(), before=0, after=0, case_sensitive=True)

            assert shown(default) == [[(1, True), (2, True), (3, True)]] and default.matches == 3
            assert texts(strict) == ["error two"] and strict.matches == 1
            assert texts(upper) == ["ERROR three"]


async def test_grep_shows_the_lines_before_and_after_a_match(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text(numbered(10, {5}), encoding="utf-8")

    with anyio.fail_after(10):
        result = await sandbox.grep("f", "error", before=2, after=1)
        at_the_edges = await sandbox.grep("f", "^line (1|10)$", before=3, after=3)

    assert shown(result) == [[(3, False), (4, False), (5, True), (6, False)]]
    assert [line.text for line in result.blocks[0]] == ["line 3", "line 4", "line 5 ERROR here", "line 6"]
    assert shown(at_the_edges) == [
        [(1, True), (2, False), (3, False), (4, False)],
        [(7, False), (8, False), (9, False), (10, True)],
    ]


async def test_overlapping_and_adjacent_contexts_merge_into_one_block(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text(numbered(30, {5, 7, 12, 15, 25}), encoding="utf-8")

    with anyio.fail_after(10):
        result = await sandbox.grep("f", "error", before=1, after=1)

    assert shown(result) == [
        [(4, False), (5, True), (6, False), (7, True), (8, False)],  # overlapping at line 6
        [(11, False), (12, True), (13, False), (14, False), (15, True), (16, False)],  # adjacent: 13 then 14
        [(24, False), (25, True), (26, False)],
    ]
    assert result.matches == 5 and not result.more


async def test_a_context_line_that_is_itself_a_match_is_marked_as_a_match(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text(numbered(10, {4, 5, 6}), encoding="utf-8")

    with anyio.fail_after(10):
        result = await sandbox.grep("f", "error", before=2, after=2)

    assert shown(result) == [[(2, False), (3, False), (4, True), (5, True), (6, True), (7, False), (8, False)]]


async def test_max_matches_caps_the_matches_and_says_whether_more_exist(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text(numbered(20, {2, 4, 6, 8, 10}), encoding="utf-8")

    with anyio.fail_after(10):
        capped = await sandbox.grep("f", "error", before=0, after=0, max_matches=3)
        exact = await sandbox.grep("f", "error", before=0, after=0, max_matches=5)
        roomy = await sandbox.grep("f", "error", before=0, after=0, max_matches=50)

    assert (capped.matches, capped.more) == (3, True)
    assert [line.number for block in capped.blocks for line in block] == [2, 4, 6]
    assert (exact.matches, exact.more) == (5, False)
    assert (roomy.matches, roomy.more) == (5, False)


async def test_a_line_with_several_matches_counts_once(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("x x x\ny\nx\n", encoding="utf-8")

    with anyio.fail_after(10):
        result = await sandbox.grep("f", "x", before=0, after=0)

    assert result.matches == 2 and shown(result) == [[(1, True)], [(3, True)]]


async def test_a_pattern_that_spans_lines_matches_on_the_line_it_starts_on(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("alpha\nbeta\ngamma\ndelta\n", encoding="utf-8")

    with anyio.fail_after(10):
        result = await sandbox.grep("f", r"beta\ngam", before=0, after=1)

    assert shown(result) == [[(2, True), (3, False)]]
    assert [line.text for line in result.blocks[0]] == ["beta", "gamma"]


async def test_grep_for_empty_lines_finds_only_lines_that_exist(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("a\n\nb\n", encoding="utf-8")
    (sandbox.root / "empty").write_bytes(b"")

    with anyio.fail_after(10):
        blank = await sandbox.grep("f", "^$", before=0, after=0)
        anything = await sandbox.grep("f", "x*", before=0, after=0)
        in_empty = await sandbox.grep("empty", "^", before=0, after=0)

    assert shown(blank) == [[(2, True)]]
    assert shown(anything) == [[(1, True), (2, True), (3, True)]]
    assert in_empty.matches == 0 and in_empty.blocks == ()


async def test_grep_sees_the_same_text_as_read(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_bytes(b"one\r\nbad \xff here\rthree")

    with anyio.fail_after(10):
        result = await sandbox.grep("f", "here|three", before=1, after=0)

    assert [(line.number, line.text) for line in result.blocks[0]] == [(1, "one"), (2, "bad \ufffd here"), (3, "three")]


async def test_a_bad_or_oversized_pattern_is_a_pattern_error(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("x\n", encoding="utf-8")

    with anyio.fail_after(10):
        with pytest.raises(PatternError, match="invalid regular expression"):
            await sandbox.grep("f", "(unclosed")
        with pytest.raises(PatternError, match="longer than 1000"):
            await sandbox.grep("f", "x" * 1001)
        longest = await sandbox.grep("f", "[xy]" + "y?" * 498)

    assert longest.matches == 1


async def test_negative_context_or_no_matches_allowed_is_refused(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("x\n", encoding="utf-8")
    with anyio.fail_after(5):
        with pytest.raises(SandboxError, match="must not be negative"):
            await sandbox.grep("f", "x", before=-1)
        with pytest.raises(SandboxError, match="must not be negative"):
            await sandbox.grep("f", "x", after=-1)
        with pytest.raises(SandboxError, match="at least 1"):
            await sandbox.grep("f", "x", max_matches=0)


@pytest.fixture(scope="module")
def portal_and_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BlockingPortal, Sandbox]]:
    """One Sandbox in a background event loop, so a property test reuses one warm worker."""
    root = tmp_path_factory.mktemp("grep-property")
    with start_blocking_portal("asyncio") as portal:
        sandbox = portal.call(Sandbox, root)
        yield portal, sandbox
        portal.call(sandbox.aclose)


LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r"])


@FIXTURE_EXAMPLES
@given(
    lines=st.lists(st.text(alphabet="aAbB xé", max_size=6), max_size=25),
    ends=st.lists(LINE_ENDS, min_size=25, max_size=25),
    last_end=st.booleans(),
    pattern=st.sampled_from(["a", "ab", "A B", "^$", "^", "$", "b$", "^a", "x*", " "]),
)
def test_grep_finds_exactly_the_lines_read_shows_that_match(
    portal_and_sandbox: tuple[BlockingPortal, Sandbox], lines: list[str], ends: list[str], last_end: bool, pattern: str
) -> None:
    portal, sandbox = portal_and_sandbox
    text = "".join(line + end for line, end in zip(lines, ends, strict=False))
    if lines and not last_end:
        text = text.removesuffix(ends[len(lines) - 1])
    (sandbox.root / "f").write_text(text, encoding="utf-8", newline="")

    read = portal.call(lambda: sandbox.read("f", lines=100))
    result = portal.call(lambda: sandbox.grep("f", pattern, before=0, after=0, max_matches=100))

    expected = [(number, line) for number, line in read.lines if re.search(pattern, line, re.IGNORECASE)]
    assert [(line.number, line.text) for block in result.blocks for line in block] == expected
    assert result.matches == len(expected)


async def test_a_literal_and_the_same_regex_find_the_same_lines(sandbox: Sandbox) -> None:
    (sandbox.root / "f").write_text("\u017fmall\n50 \u212a\nplain\n", encoding="utf-8")  # long s, Kelvin sign

    with anyio.fail_after(10):
        literal = [await sandbox.grep("f", pattern, before=0, after=0) for pattern in ("small", "k")]
        regex = [await sandbox.grep("f", pattern, before=0, after=0) for pattern in ("(?:small)", "(?:k)")]

    assert [shown(result) for result in regex] == [[[(1, True)]], [[(2, True)]]]
    assert [shown(result) for result in literal] == [shown(result) for result in regex]


# regex safety and workers


async def test_a_catastrophic_pattern_is_stopped_while_the_event_loop_goes_on(tmp_path: Path) -> None:
    (tmp_path / "evil").write_text("a" * 50_000 + "b", encoding="utf-8")
    (tmp_path / "f").write_text("fine\n", encoding="utf-8")
    # The other work (100 ticks and a read in a thread) must end before the stuck grep's time limit, on a loaded
    # machine too: 5 s is far beyond any stall of the event loop or a thread.
    sandbox = Sandbox(tmp_path, timeout=5)
    outcome: list[str] = []
    meanwhile: list[str] = []

    async def stuck_grep() -> None:
        try:
            await sandbox.grep("evil", "(a+)+\\Z")  # \Z: only `re` runs it, under the fixed time limit
        except PatternTimeout as error:
            outcome.append(str(error))

    async def other_work() -> None:
        ticks = 0
        while ticks < 100:
            ticks += 1
            await anyio.lowlevel.checkpoint()
        result = await sandbox.read("f")
        meanwhile.append(f"{ticks} ticks, read {result.lines[0][1]!r}, grep answered: {bool(outcome)}")

    try:
        with anyio.fail_after(60):
            await sandbox.grep("f", "fine")  # a warm worker: the stuck grep only sends and waits
            async with anyio.create_task_group() as tg:
                tg.start_soon(stuck_grep)
                await anyio.wait_all_tasks_blocked()  # the request is out; the worker is backtracking
                tg.start_soon(other_work)
            after = await sandbox.grep("f", "fine")
    finally:
        await sandbox.aclose()

    assert meanwhile == ["100 ticks, read 'fine', grep answered: False"]
    assert (
        len(outcome) == 1
        and "uses \\Z (for the end of a line, use $)" in outcome[0]
        and "stopped after 5 s" in outcome[0]
    )
    assert after.matches == 1  # the killed worker was replaced


async def test_closing_stops_the_idle_workers(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x\n", encoding="utf-8")
    sandbox = Sandbox(tmp_path, workers=2, workers_per_owner=2)  # one owner may hold both workers here
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:  # two greps at once need two workers
            for _ in range(2):
                tg.start_soon(sandbox.grep, "f", "x")
        processes = [worker.process for worker in sandbox._idle]  # no public view of the workers
        assert len(processes) == 2 and all(process.returncode is None for process in processes)
        await sandbox.aclose()
    assert all(process.returncode is not None for process in processes)
