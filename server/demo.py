"""`claimcheck demo`: a scripted MCP client drives a real claimcheck process in front of the demo server."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

__all__ = ["demo_config", "run_demo"]


def demo_config() -> dict[str, object]:
    """A config with the bundled demo server as its only downstream."""
    return {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "server.demo_server"]}}}


def _text(result: types.CallToolResult) -> str:
    parts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return " | ".join(parts)


def _say(step: str, detail: str = "") -> None:
    print(f"\n== {step}")
    if detail:
        print(detail)


async def run_demo() -> int:
    with tempfile.TemporaryDirectory(prefix="claimcheck-demo-") as tmp:
        config_path = Path(tmp) / "config.json"
        config_path.write_text(json.dumps(demo_config(), indent=2), encoding="utf-8")
        claimcheck = StdioServerParameters(
            command=sys.executable, args=["-m", "server", "serve", "--config", str(config_path)]
        )
        _say("Starting claimcheck over stdio", f"config: {json.dumps(demo_config())}")
        async with Client(claimcheck, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            _say(f"tools/list -> {len(tools)} tools", "\n".join(f"  {t.name}" for t in tools))

            result = await client.call_tool("demo__echo", {"text": "hello through claimcheck"})
            _say("demo__echo", f"  -> {_text(result)!r}")

            updates: list[str] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                updates.append(message or f"{progress}/{total}")

            started = time.perf_counter()
            result = await client.call_tool("demo__slow", {"seconds": 2}, progress_callback=on_progress)
            _say(
                "demo__slow(seconds=2), progress relayed from the downstream",
                "\n".join(f"  progress: {u}" for u in updates)
                + f"\n  -> {_text(result)!r} after {time.perf_counter() - started:.1f} s",
            )

            result = await client.call_tool("demo__big", {"kb": 64})
            text = _text(result)
            _say("demo__big(kb=64)", f"  -> {len(text):,} characters, first line {text.splitlines()[0]!r}")

            result = await client.call_tool("demo__fail", {"message": "disk on fire"})
            _say(
                "demo__fail: a downstream error arrives as an error result",
                f"  isError={result.is_error}: {_text(result)}",
            )

            result = await client.call_tool("demo__crash", {})
            _say("demo__crash: the downstream process dies mid-call", f"  isError={result.is_error}: {_text(result)}")
            result = await client.call_tool("demo__echo", {"text": "back again"})
            _say("demo__echo after the crash: claimcheck restarted the server", f"  -> {_text(result)!r}")

            result = await client.call_tool("demo__nope", {})
            _say("an unknown tool", f"  isError={result.is_error}: {_text(result)}")
        _say("Done", "claimcheck and the demo server have exited.")
    return 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(run_demo))
