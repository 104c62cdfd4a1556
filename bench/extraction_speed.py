"""Extraction numbers: map parallelism with a fixed-latency LLM, and context saved on real outputs.

Run from the repo root in the project's venv:  python bench/extraction_speed.py [--json PATH]

(a) Map parallelism: a fake LLM that answers every completion after exactly L seconds; a document cut
    into 8 chunks; wall time of `full_chunked` at concurrency 1, 4, 8 and 16, as a multiple of L.
    Target: ≤ 2.5 × L at concurrency ≥ 8 (8 parallel maps + 1 reduce = 2 × L ideally).
(b) Context saved: claimcheck in memory, in front of a downstream that returns real outputs (the git
    log of a generated repository, a JSON dump, a syslog-style log); `tool_output` full-chunked with a
    deterministic OpenAI-compatible server on 127.0.0.1 that quotes the lines matching the question.
    Reported: tokens the model receives / tokens of the output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from extraction import Completion, Document, Message, Policy, TextSource, ToolSpec, Usage, count_tokens  # noqa: E402
from extraction.strategies import full_chunked, plan_chunks  # noqa: E402

NONCE = re.compile(r"claimcheck-([0-9a-f]+)-FINAL")


class FixedLatencyLLM:
    model = "fixed-latency"
    supports_tools = False

    def __init__(self, latency: float, context_window: int) -> None:
        self.latency = latency
        self.context_window = context_window
        self.max_output_tokens = 200

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        await anyio.sleep(self.latency)
        nonce = NONCE.search(messages[0].content).group(1)  # type: ignore[union-attr]
        return Completion(f'<claimcheck-{nonce}-FINAL format="text">found something</claimcheck-{nonce}-FINAL>')


async def map_parallelism(latency: float) -> list[dict[str, Any]]:
    text = "".join(f"line {i:06d} of a long document with several words\n" for i in range(4000))
    source = TextSource.of(text)
    tokens = count_tokens(text)
    document = Document("bench__doc", "{}", "h", len(text), 4000, tokens)
    rows = []
    for concurrency in (1, 4, 8, 16):
        llm = FixedLatencyLLM(latency, context_window=0)
        # Size the window so the document needs exactly 8 chunks.
        for window in range(tokens // 6, tokens, 50):
            llm.context_window = window
            if len(plan_chunks(source, llm, document, "x", Policy(), "00000000")) == 8:
                break
        policy = Policy(concurrency=concurrency, max_chunks_hard=64)
        started = time.perf_counter()
        result = await full_chunked(llm, Usage(), document, source, "what is in it", policy, "00000000")
        wall = time.perf_counter() - started
        rows.append({"concurrency": concurrency, "chunks": result.chunks_total, "wall_s": wall, "x_L": wall / latency})
    return rows


def git_log_output(directory: Path) -> str:
    repo = directory / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com"}
    env |= {"GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    areas = ["auth", "billing", "search", "ui", "api", "db"]
    for i in range(600):
        area = areas[i % len(areas)]
        path = repo / area / f"file{i % 7}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# change {i}\n", encoding="utf-8")
        git("add", "-A")
        git(
            "commit",
            "-q",
            "-m",
            f"{area}: change number {i}",
            "--date",
            f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00",
        )
    return git("log", "--stat")


def json_dump_output() -> str:
    users = [
        {"id": i, "name": f"user{i}", "country": ["DE", "FR", "US", "JP"][i % 4], "admin": i % 97 == 0}
        for i in range(5000)
    ]
    return json.dumps({"users": users}, indent=2)


def log_output() -> str:
    lines = []
    for i in range(40000):
        level = "ERROR" if i % 4001 == 0 else "WARN" if i % 997 == 0 else "INFO"
        lines.append(f"2026-11-22T10:{i // 600 % 60:02d}:{i % 60:02d} host{i % 5} app[{i % 300}]: {level} op={i}")
    return "\n".join(lines) + "\n"


async def context_saved() -> list[dict[str, Any]]:
    from tests.support.extraction import fake_openai
    from tests.support.handles import Downstream, client_of, handle_in
    from tests.support.proxies import running_proxy, text_of  # the tests' in-memory proxy

    with tempfile.TemporaryDirectory() as tmp:
        outputs = {
            "git log --stat (600 commits)": (git_log_output(Path(tmp)), "commits that touched auth", "auth:"),
            "JSON dump (5000 users)": (json_dump_output(), 'users with "admin": true', '"admin": true'),
            "syslog-style log (40000 lines)": (log_output(), "every ERROR line", "ERROR"),
        }
    rows = []
    async with fake_openai() as (url, fake):
        for name, (output, question, keyword) in outputs.items():
            fake.keyword = keyword
            down = Downstream()
            down.server.add_tool(lambda output=output: output, name="out", structured_output=False)
            settings = {"extraction": {"provider": "openai", "baseUrl": url, "model": "bench", "contextWindow": 32000}}
            async with running_proxy({"down": down.server}, settings=settings) as proxy, client_of(proxy) as client:
                handle = handle_in(text_of(await client.call_tool("down__out", {})))
                answer = text_of(
                    await client.call_tool(
                        "tool_output", {"handle": handle, "extract": question, "mode": "full-chunked"}
                    )
                )
            rows.append(
                {
                    "output": name,
                    "question": question,
                    "output_tokens": count_tokens(output),
                    "answer_tokens": count_tokens(answer),
                }
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--latency", type=float, default=0.2, help="fake LLM latency L in seconds (default 0.2)")
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args(argv)
    parallel = anyio.run(map_parallelism, args.latency)
    saved = anyio.run(context_saved)
    print(f"### Map parallelism (L = {args.latency:g} s, 8 chunks)\n")
    print("| concurrency | chunks | wall s | × L |\n|---:|---:|---:|---:|")
    for row in parallel:
        print(f"| {row['concurrency']} | {row['chunks']} | {row['wall_s']:.3f} | {row['x_L']:.2f} |")
    met = all(row["x_L"] <= 2.5 for row in parallel if row["concurrency"] >= 8)
    print(f"\nTarget ≤ 2.5 × L at concurrency ≥ 8: **{'met' if met else 'NOT met'}**\n")
    print("### Context saved\n")
    print("| output | question | output tokens | answer tokens | answer / output |\n|---|---|---:|---:|---:|")
    for row in saved:
        ratio = row["answer_tokens"] / row["output_tokens"]
        print(
            f"| {row['output']} | {row['question']} | {row['output_tokens']} | {row['answer_tokens']} | {ratio:.4f} |"
        )
    machine = f"{os.cpu_count()} vCPU, {platform.system()} {platform.machine()}, Python {platform.python_version()}"
    print(f"\nmachine: {machine}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"parallel": parallel, "saved": saved}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
