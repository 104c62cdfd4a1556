"""The `claimcheck` command line, parsed with the standard library alone: `server.launch` reads it before anything
heavy is imported (to give stdio servers a head start), `server.cli` acts on it."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from server.downstream.processes import CONNECT_TIMEOUT_S
from server.setup_args import add_setup_commands, in_range, log_level, pid, port, seconds
from server.version import VERSION

__all__ = ["parse", "parser", "starts_servers_ahead"]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line; `claimcheck` with no command prints the help listing the commands and exits 2."""
    whole = parser()
    args, extra = whole.parse_known_args(argv)
    if extra:  # said by the command's own parser, whose --help shows what it takes
        whole.commands.get(args.command, whole).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        whole.print_help(sys.stderr)
        raise SystemExit(2)
    if args.command == "demo" and args.config is not None:
        whole.error(
            "demo runs claimcheck on its own bundled server and reads no config: leave out --config "
            "(`claimcheck tools --config FILE` shows what your servers offer)"
        )
    if args.command == "serve":
        if args.transport == "stdio" and (args.host is not None or args.port is not None):
            whole.error("--host and --port apply to --transport http or sse; over stdio there is nothing to bind")
        args.host = DEFAULT_HOST if args.host is None else args.host
        args.port = DEFAULT_PORT if args.port is None else args.port
    return args


_seconds = in_range(float, "a number of seconds", float(0), note=" (0 hands every call out at once)")
_tokens = in_range(int, "a number of tokens", 1)


_INVALID_CHOICE = re.compile(r"(?P<argument>.*): invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)$")
_CHOICES = re.compile(r"'([^']*)'")
_FLAGS_FOR = {"version": "--version", "help": "--help"}


def _did_you_mean(given: str, choices: list[str]) -> str:
    """What a mistyped command or choice (`server`, `claimcheck version`) was likely meant to be, else ""."""
    if given.lower() in _FLAGS_FOR and given.lower() not in choices:
        return _FLAGS_FOR[given.lower()]
    close = difflib.get_close_matches(given.lower(), choices, n=1, cutoff=0.6)
    return close[0] if close else ""


