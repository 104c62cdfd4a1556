"""What people and tools outside MCP see: the status API and dashboard, live events, history, `claimcheck ps`.

Also the HTTP edge every claimcheck server shares (`edges`: request deadline, one Authorization header, body
limit), which the upstream transports use for `/mcp` and `/sse` too.

May import `server.handles`, `server.downstream`, the root modules (`config`, `errors`, `framing`, `version`)
and `extraction`/`fs_sandbox`; never `server.upstream` or `server.proxy` (tests/test_layering.py).
"""
