"""The `claimcheck` command's entry point: what can start before anything heavy is imported.

A `serve --shared` relay (`server.upstream.shared_relay`) imports only the standard library, so a client that starts
claimcheck for every session gets its shared claimcheck's answers without paying for the SDK's import. `serve` over
stdio spawns its stdio servers first (`server.downstream.processes`, the head start) and imports the SDK while they
start. Everything else goes straight to `server.cli`.

This is also the top of the command: a mistake its user can make (a `ConfigError` or `StartupError`, however deep
in exception groups of task groups) ends it with one line on stderr and status 2; anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from server.config import Config

__all__ = ["TERMINAL_HINT", "main", "serves_a_terminal", "user_error"]

TERMINAL_HINT = (
    "claimcheck serve speaks MCP on stdin/stdout; it is meant to be started by an MCP client. Try `claimcheck demo`, "
    "or see `claimcheck serve --help`."
)


def serves_a_terminal(args: argparse.Namespace, stdin_is_tty: bool) -> bool:
    """Whether this is `serve` over stdio typed in a terminal: it would wait silently for MCP, so a hint is due."""
    return stdin_is_tty and args.command == "serve" and args.transport == "stdio" and not args.shared_socket


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except Exception as exc:  # the top of the command: a user's mistake is one line, a bug keeps its traceback
        from server.errors import EXIT_USAGE

        line = user_error(exc)
        if line is None:
            raise
        print(f"claimcheck: {line}", file=sys.stderr, flush=True)
        return EXIT_USAGE


def user_error(exc: BaseException) -> str | None:
    """The one line that says what the user must fix, when every error in `exc` (an exception group's leaves, or
    `exc` itself) is one they can fix; None when any is not (a bug: its traceback is what helps)."""
    from server.errors import ConfigError, StartupError

    leaves = _leaves(exc)
    if not leaves or not all(isinstance(leaf, (ConfigError, StartupError)) for leaf in leaves):
        return None
    said = dict.fromkeys(" ".join(str(leaf).split()) for leaf in leaves)  # one line, each message once
    return "; ".join(said)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _run(args: list[str]) -> int:
    from server.upstream.shared_relay import relay_main, wants_shared  # standard library only

    if wants_shared(args):
        if sys.stdin.isatty():
            print(f"claimcheck: {TERMINAL_HINT}", file=sys.stderr, flush=True)
        return relay_main(args)
    parsed = _parsed(args)
    if parsed is not None and serves_a_terminal(parsed, sys.stdin.isatty()):
        print(f"claimcheck: {TERMINAL_HINT}", file=sys.stderr, flush=True)
    config = None if parsed is None else _config_to_start_ahead(parsed)
    if config is None:
        from server.cli import main as cli_main

        return cli_main(args)
    import anyio

    return anyio.run(_serve_ahead, args, config)


def _parsed(argv: list[str]) -> argparse.Namespace | None:
    """The command line, or None for --help, --version or a mistake: `server.cli` parses again and says it."""
    from server.cli_args import parse

    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            return parse(argv)
    except SystemExit:
        return None


def _config_to_start_ahead(args: argparse.Namespace) -> Config | None:
    """The config whose stdio servers this command may spawn ahead, or None (another command, a config that does not
    load: `server.cli` says why)."""
    from server.cli_args import starts_servers_ahead
    from server.config import load_config
    from server.errors import ConfigError

    if not starts_servers_ahead(args):
        return None
    from server.setup_args import configure_logging

    configure_logging(args)
    try:
        config = load_config(args.config)
    except ConfigError:
        return None
    return None if config.settings.shared else config


async def _serve_ahead(argv: list[str], config: Config) -> int:
    from server.downstream.processes import HEAD_START

    try:
        await HEAD_START.spawn(config.mcp_servers.values())
        from server.cli import prepare  # the SDK's import, while the servers start

        step = prepare(argv, config)
        return step if isinstance(step, int) else await step()
    finally:
        await HEAD_START.close()
