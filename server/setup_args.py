"""The command line of `claimcheck init` and `claimcheck doctor` (standard library only, as `server.cli_args`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

__all__ = ["CLIENT_NAMES", "LOG_FORMAT", "add_setup_commands", "configure_logging"]

LOG_FORMAT = "claimcheck %(levelname)s %(name)s: %(message)s"

CLIENT_NAMES = "claude-desktop, claude-code, cursor, vscode, windsurf, codex"


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
    doctor.add_argument("--port", type=int, help="the HTTP/SSE port `serve` will take (default 8765 over HTTP)")
    doctor.add_argument("--timeout", type=float, default=30, metavar="SECS", help="how long each server may take")


def configure_logging(args: argparse.Namespace) -> None:
    """stderr logging at `--log-level` (or `$CLAIMCHECK_LOG`), as `server.cli` sets it up: called earlier where a
    config is read before `server.cli` runs, so that what loading says (another client's file) is said alike."""
    level = os.environ.get("CLAIMCHECK_LOG", args.log_level).upper()
    logging.basicConfig(level=level, stream=sys.stderr, format=LOG_FORMAT)
