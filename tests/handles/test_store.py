"""The output store: private run roots, per-session directories, handles, stored files and the stale sweep."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.handles.run_root import MARKER_FILE, read_marker
from server.handles.store import OutputStore, SessionStore, StoreError

pytestmark = pytest.mark.anyio

HEX32 = "[0-9a-f]{32}"
TWO_HOURS_AGO = time.time() - 2 * 3600


@pytest.fixture
def store(tmp_path: Path) -> Iterator[OutputStore]:
    output_store = OutputStore.create(tmp_path)
    yield output_store
    output_store.close()


@pytest.fixture
def session_store(store: OutputStore) -> SessionStore:
    return store.open_session()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# The run root


def test_run_root_is_private_named_claimcheck_run_hex_and_holds_a_marker_naming_this_process(
    store: OutputStore, tmp_path: Path
) -> None:
    assert store.run_root.parent == tmp_path
    assert re.fullmatch(r"claimcheck-run-[0-9a-f]{24}", store.run_root.name)
    assert mode_of(store.run_root) == 0o700
    assert mode_of(store.run_root / MARKER_FILE) == 0o600
    marker = read_marker(store.run_root)
    assert marker is not None and marker.pid == os.getpid() and not marker.owner_is_gone()


def test_two_stores_in_the_same_root_get_different_run_roots(tmp_path: Path) -> None:
    first, second = OutputStore.create(tmp_path), OutputStore.create(tmp_path)
    assert first.run_root != second.run_root
    assert first.run_root.is_dir() and second.run_root.is_dir()


def test_create_makes_a_missing_root_directory(tmp_path: Path) -> None:
    store = OutputStore.create(tmp_path / "not" / "yet")
    assert store.run_root.is_dir()


def test_close_removes_the_run_root_and_can_be_repeated(store: OutputStore, session_store: SessionStore) -> None:
    store.close()
    assert not store.run_root.exists()
    store.close()


# Sessions and stored files


async def test_a_session_directory_is_private_and_its_handles_name_it(
    store: OutputStore, session_store: SessionStore
) -> None:
    assert session_store.path == store.run_root / session_store.name
    assert re.fullmatch(f"session-{HEX32}", session_store.name)
    assert mode_of(session_store.path) == 0o700
    handle = session_store.new_handle()
    assert re.fullmatch(f"{session_store.name}/{HEX32}", handle)
    assert handle != session_store.new_handle()
    assert store.resolve(handle) is None  # a handle alone creates no file


@pytest.mark.parametrize(
    "text",
    ["plain ascii\n", "héllo\nwörld ✓ 世界", "crlf\r\nkept\r\n", "\n\n\n", "no newline at all", "x" * 3_000_000],
    ids=["ascii", "non-ascii", "crlf", "blank-lines", "no-trailing-newline", "larger-than-a-chunk"],
)
async def test_a_written_file_is_0600_and_round_trips_with_its_measurements(
    store: OutputStore, session_store: SessionStore, text: str
) -> None:
    handle = session_store.new_handle()
    stored = await session_store.write(handle, text)
    data = text.encode("utf-8")
    assert stored.handle == handle
    assert stored.path == store.resolve(handle)
    assert mode_of(stored.path) == 0o600
    assert stored.path.read_bytes() == data
    assert await session_store.read_text(handle) == text
    assert stored.bytes == len(data)
    assert stored.lines == len(text.splitlines())
    assert stored.sha256 == hashlib.sha256(data).hexdigest()


async def test_a_lone_surrogate_is_stored_as_a_question_mark(session_store: SessionStore) -> None:
    handle = session_store.new_handle()
    stored = await session_store.write(handle, "a\ud800b\n")
    assert await session_store.read_text(handle) == "a?b\n"
    assert (stored.bytes, stored.lines, stored.sha256) == (4, 1, hashlib.sha256(b"a?b\n").hexdigest())


async def test_empty_text_is_stored_as_an_empty_file_of_zero_lines(
    store: OutputStore, session_store: SessionStore
) -> None:
    handle = session_store.new_handle()
    stored = await session_store.write(handle, "")
    assert (stored.bytes, stored.lines, stored.sha256) == (0, 0, hashlib.sha256(b"").hexdigest())
    assert store.resolve(handle) == stored.path
    assert await session_store.read_text(handle) == ""


async def test_removing_a_session_removes_only_that_session(store: OutputStore) -> None:
    doomed, kept = store.open_session(), store.open_session()
    kept_handle = kept.new_handle()
    await kept.write(kept_handle, "still here")
    doomed.remove()
    doomed.remove()
    assert not doomed.path.exists()
    assert store.resolve(kept_handle) is not None
    assert await kept.read_text(kept_handle) == "still here"


# Handles that must be refused


async def test_a_session_does_not_own_or_read_another_sessions_handle(store: OutputStore) -> None:
    mine, theirs = store.open_session(), store.open_session()
    handle = theirs.new_handle()
    await theirs.write(handle, "secret")
    assert not mine.owns(handle)
    assert theirs.owns(handle)
    with pytest.raises(StoreError, match="unknown handle"):
        await mine.read_text(handle)
    with pytest.raises(StoreError, match="unknown handle"):
        await mine.write(handle, "overwrite")
    assert await theirs.read_text(handle) == "secret"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../x",
        "/etc/passwd",
        "session-x/../../y",
        "{session}/../../.claimcheck-run",
        "{session}/{file}/extra",
        "{session}/{file}\n",
        "{session}/{file}\x00",
        "/{session}/{file}",
        "{session}//{file}",
        "{session}/{FILE}",
        "{session}",
        MARKER_FILE,
    ],
)
async def test_malformed_handles_are_neither_resolved_nor_owned(
    store: OutputStore, session_store: SessionStore, bad: str
) -> None:
    real = session_store.new_handle()
    await session_store.write(real, "x")
    file_id = real.partition("/")[2]
    handle = bad.format(session=session_store.name, file=file_id, FILE=file_id.upper())
    assert store.resolve(handle) is None
    assert not session_store.owns(handle)
    with pytest.raises(StoreError):
        await session_store.read_text(handle)


async def test_a_well_formed_handle_without_a_file_is_not_resolved(
    store: OutputStore, session_store: SessionStore
) -> None:
    handle = session_store.new_handle()
    assert session_store.owns(handle)
    assert store.resolve(handle) is None
    with pytest.raises(StoreError, match=re.escape(f'unknown handle "{handle}"')):
        await session_store.read_text(handle)


# Write failures


async def test_a_write_into_a_vanished_session_raises_a_store_error_naming_the_handle(
    session_store: SessionStore,
) -> None:
    handle = session_store.new_handle()
    session_store.remove()
    with pytest.raises(StoreError) as caught:
        await session_store.write(handle, "lost")
    assert str(caught.value) == f'could not store the output of handle "{handle}": No such file or directory'


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
async def test_a_write_into_a_read_only_session_raises_a_store_error_naming_the_handle(
    session_store: SessionStore,
) -> None:
    handle = session_store.new_handle()
    os.chmod(session_store.path, 0o500)
    try:
        with pytest.raises(StoreError) as caught:
            await session_store.write(handle, "denied")
    finally:
        os.chmod(session_store.path, 0o700)
    assert str(caught.value) == f'could not store the output of handle "{handle}": Permission denied'


# Any text


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=st.text(st.characters(exclude_categories=())))
async def test_any_text_reads_back_as_what_the_model_would_have_seen(session_store: SessionStore, text: str) -> None:
    handle = session_store.new_handle()
    stored = await session_store.write(handle, text)
    seen = text.encode("utf-8", "replace")
    assert await session_store.read_text(handle) == seen.decode("utf-8")
    assert stored.bytes == len(seen)
    assert stored.sha256 == hashlib.sha256(seen).hexdigest()
