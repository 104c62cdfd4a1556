"""`claimcheck demo`: a scripted MCP client drives a real claimcheck process in front of the demo server."""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

__all__ = ["demo_config", "run_demo"]


def demo_config() -> dict[str, object]:
    """A config with the bundled demo server as its only downstream; slow calls hand off after 1 s, and the
    first listing waits for the server however slow the machine (the demo lists once, at the start)."""
    return {
        "mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "server.demo.server"]}},
        "settings": {"asyncTimeoutSecs": 1, "startupWaitSecs": 60},
    }


def _text(result: types.CallToolResult) -> str:
    parts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return "\n".join(parts)


def _handle(text: str) -> str:
    match = re.search(r"session-[0-9a-f]+/[0-9a-f]+", text)
    if match is None:
        raise RuntimeError(f"claimcheck gave no handle: {text!r}")
    return match.group(0)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


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
            _say("demo__echo: a fast, small call passes through unchanged", f"  -> {_text(result)!r}")

            updates: list[str] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                updates.append(message or f"{progress}/{total}")

            started = time.perf_counter()
            result = await client.call_tool("demo__slow", {"seconds": 4}, progress_callback=on_progress)
            handle = _handle(_text(result))
            _say(
                f"demo__slow(seconds=4): still running after 1 s, so it goes to the background "
                f"({time.perf_counter() - started:.1f} s)",
                "\n".join(f"  progress: {u}" for u in updates) + "\n" + _indent(_text(result)),
            )

            result = await client.call_tool("demo__echo", {"text": "other work meanwhile"})
            _say("demo__echo while it runs: the result carries a status footer", _indent(_text(result)))

            result = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
            _say(
                f"wait_for_tool_output: returns when it finishes, {time.perf_counter() - started:.1f} s after the call",
                _indent(_text(result)),
            )

            result = await client.call_tool("demo__big", {"kb": 512})
            big = _handle(_text(result))
            _say("demo__big(kb=512): too large for a context, so it is stored whole", _indent(_text(result)))

            result = await client.call_tool(
                "tool_output", {"handle": big, "mode": "slice", "slice": {"anchor": "00004000", "window": 200}}
            )
            _say("tool_output mode=slice around an anchor", _indent(_text(result)))

            result = await client.call_tool("list_tool_outputs", {})
            _say("list_tool_outputs", _indent(_text(result)))

            result = await client.call_tool("demo__fail", {"message": "disk on fire"})
            _say(
                "demo__fail: a downstream error arrives as an error result",
                f"  isError={result.is_error}: {_text(result)}",
            )

            result = await client.call_tool("demo__crash", {})
            _say("demo__crash: the downstream process dies mid-call", f"  isError={result.is_error}: {_text(result)}")
            result = await client.call_tool("demo__echo", {"text": "back again"})
            if "running in the background" in _text(result):  # the respawn itself can take over a second
                result = await client.call_tool("wait_for_tool_output", {"handles": [_handle(_text(result))]})
            _say("demo__echo after the crash: claimcheck restarted the server", _indent(_text(result)))

            result = await client.call_tool("demo__nope", {})
            _say("an unknown tool", f"  isError={result.is_error}: {_text(result)}")
        _say("Done", "claimcheck and the demo server have exited.")
    return 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(run_demo))
