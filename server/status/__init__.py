"""What people and tools outside MCP see: the status API and dashboard, live events, history, `claimcheck ps`.

The HTTP edge it serves behind (request deadline, one Authorization header, body limit) is every claimcheck
server's, so it is a root module: `server.http_edge`.

May import `server.handles`, `server.downstream`, the root modules (`config`, `errors`, `framing`, `version`)
and `extraction`/`fs_sandbox`; never `server.upstream` or `server.proxy` (tests/test_layering.py).
"""
