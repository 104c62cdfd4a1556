#!/usr/bin/env bash
# Create bench/.venv-fastmcp with FastMCP in it, for path (c) of bench/overhead.py.
# FastMCP is a bench-only comparison target: it is never a dependency of claimcheck and never enters .venv.
# Usage: bash bench/setup_fastmcp.sh [FASTMCP_SPEC]   (default: fastmcp, i.e. the newest release pip picks)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-fastmcp"
spec="${1:-fastmcp}"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet --upgrade "$spec"
"$venv/bin/python" - <<'PY'
import sys
from importlib.metadata import version

print(f"bench/.venv-fastmcp: Python {sys.version.split()[0]}, fastmcp {version('fastmcp')}, mcp {version('mcp')}")
PY
