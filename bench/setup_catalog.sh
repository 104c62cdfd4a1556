#!/usr/bin/env bash
# The PyPI servers bench/catalog.py puts behind claimcheck: mcp-server-git, mcp-server-fetch and mcp-server-time, in their own venv
# (.cache/py-peers, git-ignored). The npm servers are installed by tests/support/peers.py on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .cache/py-peers/bin/mcp-server-time ]; then
  python3 -m venv .cache/py-peers
  .cache/py-peers/bin/pip install -q mcp-server-git mcp-server-fetch mcp-server-time
fi
