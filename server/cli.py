"""The `claimcheck` command: `serve`, `tools`, `demo`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

import anyio
from mcp.shared.exceptions import MCPDeprecationWarning

from extraction.wording import plural
from server.cli_args import parse
from server.config import CliOverrides, Config, default_config_path, load_config, no_servers, resolved, state_dir
from server.distribution import clash_warning
from server.downstream.chain import OWN, mark_of
from server.errors import EXIT_USAGE, ConfigError
from server.platform import given_path
from server.proxy import Proxy
from server.setup_args import configure_logging
from server.upstream.bearer import MIN_TOKEN_BYTES, Tokens, read_tokens_file
from server.upstream.resource_server import OAuth
from server.upstream.surface import client_tools
from server.upstream.transports import serve

__all__ = ["main", "prepare"]

EXIT_CONFIG = EXIT_USAGE  # a config the user must fix: one line, as at the top of the command (server.launch)
EXIT_SERVER_FAILED = 1


Step = Callable[[], Awaitable[int]]
"""What a command does in its event loop, once its arguments and config were read."""


def main(argv: Sequence[str] | None = None) -> int:
    step = prepare(list(sys.argv[1:] if argv is None else argv))
    return step if isinstance(step, int) else anyio.run(step)


def prepare(argv: list[str], config: Config | None = None) -> int | Step:
    """Read the command line, the config (unless given) and everything else a command needs: an exit status when it
    cannot run (or ran without an event loop), else its step. `server.launch` awaits the step in the loop it
    spawned servers in."""
    args = parse(argv)
    configure_logging(args)
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    if args.command == "demo":
        from server.demo.client import run_demo

        if (clash := clash_warning()) is not None:
            print(clash, file=sys.stderr)

        return run_demo
    if args.command in ("init", "doctor"):
        from server.doctor import run_doctor
        from server.init_cmd import run_init

        return run_init(args) if args.command == "init" else run_doctor(args)
    try:
        if config is None:
            config = load_config(args.config) if args.command not in ("ps", "stop") or args.config else _config_if_any()
    except ConfigError as exc:
        print(f"claimcheck: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.command == "tools":
        if not any(not server.disabled for server in config.mcp_servers.values()):
            print(f"claimcheck: {no_servers(args.config or default_config_path())}", file=sys.stderr)
            return EXIT_CONFIG
        return partial(_print_tools, config, args.timeout)
    if args.command == "ps":
        from server.status.ps import print_ps

        return partial(print_ps, state_dir(config.settings))
    if args.command == "stop":
        from server.stop import stop

        return stop(args.pids, every=args.all, state=state_dir(config.settings), timeout=args.timeout)
    cli = CliOverrides(
        no_async=args.no_async,
        async_timeout_secs=args.async_timeout,
        async_token_threshold=args.token_threshold,
        no_api=args.no_api,
        state_url=args.state_url,
    )
    config = resolved(config, cli)  # the one place the command line meets the file: settings say it from here on
    load = partial(_load_resolved, cli=cli)
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

        start = partial(Proxy.start, config, api_token=token, config_path=_config_file(args), load=load)
        return _exit_0(partial(serve_shared, start, Path(args.shared_socket), restarted=args.shared_restarted))
    if args.shared or (config.settings.shared and args.transport == "stdio"):
        if args.transport != "stdio":
            print("claimcheck: --shared serves over stdio only (it relays to the shared claimcheck)", file=sys.stderr)
            return EXIT_CONFIG
        from server.upstream.shared_relay import relay_main

        return relay_main(argv)
    start = partial(Proxy.start, config, api_token=token, config_path=_config_file(args), load=load)
    return _exit_0(partial(serve, start, args.transport, args.host, args.port, auth, oauth))


def _exit_0(run: Callable[[], Awaitable[None]]) -> Step:
    async def step() -> int:
        await run()
        return 0

    return step


def _bearer_tokens(args: argparse.Namespace, env_token: str | None) -> Tokens | None:
    """The tokens an HTTP/SSE request must carry one of, or None when any request is served."""
    if env_token is not None and args.transport != "stdio" and len(env_token.encode()) < MIN_TOKEN_BYTES:
        logging.getLogger(__name__).warning(
            "the token in $%s is under %d bytes: whoever reaches the port may guess it; make one with "
            "`openssl rand -hex 32` (a tokens file refuses shorter ones)",
            args.auth_token_env,
            MIN_TOKEN_BYTES,
        )
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


def _config_file(args: argparse.Namespace) -> Path:
    """The file `serve` read its config from, watched while it runs (`server.reload`)."""
    return given_path(args.config) if args.config else default_config_path()


def _load_resolved(path: Path, *, cli: CliOverrides) -> Config:
    """The config file read again (`server.reload`), the command line merged in as at start."""
    return resolved(load_config(path), cli)


def _config_if_any() -> Config:
    """The default config when there is one (for its stateDir), else the defaults."""
    return load_config() if default_config_path().exists() else Config()


async def _print_tools(config: Config, wait_secs: float) -> int:
    """Wait for every server (up to `wait_secs`), print each one's state and the tools; 1 if any is not ready."""
    supervisors = logging.getLogger("server.downstream.server")
    if supervisors.getEffectiveLevel() > logging.INFO:  # each server's state and error are printed below, once;
        supervisors.setLevel(logging.CRITICAL)  # its supervisor's "trying again in 1 s" is for serving
    # a server's own connect timeout ends after this wait: one still starting then is reported once, here
    failures: list[str] = []
    config = resolved(config, CliOverrides(no_api=True))
    async with Proxy.start(config, connect_timeout=wait_secs + 1, serving=False) as proxy:
        with anyio.move_on_after(wait_secs):
            await proxy.pool.settled()
        await proxy.pool.listable()  # the routes are built (at most startupWaitSecs)
        for downstream in proxy.pool.downstreams:
            served = sum(route.downstream is downstream for route in proxy.pool.routes.values())
            line = f"{downstream.name}: {downstream.state}, {plural(served, 'tool')}"
            if served != len(downstream.tools):
                line += f" (of {len(downstream.tools)} offered)"
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
        print(f"claimcheck: {plural(len(failures), 'server')} not ready: {'; '.join(failures)}", file=sys.stderr)
        return EXIT_SERVER_FAILED
    return 0
