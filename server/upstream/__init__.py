"""Requests from clients: the MCP surface, the stdio/HTTP/SSE transports, forwarding, MCP Tasks, extraction glue.

Modules here compose the proxy with the wings below it, so they may import `server.proxy`, `server.status`,
`server.handles`, `server.downstream`, the root modules (`config`, `errors`, `framing`, `version`) and
`extraction`/`fs_sandbox`; nothing below imports this wing (tests/test_layering.py).
"""