class _Parser(argparse.ArgumentParser):
    """argparse, saying a mistake in one line that leads with it (not after the usage) and names what to write."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.commands: dict[str, argparse.ArgumentParser] = {}
        """The commands' own parsers, by name (the whole command line's)."""

    def error(self, message: str) -> NoReturn:
        unknown = message.removeprefix("unrecognized arguments: ").split() if "unrecognized" in message else []
        for flag in ("--http", "--sse", "--stdio"):
            if flag in unknown:
                message = f"{flag} is written --transport {flag[2:]}"
        if (chosen := _INVALID_CHOICE.match(message)) is not None:
            guess = _did_you_mean(chosen["given"], _CHOICES.findall(chosen["choices"]))
            if guess:  # the fix first: `claimcheck version` → did you mean --version?
                where = chosen["argument"].removeprefix("argument ")
                message = f"did you mean {guess}? ('{chosen['given']}' is no choice of {where})"
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` shows the options)\n")


def starts_servers_ahead(args: argparse.Namespace) -> bool:
    """Whether this command serves one client over stdio from its own process (not a shared claimcheck's relay,
    nor the shared claimcheck itself): then its stdio servers, one process each, can be spawned ahead."""
    return args.command == "serve" and args.transport == "stdio" and not (args.shared or args.shared_socket)


def parser() -> _Parser:
    """The whole command line; `claimcheck --help` shows it."""
    parser = _Parser(
        prog="claimcheck",
        description="An MCP server in front of your MCP servers: slow calls become handles, large outputs are "
        "stored whole and served in pieces.",
        epilog="Start with `claimcheck demo`. `claimcheck COMMAND --help` shows a command's options. An MCP client "
        "runs `claimcheck serve` (its config: --config, else $CLAIMCHECK_CONFIG, else "
        "~/.config/claimcheck/config.json).",
    )
    parser.add_argument("--version", action="version", version=f"claimcheck {VERSION}")
    _global_flags(parser, "warning", None)
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    def command(name: str, help: str, **options: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, **options)
        parser.commands[name] = sub
        _global_flags(sub, argparse.SUPPRESS, argparse.SUPPRESS)  # given after the sub-command, they count too
        return sub

    run = command(
        "serve",
        "serve the configured servers' tools to one MCP client (what a client's config starts)",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    run.add_argument("--host", help="HTTP/SSE bind address (default 127.0.0.1)")
    run.add_argument("--port", type=port, help=f"HTTP/SSE port (default {DEFAULT_PORT}; 0 picks a free one)")
    run.add_argument("--no-async", action="store_true", help="plain pass-through: no handles, no stored outputs")
    run.add_argument("--async-timeout", type=_seconds, metavar="SECS", help="override asyncTimeoutSecs")
    run.add_argument("--token-threshold", type=_tokens, metavar="TOKENS", help="override asyncTokenThreshold")
    run.add_argument("--no-api", action="store_true", help="do not start the local status API")
    run.add_argument(
        "--state-url",
        metavar="URL",
        help="redis://… shared by several replicas behind a load balancer (settings.state.url; needs the "
        "[redis] extra and settings.root on a directory every replica shares)",
    )
    run.add_argument(
        "--auth-token-env",
        metavar="VAR",
        help="the token in $VAR opens the status API (instead of one made per run) and, over HTTP/SSE, "
        "is required as `Authorization: Bearer $VAR` on every MCP request (with settings.auth: accepted "
        "beside OAuth access tokens)",
    )
    run.add_argument(
        "--auth-tokens-file",
        metavar="PATH",
        help="over HTTP/SSE, accept each token of this file of `NAME TOKEN` lines (tokens of 32 bytes or more) as "
        "the principal NAME: principals never share handles or sessions (with --auth-token-env too, its token "
        "is one more principal and alone opens the status API)",
    )
    run.add_argument(
        "--shared",
        action="store_true",
        help="relay stdio to this user's shared claimcheck for this config (started if none runs): handles "
        "outlive the session, servers start once (also settings.shared)",
    )
    run.add_argument("--shared-socket", help=argparse.SUPPRESS)  # the shared claimcheck itself, started by a relay
    run.add_argument("--shared-restarted", action="store_true", help=argparse.SUPPRESS)

    tools = command("tools", "connect to every server and print the tools a client will see")
    tools.add_argument(
        "--timeout",
        type=seconds,
        default=CONNECT_TIMEOUT_S,
        metavar="SECS",
        help=f"how long to wait for every server to start (default {CONNECT_TIMEOUT_S:g})",
    )

    command("demo", "run claimcheck on a bundled demo server and show what a client sees (reads no config)")
    command("ps", "list the running claimcheck instances and their live calls (settings.stateDir of --config)")
    add_setup_commands(command)
    stop = command(
        "stop",
        "stop this user's shared claimcheck, the instances named by pid, or --all of them",
        description="Stop claimcheck instances of this user with SIGTERM and wait until they have exited. Without "
        "PID or --all: every shared claimcheck (`serve --shared`) of this user. An instance with the status API "
        "off (--no-api) has no discovery file and is found only when it is a shared one.",
    )
    stop.add_argument("pids", nargs="*", type=pid, metavar="PID", help="an instance's pid, as `claimcheck ps` shows")
    stop.add_argument(
        "--all",
        action="store_true",
        help="every instance of this user: the shared ones and those in settings.stateDir of --config",
    )
    stop.add_argument(
        "--timeout", type=seconds, default=10, metavar="SECS", help="how long to wait for each to exit (default 10)"
    )
    return parser


DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765

SERVE_DESCRIPTION = "\n".join(
    [
        "Serve the tools of the servers in the config (mcpServers) to one MCP client over stdin/stdout, or to many",
        "over HTTP or SSE. A call slower than asyncTimeoutSecs returns a handle at once and goes on in the",
        "background; an output over asyncTokenThreshold tokens is stored whole and the model gets its size and a",
        "handle, and reads it with tool_output, Read and Grep.",
        "",
        "Over stdio it is meant to be started by an MCP client (Claude Desktop, Claude Code, Cursor, VS Code …), not",
        "typed in a terminal: `claimcheck demo` shows it at work.",
    ]
)

SERVE_EXAMPLES = "\n".join(
    [
        "examples:",
        "  a client's config entry (Claude Desktop, Cursor …):",
        '    "claimcheck": {"command": "claimcheck", "args": ["serve", "--config", "/home/me/claimcheck.json"]}',
        "  sub-agents and one-shot clients, whose handles must outlive each session:",
        "    claimcheck serve --shared",
        "  many clients over HTTP, every request with `Authorization: Bearer $CC_TOKEN`:",
        "    claimcheck serve --transport http --port 8765 --auth-token-env CC_TOKEN",
        "  a plain pass-through, no handles:",
        "    claimcheck serve --no-async",
        "  what a client will be served, then claimcheck at work on a demo server:",
        "    claimcheck tools",
        "    claimcheck demo",
    ]
)


def _global_flags(parser: argparse.ArgumentParser, default_level: str, config: str | None) -> None:
    """The flags every sub-command takes, before or after its name (after wins)."""
    parser.add_argument(
        "--log-level", default=default_level, type=log_level, help="stderr log level (or env CLAIMCHECK_LOG)"
    )
    parser.add_argument(
        "--config",
        default=config,
        help="config file (default: $CLAIMCHECK_CONFIG, else ~/.config/claimcheck/config.json)",
    )
