"""What people and tools outside MCP see: the status API and dashboard, live events, history, `claimcheck ps`.

May import `server.handles`, `server.downstream`, the root modules (`config`, `errors`, `framing`, `version`)
and `extraction`/`fs_sandbox`; never `server.upstream` or `server.proxy` (tests/test_layering.py).
"""
