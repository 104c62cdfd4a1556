"""The `claimcheck` command's entry point: a `serve --shared` relay before anything heavy is imported.

The relay (`server.upstream.shared_relay`) imports only the standard library, so a client that starts claimcheck
for every session gets its shared claimcheck's answers without paying for the SDK's import; every other command
goes to `server.cli`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from server.upstream.shared_relay import relay_main, wants_shared  # standard library only

    if wants_shared(args):
        return relay_main(args)
    from server.cli import main as cli_main

    return cli_main(args)
