"""The `claimcheck` command's entry point: what can start before anything heavy is imported.

A `serve --shared` relay (`server.upstream.shared_relay`) imports only the standard library, so a client that starts
claimcheck for every session gets its shared claimcheck's answers without paying for the SDK's import. `serve` over
stdio spawns its stdio servers first (`server.downstream.processes`, the head start) and imports the SDK while they
start. Everything else goes straight to `server.cli`.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.config import Config

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from server.upstream.shared_relay import relay_main, wants_shared  # standard library only

    if wants_shared(args):
        return relay_main(args)
    config = _config_to_start_ahead(args)
    if config is None:
        from server.cli import main as cli_main

        return cli_main(args)
    import anyio

    return anyio.run(_serve_ahead, args, config)


def _config_to_start_ahead(argv: list[str]) -> Config | None:
    """The config whose stdio servers this command may spawn ahead, or None (another command, a config that does not
    load: `server.cli` says why)."""
    from server.cli_args import parse, starts_servers_ahead
    from server.config import load_config
    from server.errors import ConfigError

    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            args = parse(argv)
    except SystemExit:
        return None  # --help, --version, a mistake: server.cli parses again and says it
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
