"""The `claimcheck` command line, parsed with the standard library alone: `server.launch` reads it before anything
heavy is imported (to give stdio servers a head start), `server.cli` acts on it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from server.downstream.processes import CONNECT_TIMEOUT_S
from server.setup_args import add_setup_commands
from server.version import VERSION

__all__ = ["parse", "parser", "starts_servers_ahead"]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    return parser().parse_args(argv)


def starts_servers_ahead(args: argparse.Namespace) -> bool:
    """Whether this command serves one client over stdio from its own process (not a shared claimcheck's relay,
    nor the shared claimcheck itself): then its stdio servers, one process each, can be spawned ahead."""
    return args.command == "serve" and args.transport == "stdio" and not (args.shared or args.shared_socket)


def parser() -> argparse.ArgumentParser:
    """The whole command line; `claimcheck --help` shows it."""
    parser = argparse.ArgumentParser(
        prog="claimcheck",
        description="An MCP server in front of your MCP servers: slow calls become handles, large outputs are "
        "stored whole and served in pieces.",
    )
    parser.add_argument("--version", action="version", version=f"claimcheck {VERSION}")
    _global_flags(parser, "warning", None)
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help)
        _global_flags(sub, argparse.SUPPRESS, argparse.SUPPRESS)  # given after the sub-command, they count too
        return sub

    run = command("serve", "serve the configured servers' tools to one MCP client")
    run.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    run.add_argument("--host", default="127.0.0.1", help="HTTP/SSE bind address (default 127.0.0.1)")
    run.add_argument("--port", type=int, default=8765, help="HTTP/SSE port (default 8765; 0 picks a free one)")
    run.add_argument("--no-async", action="store_true", help="plain pass-through: no handles, no stored outputs")
    run.add_argument("--async-timeout", type=float, metavar="SECS", help="override asyncTimeoutSecs")
    run.add_argument("--token-threshold", type=int, metavar="TOKENS", help="override asyncTokenThreshold")
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
        type=float,
        default=CONNECT_TIMEOUT_S,
        metavar="SECS",
        help=f"how long to wait for every server to start (default {CONNECT_TIMEOUT_S:g})",
    )

    command("demo", "run claimcheck on a bundled demo server and show what a client sees")
    command("ps", "list the running claimcheck instances and their live calls (settings.stateDir of --config)")
    add_setup_commands(command)
    return parser


def _global_flags(parser: argparse.ArgumentParser, log_level: str, config: str | None) -> None:
    """The flags every sub-command takes, before or after its name (after wins)."""
    parser.add_argument("--log-level", default=log_level, help="stderr log level (or env CLAIMCHECK_LOG)")
    parser.add_argument(
        "--config",
        default=config,
        help="config file (default: $CLAIMCHECK_CONFIG, else ~/.config/claimcheck/config.json)",
    )
