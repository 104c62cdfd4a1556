"""Extraction quality against a real model: questions about real tool outputs, with facts to find.

Each case is an output (generated deterministically, or read off this machine), a question, and the
facts a good answer must contain (computed from the output itself, so they hold on any machine).
claimcheck runs in memory in front of a downstream that returns the output; the question goes
through `tool_output(mode=auto)` to the model given by the environment:

    CLAIMCHECK_EVAL_BASE_URL   e.g. http://127.0.0.1:8080/v1 (any OpenAI-compatible endpoint)
    CLAIMCHECK_EVAL_MODEL      the model name
    CLAIMCHECK_EVAL_API_KEY    optional
    CLAIMCHECK_EVAL_CONTEXT    optional context window in tokens (default 32000)

Run:  python bench/extraction_eval.py [--only NAME] [--json PATH]
Without CLAIMCHECK_EVAL_BASE_URL it prints that it was skipped and exits 0. Reported per case: facts
found, quotes verified and unverified, the strategy used, and the answer's size.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from extraction import count_tokens  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    question: str
    output: Callable[[Path], str]
    facts: Callable[[str], list[str]]


def _git_repo(tmp: Path) -> str:
    repo = tmp / "repo"
    if not repo.exists():
        repo.mkdir()
        env = {**os.environ, "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}
        authors = [("Ada", "ada@example.com"), ("Linus", "linus@example.com"), ("Grace", "grace@example.com")]
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        for i in range(400):
            area = ["auth", "billing", "search", "ui", "api"][i % 5]
            (repo / f"{area}.py").write_text(f"# {i}\n", encoding="utf-8")
            name, email = authors[i % 3]
            message = f"{area}: change {i}" + (" (fixes CVE-2026-1234)" if i == 217 else "")
            date = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T09:00:00"
            subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
            subprocess.run(
                ["git", "commit", "-q", "-m", message, "--date", date, "--author", f"{name} <{email}>"],
                cwd=repo,
                env=env,
                check=True,
            )
    return subprocess.run(["git", "log", "--stat"], cwd=repo, check=True, capture_output=True, text=True).stdout


def _users(_: Path) -> str:
    countries = ["DE", "FR", "US", "JP", "BR"]
    users = [
        {"id": i, "name": f"user{i:04d}", "country": countries[i % 5], "admin": i in (7, 1234, 3999), "plan": "pro"}
        for i in range(4000)
    ]
    return json.dumps({"users": users}, indent=2)


def _log(_: Path) -> str:
    lines = []
    for i in range(30000):
        level = "ERROR" if i in (4242, 17000, 29999) else "WARN" if i % 2500 == 0 else "INFO"
        detail = {4242: "disk full on /var/lib/db", 17000: "TLS handshake failed with 10.1.2.3", 29999: "OOM killed"}
        message = detail.get(i, f"request {i} served in {i % 113} ms")
        lines.append(f"2026-11-22T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d} web-{i % 4} {level} {message}")
    return "\n".join(lines) + "\n"


def _pip_list(_: Path) -> str:
    return (
        subprocess.run(
            [sys.executable, "-m", "pip", "list", "--format", "columns"], check=True, capture_output=True, text=True
        ).stdout
        * 20
    )  # repeated so it is large; the facts stay the same


def _license(_: Path) -> str:
    path = Path("/usr/share/common-licenses/GPL-3")
    return path.read_text(encoding="utf-8") * 3 if path.exists() else "GNU GENERAL PUBLIC LICENSE Version 3\n" * 2000


def _csv(_: Path) -> str:
    rows = ["order_id,customer,amount_eur,status"]
    rows += [
        f"{i},cust{i % 50:02d},{(i * 37) % 1000}.{i % 100:02d},{'refunded' if i % 611 == 0 else 'paid'}"
        for i in range(1, 20000)
    ]
    return "\n".join(rows) + "\n"


CASES = [
    Case(
        "git-cve",
        "Which commit mentions a CVE, and what is its message?",
        _git_repo,
        lambda o: ["CVE-2026-1234", "change 217"],
    ),
    Case(
        "git-authors",
        "Who are the authors of the commits? List their names.",
        _git_repo,
        lambda o: ["Ada", "Linus", "Grace"],
    ),
    Case("git-first", "What is the message of the oldest commit?", _git_repo, lambda o: ["auth: change 0"]),
    Case("git-newest", "What is the message of the newest commit?", _git_repo, lambda o: ["api: change 399"]),
    Case(
        "json-admins",
        "Which users are admins? Give their names.",
        _users,
        lambda o: ["user0007", "user1234", "user3999"],
    ),
    Case("json-count", "How many users are there in total?", _users, lambda o: ["4000"]),
    Case("json-plan", "Which plan do the users have?", _users, lambda o: ["pro"]),
    Case("log-errors", "List every ERROR with its message.", _log, lambda o: ["disk full", "TLS handshake", "OOM"]),
    Case("log-tls-ip", "Which IP address did the TLS handshake fail with?", _log, lambda o: ["10.1.2.3"]),
    Case("log-hosts", "Which hosts appear in the log?", _log, lambda o: ["web-0", "web-1", "web-2", "web-3"]),
    Case("pip-pydantic", "Which version of pydantic is installed?", _pip_list, lambda o: [version("pydantic")]),
    Case("pip-anyio", "Is anyio installed, and in which version?", _pip_list, lambda o: [version("anyio")]),
    Case(
        "license-warranty",
        "What does the license say under 'Disclaimer of Warranty'? Give the section number.",
        _license,
        lambda o: ["15"],
    ),
    Case("csv-refunds", "Which order ids were refunded?", _csv, lambda o: [str(i) for i in range(611, 20000, 611)][:5]),
    Case(
        "csv-header",
        "What are the column names of this CSV?",
        _csv,
        lambda o: ["order_id", "customer", "amount_eur", "status"],
    ),
]


async def run_case(
    case: Case, output: str, base_url: str, model: str, api_key: str | None, context: int
) -> dict[str, Any]:
    from support import running_proxy, text_of
    from test_handles import Downstream, client_of, handle_in

    if api_key:
        os.environ["CLAIMCHECK_EVAL_KEY_VALUE"] = api_key
    extraction = {"provider": "openai", "baseUrl": base_url, "model": model, "contextWindow": context}
    if api_key:
        extraction["apiKeyEnv"] = "CLAIMCHECK_EVAL_KEY_VALUE"
    down = Downstream()
    down.server.add_tool(lambda: output, name="out", structured_output=False)
    async with (
        running_proxy({"down": down.server}, settings={"extraction": extraction}) as proxy,
        client_of(proxy) as client,
    ):
        handle = handle_in(text_of(await client.call_tool("down__out", {})))
        answer = text_of(await client.call_tool("tool_output", {"handle": handle, "extract": case.question}))
    facts = case.facts(output)
    found = [fact for fact in facts if fact.lower() in answer.lower()]
    strategy = re.search(r"STRATEGY:([\w-]+)", answer)
    return {
        "case": case.name,
        "strategy": strategy.group(1) if strategy else "?",
        "facts": len(facts),
        "found": len(found),
        "verified_quotes": len(re.findall(r"\(chars \d+-\d+\)", answer)),
        "unverified_quotes": answer.count("(unverified: not in the stored output)"),
        "output_tokens": count_tokens(output),
        "answer_tokens": count_tokens(answer),
        "fell_back": "fallback to truncate" in answer,
    }


async def run_all(
    selected: list[Case], base_url: str, model: str, api_key: str | None, context: int
) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in selected:
            output = case.output(Path(tmp))
            results.append(await run_case(case, output, base_url, model, api_key, context))
            print(json.dumps(results[-1]), file=sys.stderr)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", action="append", help="run only the named case(s)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base_url, model = os.environ.get("CLAIMCHECK_EVAL_BASE_URL"), os.environ.get("CLAIMCHECK_EVAL_MODEL")
    if not base_url or not model:
        print("skipped: set CLAIMCHECK_EVAL_BASE_URL and CLAIMCHECK_EVAL_MODEL to an OpenAI-compatible endpoint")
        return 0
    selected = [case for case in CASES if not args.only or case.name in args.only]
    context = int(os.environ.get("CLAIMCHECK_EVAL_CONTEXT", "32000"))
    results = anyio.run(run_all, selected, base_url, model, os.environ.get("CLAIMCHECK_EVAL_API_KEY"), context)
    print("| case | strategy | facts found | verified quotes | unverified quotes | output tokens | answer tokens |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['case']} | {r['strategy']} | {r['found']}/{r['facts']} | {r['verified_quotes']} "
            f"| {r['unverified_quotes']} | {r['output_tokens']} | {r['answer_tokens']} |"
        )
    total, found = sum(r["facts"] for r in results), sum(r["found"] for r in results)
    print(f"\nfacts found: {found}/{total} ({found / max(total, 1):.0%}); model {model} at {base_url}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
