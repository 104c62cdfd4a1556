"""The `claimcheck` command: `serve`, `tools`, `demo`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import anyio
from mcp.shared.exceptions import MCPDeprecationWarning

from server.config import CliOverrides, Config, default_config_path, load_config, state_dir
from server.downstream.chain import OWN, mark_of
from server.downstream.server import CONNECT_TIMEOUT_S
from server.errors import ConfigError
from server.proxy import Proxy
from server.upstream.bearer import Tokens, read_tokens_file
from server.upstream.resource_server import OAuth
from server.upstream.surface import VERSION, client_tools
from server.upstream.transports import serve

__all__ = ["main"]

EXIT_CONFIG = 2
EXIT_SERVER_FAILED = 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("CLAIMCHECK_LOG", args.log_level).upper(),
        stream=sys.stderr,
        format="claimcheck %(levelname)s %(name)s: %(message)s",
    )
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    if args.command == "demo":
        from server.demo.client import run_demo

        return anyio.run(run_demo)
    try:
        config = load_config(args.config) if args.command != "ps" or args.config else _config_if_any()
    except ConfigError as exc:
        print(f"claimcheck: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.command == "tools":
        if not any(not server.disabled for server in config.mcp_servers.values()):
            where = args.config or default_config_path()
            print(
                f"claimcheck: {where} configures no servers to start (mcpServers is empty or every one is "
                'disabled); add one, e.g. "mcpServers": {"fs": {"command": "npx", "args": '
                '["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}',
                file=sys.stderr,
            )
            return EXIT_CONFIG
        return anyio.run(_print_tools, config, args.timeout)
    if args.command == "ps":
        from server.status.ps import print_ps

        return anyio.run(print_ps, state_dir(config.settings))
    cli = CliOverrides(
        no_async=args.no_async,
        async_timeout_secs=args.async_timeout,
        async_token_threshold=args.token_threshold,
        no_api=args.no_api,
        state_url=args.state_url,
    )
    token: str | None = None
    if args.auth_token_env:
        token = os.environ.get(args.auth_token_env, "")
        if not token:
            print(f"claimcheck: --auth-token-env names {args.auth_token_env}, which is not set", file=sys.stderr)
            return EXIT_CONFIG
    try:
        auth = _bearer_tokens(args, token)
        oauth = _oauth(config, args)
    except ConfigError as exc:
        print(f"claimcheck: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.shared_socket:
        from server.upstream.shared_serve import serve_shared

        proxy = Proxy(config, cli=cli, api_token=token, shared=True)
        anyio.run(partial(serve_shared, proxy, Path(args.shared_socket), restarted=args.shared_restarted))
        return 0
    if args.shared or (config.settings.shared and args.transport == "stdio"):
        if args.transport != "stdio":
            print("claimcheck: --shared serves over stdio only (it relays to the shared claimcheck)", file=sys.stderr)
            return EXIT_CONFIG
        from server.upstream.shared_relay import relay_main

        return relay_main(list(sys.argv[1:] if argv is None else argv))
    anyio.run(serve, Proxy(config, cli=cli, api_token=token), args.transport, args.host, args.port, auth, oauth)
    return 0


def _parser() -> argparse.ArgumentParser:
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
    return parser


def _bearer_tokens(args: argparse.Namespace, env_token: str | None) -> Tokens | None:
    """The tokens an HTTP/SSE request must carry one of, or None when any request is served."""
    if args.auth_tokens_file is None:
        return None if env_token is None else Tokens.of(env_token)
    if args.transport == "stdio" or args.shared or args.shared_socket:
        raise ConfigError("--auth-tokens-file applies to --transport http or sse only")
    named = read_tokens_file(Path(args.auth_tokens_file), env_token=env_token)
    return Tokens.of(env_token, named)


def _oauth(config: Config, args: argparse.Namespace) -> OAuth | None:
    """`settings.auth` made ready (its secret read, its resource known) where it applies: HTTP and SSE."""
    settings = config.settings.auth
    if settings is None or args.transport == "stdio" or args.shared or args.shared_socket:
        return None
    oauth = OAuth.from_settings(settings)
    host = f"[{args.host}]" if ":" in args.host else args.host
    oauth.resource_for(f"http://{host}:{args.port}/")  # refuses a default resource no client could use
    return oauth


def _global_flags(parser: argparse.ArgumentParser, log_level: str, config: str | None) -> None:
    """The flags every sub-command takes, before or after its name (after wins)."""
    parser.add_argument("--log-level", default=log_level, help="stderr log level (or env CLAIMCHECK_LOG)")
    parser.add_argument(
        "--config",
        default=config,
        help="config file (default: $CLAIMCHECK_CONFIG, else ~/.config/claimcheck/config.json)",
    )


def _config_if_any() -> Config:
    """The default config when there is one (for its stateDir), else the defaults."""
    return load_config() if default_config_path().exists() else Config()


async def _print_tools(config: Config, wait_secs: float) -> int:
    """Wait for every server (up to `wait_secs`), print each one's state and the tools; 1 if any is not ready."""
    proxy = Proxy(config, cli=CliOverrides(no_api=True), connect_timeout=wait_secs)
    failures: list[str] = []
    async with proxy.running():
        with anyio.move_on_after(wait_secs):
            await proxy.pool.settled()
        for downstream in proxy.pool.downstreams:
            line = f"{downstream.name}: {downstream.state}, {len(downstream.tools)} tools"
            if downstream.state != "ready":
                why = downstream.last_error or f"no answer within {wait_secs:g} s"
                line += f" ({why})"
                failures.append(f"{downstream.name} ({downstream.state}: {why})")
            print(line)
        disabled = [name for name, server in config.mcp_servers.items() if server.disabled]
        for name in disabled:
            print(f"{name}: disabled")
        print()
        for tool in client_tools(proxy):
            summary = (tool.description or "").strip().splitlines()
            own = "[claimcheck's own] " if mark_of(tool, OWN) else ""
            print(f"{tool.name}\t{own}{summary[0] if summary else ''}")
    if failures:
        print(f"claimcheck: {len(failures)} server(s) not ready: {'; '.join(failures)}", file=sys.stderr)
        return EXIT_SERVER_FAILED
    return 0
