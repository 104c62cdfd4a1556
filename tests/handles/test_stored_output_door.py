"""Every read of a stored output goes through one door: a regular file in the session's own directory.

Whatever is planted where a stored output was (a link out of the run root, to another session's file or to
/dev/zero, a FIFO, a socket) or wherever its session directory was (a link to a directory holding a
file of the same name), tool_output in every mode, Read and Grep refuse it at once with a clear error,
and show nothing of what the link leads to.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from fs_sandbox import SandboxError, open_file
from tests.support.handles import Downstream, client_of, handle_in, handles_proxy
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio

SECRET = "the secret that must not be read"

Plant = Callable[[Path, Path, Path, ExitStack], str]  # (stored file, another session's file, scratch) -> why


def link_out_of_the_root(stored: Path, theirs: Path, fifo_dir: Path, _: ExitStack) -> str:
    (fifo_dir / "outside").write_text(SECRET, encoding="utf-8")
    stored.unlink()
    stored.symlink_to(fifo_dir / "outside")
    return "its file is a symbolic link (links are not followed), not a regular file"


def link_to_another_sessions_file(stored: Path, theirs: Path, fifo_dir: Path, _: ExitStack) -> str:
    stored.unlink()
    stored.symlink_to(theirs)
    return "its file is a symbolic link (links are not followed), not a regular file"


def link_to_dev_zero(stored: Path, theirs: Path, fifo_dir: Path, _: ExitStack) -> str:
    stored.unlink()
    stored.symlink_to("/dev/zero")
    return "its file is a symbolic link (links are not followed), not a regular file"


def fifo(stored: Path, theirs: Path, fifo_dir: Path, _: ExitStack) -> str:
    stored.unlink()
    os.mkfifo(stored)
    return "its file is a FIFO, not a regular file"


def unix_socket(stored: Path, theirs: Path, fifo_dir: Path, cleanup: ExitStack) -> str:
    short = tempfile.mkdtemp()  # a socket's path must be short; it is moved into place afterwards
    cleanup.callback(shutil.rmtree, short)
    listener = cleanup.enter_context(socket.socket(socket.AF_UNIX))
    listener.bind(os.path.join(short, "s"))
    stored.unlink()
    os.rename(os.path.join(short, "s"), stored)
    return "its file is a socket, not a regular file"


def session_directory_swapped_for_a_link(stored: Path, theirs: Path, fifo_dir: Path, _: ExitStack) -> str:
    decoy = fifo_dir / "decoy"
    decoy.mkdir()
    (decoy / stored.name).write_text(SECRET, encoding="utf-8")
    directory = stored.parent
    directory.rename(fifo_dir / "moved-away")
    directory.symlink_to(decoy)
    return "the directory holding its file is a symbolic link; links are not followed"


PLANTS = [
    link_out_of_the_root,
    link_to_another_sessions_file,
    link_to_dev_zero,
    fifo,
    unix_socket,
    session_directory_swapped_for_a_link,
]
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("tool_output", {"mode": "raw"}),
    ("tool_output", {"mode": "slice", "slice": {"start": 0, "length": 40}}),
    ("tool_output", {"mode": "slice", "slice": {"anchor": "secret"}}),
    ("tool_output", {"mode": "truncate"}),
    ("tool_output", {"mode": "auto", "extract": "the secret"}),
    ("Read", {}),
    ("Grep", {"regex": "secret"}),
]


@pytest.fixture
def fifo_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    try:  # a reader that ever blocked on the FIFO would be let go here
        for fifo_path in tmp_path.rglob("*"):
            if fifo_path.is_fifo():
                os.close(os.open(fifo_path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.mark.parametrize(("tool", "arguments"), REQUESTS, ids=[f"{t}-{a.get('mode', '')}" for t, a in REQUESTS])
@pytest.mark.parametrize("plant", PLANTS, ids=[plant.__name__ for plant in PLANTS])
async def test_a_planted_file_is_refused_at_once_by_every_reader(
    plant: Plant, tool: str, arguments: dict[str, Any], fifo_dir: Path
) -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as alice, client_of(proxy) as bob:
        with anyio.fail_after(10):
            mine = handle_in(text_of(await alice.call_tool("down__big", {"lines": 400})))
            theirs = handle_in(text_of(await bob.call_tool("down__echo", {"text": f"{SECRET} " * 500})))
        run_root = proxy.sessions.store.run_root
        with ExitStack() as cleanup:
            why = plant(run_root / mine, run_root / theirs, fifo_dir, cleanup)
            key = "handle" if tool == "tool_output" else "file"
            with anyio.fail_after(1):
                result = await alice.call_tool(tool, {key: mine, **arguments})
        with anyio.fail_after(10):
            after = await alice.call_tool("down__echo", {"text": "still serving"})
    answer = text_of(result)
    assert result.is_error
    assert f'could not read the output of handle "{mine}": {why}' in answer
    assert SECRET not in answer
    if tool == "tool_output":
        assert answer.startswith(f"TOOL_OUTPUT FAILED FOR down__big WITH HANDLE {mine}, STRATEGY:{arguments['mode']}:")
    else:
        assert answer.startswith(f"{tool} failed: ")
    assert text_of(after) == "still serving"


def test_a_directory_swapped_for_a_link_while_files_are_opened_never_leads_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "session").mkdir(parents=True)
    outside.mkdir()
    (root / "session" / "out").write_text("inside", encoding="utf-8")
    (outside / "out").write_text(SECRET, encoding="utf-8")
    stop = threading.Event()

    def swap() -> None:
        real, parked = root / "session", root / "parked"
        while not stop.is_set():
            real.rename(parked)
            real.symlink_to(outside)
            real.unlink()
            parked.rename(real)

    seen: Counter[str] = Counter()
    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for _ in range(3000):
            for directory, name in ((root, "session/out"), (root / "session", "out")):
                try:
                    with open_file(directory, name) as opened:
                        seen[opened.read(0, 100).decode()] += 1
                except SandboxError as exc:
                    seen[type(exc).__name__] += 1
    finally:
        stop.set()
        swapper.join()

    assert SECRET not in seen
    assert set(seen) <= {"inside", "NotFound", "PathRefused", "NotAFile"}
