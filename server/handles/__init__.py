"""Calls and what they leave: sessions, handles, the output store and its run roots, messages, own tools, Read/Grep.

May import `server.downstream`, the root modules (`config`, `errors`, `framing`, `version`) and
`extraction`/`fs_sandbox`; never `server.status`, `server.proxy` or `server.upstream` (tests/test_layering.py).
"""
