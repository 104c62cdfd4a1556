"""Run roots: claimcheck removes only the directories it made, and only once their process is gone."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.handles.run_root import MARKER_FILE, Marker, read_marker, remove_stale_roots
from server.handles.store import OutputStore
from server.platform import boot_identity, process_start

DAYS_AGO = time.time() - 5 * 86400
HEX24 = "0123456789abcdef01234567"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def this_process(run: str) -> Marker:
    return Marker(pid=os.getpid(), start=process_start(os.getpid()), boot="", run=run)


def make_dir(parent: Path, name: str, marker: str | None = None, mtime: float = DAYS_AGO) -> Path:
    """A directory with some user data in it, an optional marker text, and an old mtime."""
    path = parent / name
    path.mkdir()
    (path / "notes.txt").write_text("precious", encoding="utf-8")
    if marker is not None:
        (path / MARKER_FILE).write_text(marker, encoding="utf-8")
    os.utime(path, (mtime, mtime))
    return path


def dead_marker(run: str = HEX24) -> str:
    return Marker(pid=dead_pid(), start="1", boot="", run=run).render()


@pytest.mark.subprocess
def test_directories_claimcheck_did_not_make_are_left_alone_however_old(tmp_path: Path) -> None:
    malformed = [
        "",
        "not a marker",
        dead_marker().replace("claimcheck run root", "claimcheck run roof"),
        dead_marker().replace("version=1", "version=2"),
        dead_marker().replace("pid=", "pid=-"),
        dead_marker() + "extra=1\n",
        dead_marker(run="f" * 24),  # names another run root
    ]
    kept = [
        make_dir(tmp_path, "claimcheck-notes"),
        make_dir(tmp_path, "claimcheck-bars", dead_marker()),
        make_dir(tmp_path, "claimcheck-run-abc"),
        make_dir(tmp_path, "claimcheck-0123456789ab"),
        make_dir(tmp_path, f"claimcheck-run-{HEX24}"),
        make_dir(tmp_path, f"claimcheck-run-{'a' * 24}", this_process("a" * 24).render()),
        *(
            make_dir(tmp_path, f"claimcheck-run-{index:024x}", text.replace(HEX24, f"{index:024x}"))
            for index, text in enumerate(malformed, start=1)
        ),
    ]
    (tmp_path / "claimcheck-0123456789ab" / "owner.pid").write_text(str(dead_pid()), encoding="utf-8")

    assert remove_stale_roots(tmp_path) == []
    for path in kept:
        assert (path / "notes.txt").read_text(encoding="utf-8") == "precious", path.name


@pytest.mark.subprocess
def test_a_symlink_named_like_a_run_root_is_left_alone_with_its_target(tmp_path: Path) -> None:
    target = make_dir(tmp_path, "elsewhere", dead_marker())
    link = tmp_path / f"claimcheck-run-{HEX24}"
    link.symlink_to(target, target_is_directory=True)
    assert remove_stale_roots(tmp_path) == []
    assert link.is_symlink() and (target / "notes.txt").exists()


@pytest.mark.subprocess
def test_a_marker_that_is_a_symlink_or_a_fifo_is_not_a_marker(tmp_path: Path) -> None:
    real = make_dir(tmp_path, "real-marker", dead_marker())
    linked = make_dir(tmp_path, f"claimcheck-run-{HEX24}")
    (linked / MARKER_FILE).symlink_to(real / MARKER_FILE)
    fifo_run = "b" * 24
    fifo = make_dir(tmp_path, f"claimcheck-run-{fifo_run}")
    os.mkfifo(fifo / MARKER_FILE)
    assert remove_stale_roots(tmp_path) == []
    assert (linked / "notes.txt").exists() and (fifo / "notes.txt").exists()


@pytest.mark.subprocess
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_run_root_of_another_user_is_left_alone(tmp_path: Path) -> None:
    theirs = make_dir(tmp_path, f"claimcheck-run-{HEX24}", dead_marker())
    os.chown(theirs, 65534, 65534)
    assert remove_stale_roots(tmp_path) == []
    assert (theirs / "notes.txt").exists()


def test_a_marker_whose_pid_was_reused_by_a_later_process_is_stale(tmp_path: Path) -> None:
    if not process_start(os.getpid()):
        pytest.skip("no process start times on this system (the macOS simulation hides them)")
    reused = Marker(pid=os.getpid(), start="1", boot="", run=HEX24)  # this pid, but not this start time
    stale = make_dir(tmp_path, f"claimcheck-run-{HEX24}", reused.render())
    assert remove_stale_roots(tmp_path) == [stale]
    assert not stale.exists()


def test_a_marker_from_an_earlier_boot_is_stale(tmp_path: Path) -> None:
    boot = "t1" if boot_identity().startswith("t") else "an-earlier-boot"  # a boot time (psutil), or a boot id
    earlier = Marker(pid=os.getpid(), start=process_start(os.getpid()), boot=boot, run=HEX24)
    stale = make_dir(tmp_path, f"claimcheck-run-{HEX24}", earlier.render())
    if not boot_identity():
        pytest.skip("no boot identity on this system")
    assert remove_stale_roots(tmp_path) == [stale]


@pytest.mark.subprocess
def test_a_half_made_run_root_of_a_dead_process_is_removed(tmp_path: Path) -> None:
    staging = make_dir(tmp_path, f"claimcheck-run-{HEX24}.new", dead_marker())
    assert remove_stale_roots(tmp_path) == [staging]


@pytest.mark.subprocess
def test_the_run_root_of_a_killed_claimcheck_is_removed_at_the_next_start_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from server.handles.store import OutputStore\n"
        "store = OutputStore.create(Path(sys.argv[1]))\n"
        "(store.run_root / store.open_session().name / 'out').write_text('x')\n"
        "print(store.run_root, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    left = Path(child.stdout.readline().strip())
    marker = read_marker(left)
    assert marker is not None and marker.pid == child.pid
    assert remove_stale_roots(tmp_path) == []  # alive: kept
    child.kill()
    child.wait(timeout=30)
    child.stdout.close()
    neighbour = make_dir(tmp_path, "claimcheck-notes")

    with caplog.at_level(logging.INFO, logger="server.handles.run_root"):
        store = OutputStore.create(tmp_path)
    try:
        assert not left.exists()
        assert store.run_root.is_dir() and (neighbour / "notes.txt").exists()
        assert [record.getMessage() for record in caplog.records] == [
            f"removed stale run root {left}: its process {child.pid} is gone"
        ]
    finally:
        store.close()


def test_the_sweep_of_a_missing_directory_removes_nothing(tmp_path: Path) -> None:
    assert remove_stale_roots(tmp_path / "absent") == []


def test_a_new_run_root_leaves_no_staging_directory_behind(tmp_path: Path) -> None:
    store = OutputStore.create(tmp_path)
    try:
        assert [path.name for path in tmp_path.iterdir()] == [store.run_root.name]
        assert [path.name for path in store.run_root.iterdir()] == [MARKER_FILE]
    finally:
        store.close()
