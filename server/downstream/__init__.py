"""The servers behind claimcheck: connections (stdio, HTTP, SSE), the pool, listings, offerings (resources and
prompts), naming, relays.

May import only the root modules (`config`, `errors`, `framing`, `version`) and `extraction`/`fs_sandbox`;
never another wing (tests/test_layering.py).
"""
