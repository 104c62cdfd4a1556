"""The command line of `claimcheck init` and `claimcheck doctor` (standard library only, as `server.cli_args`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from server.client_places import CLIENTS

__all__ = [
    "CLIENT_NAMES",
    "LOG_FORMAT",
    "add_setup_commands",
    "configure_logging",
    "in_range",
    "log_level",
    "pid",
    "port",
    "seconds",
]

LOG_FORMAT = "claimcheck %(levelname)s %(name)s: %(message)s"

Number = TypeVar("Number", int, float)

CLIENT_NAMES = ", ".join(CLIENTS)


def add_setup_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Register `init` and `doctor` through `command(name, help)`, which adds a sub-command."""
    init = command("init", "import a client's servers and route the client through claimcheck")
    init.add_argument("client", nargs="?", metavar="CLIENT|PATH", help=f"{CLIENT_NAMES}, or the file's path")
    mode = init.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="write the entry into the client's file (after a backup)")
    mode.add_argument("--undo", action="store_true", help="restore the client's file from its newest backup")
    init.add_argument("--name", default="claimcheck", help="the entry's name in the client (default claimcheck)")

    doctor = command("doctor", "check what a first run needs, one line per check with its fix")
    doctor.add_argument("--client", metavar="CLIENT|PATH", help="the client config to check (default: all found)")
    doctor.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    doctor.add_argument("--host", default="127.0.0.1")
    doctor.add_argument("--port", type=port, help="the HTTP/SSE port `serve` will take (default 8765 over HTTP)")
    doctor.add_argument("--timeout", type=seconds, default=30, metavar="SECS", help="how long each server may take")


def configure_logging(args: argparse.Namespace) -> None:
    """stderr logging at `--log-level` (or `$CLAIMCHECK_LOG`), as `server.cli` sets it up: called earlier where a
    config is read before `server.cli` runs, so that what loading says (another client's file) is said alike.
    A `$CLAIMCHECK_LOG` that names no level is said in one line and left out: it may sit in a client's `env`,
    where refusing to start would break every session for a log setting."""
    if logging.getLogger().handlers:
        return  # set up already (`server.launch` first, then `server.cli`), which logging would leave as it is too
    level = args.log_level
    named = os.environ.get("CLAIMCHECK_LOG")
    if named:
        try:
            level = log_level(named)
        except argparse.ArgumentTypeError as exc:
            print(f"claimcheck: CLAIMCHECK_LOG: {exc}; logging at {level}", file=sys.stderr, flush=True)
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format=LOG_FORMAT)


_LEVELS = ("debug", "info", "warning", "error", "critical")


def log_level(text: str) -> str:
    """`--log-level`'s value (and `$CLAIMCHECK_LOG`'s): a level's name in any case, `warn` for warning."""
    level = text.strip().lower()
    level = "warning" if level == "warn" else level
    if level not in _LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a log level: use debug, info, warning, error or critical")
    return level


def in_range(
    convert: Callable[[str], Number], noun: str, low: Number, high: Number | None = None, note: str = ""
) -> Callable[[str], Number]:
    """An argparse type: `convert` of the text, from `low` (to `high`), or one line saying what to give."""
    span = f"{low:g} or more" if high is None else f"{low:g} to {high:g}"

    def parse(text: str) -> Number:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not (value >= low and (high is None or value <= high)):  # NaN too
            shown = repr(text) if value is None else text
            raise argparse.ArgumentTypeError(f"{shown} is not {noun}: give {span}{note}")
        return value

    return parse


port = in_range(int, "a port", 0, 65535, " (0 picks a free one)")
"""A TCP port: 0 (a free one) to 65535."""
seconds = in_range(float, "a number of seconds", 0.0)
"""How long to wait: 0 or more."""
pid = in_range(int, "a process id", 1, note=" (`claimcheck ps` lists them)")
"""A process id, as `claimcheck ps` shows it."""
