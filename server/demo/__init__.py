"""The built-in demo: `server.demo.server` is a small MCP server, `server.demo.client` drives `claimcheck demo`.

It sits on top like `server.cli` and may import anything in `server`; nothing else imports it.
"""
