"""Extraction quality on a real model, against what clients do today.

Per case (bench/extraction_cases.py: logs, JSON, tables, code search results, git history, a wide CSV table, a
minified JavaScript bundle, a multi-file diff), with the same model and the same question:
  baseline    what a client does without claimcheck: the output cut to its first 25 000 tokens (Claude Code's
              limit) or to what the model's context leaves, whichever is smaller, and the question asked over it;
  claimcheck  a real claimcheck proxy (in this process) in front of a downstream that returns the output, and
              `tool_output(mode=auto)` with the question, extraction through `settings.extraction` provider openai
              pointing at the model;
  oracle      the whole output in the prompt, where it fits the model's context (where the baseline was not cut,
              that is the baseline's own prompt, so its answer is reused).
Every arm's answer is judged the same way (bench/extraction_scoring.py): on its text without the EVIDENCE quotes,
the facts found, the answer-shaped items that are wrong picks from the output or invented, and the facts credited
(none where the wrong and invented items outnumber the facts found). Reported per case and in total, and in total
again over the cases whose answer lies past the start (bench/extraction_report.py): facts credited and found (of
those the case requires), wrong and invented items, evidence quotes verified / unverified (baseline and oracle
quotes are checked against the output the same way claimcheck checks its own), strategy, wall time, model tokens
in/out, and the context saved (output tokens / tokens of the answer the client gets).

The model comes from the environment (any OpenAI-compatible endpoint):
    CLAIMCHECK_EVAL_BASE_URL   e.g. http://127.0.0.1:8080/v1
    CLAIMCHECK_EVAL_MODEL      the model name
    CLAIMCHECK_EVAL_API_KEY    optional
    CLAIMCHECK_EVAL_CONTEXT    the model's context window in its own tokens (default 8192)
or from `--local-model`, which starts bench/local_model.py's server for the run and stops it after.

Run:  python bench/extraction_eval.py --local-model [--only NAME] [--size 1.0] [--json PATH]
Without a model it prints that it was skipped and exits 0. `--json` is rewritten after every case, as
{"run": {model, context, size, threads, commit, date}, "results": [...]}; `--report` prints the tables of such files
(or of the older bare lists of results).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

from extraction_cases import CASES, Case  # noqa: E402
from extraction_report import Arm, Result, Run, dump, load, report  # noqa: E402
from extraction_scoring import count_quotes, judge, score_tool_output, verified_answer  # noqa: E402

from extraction import Completion, Message, count_tokens  # noqa: E402
from extraction.openai import OpenAICompatible  # noqa: E402

CLIENT_CUT_TOKENS = 25_000  # what Claude Code keeps of a tool result
ANSWER_TOKENS = 512  # the most tokens any arm may answer with (claimcheck: maxOutputTokens); --answer-tokens
PROMPT_SLACK = 48  # template tokens around the messages
DIRECT_SYSTEM = """You answer a question about the output of a tool call. Answer only from the output. Be precise; \
keep numbers, names, paths and ids exactly as written.
After the answer, add a line EVIDENCE: and then one line per supporting line of the output, copied verbatim and \
wrapped in double quotes, like: > "exact text from the output\""""


class ModelTokens:
    """The served model's own tokenizer (llama-cpp-python's /extras endpoints); cl100k × 1.5 where absent."""

    def __init__(self, base_url: str, model: str) -> None:
        self.root = re.sub(r"/v1/?$", "", base_url)
        self.model = model
        self.available = True

    async def tokenize(self, text: str) -> list[int] | None:
        if self.available:
            async with httpx2.AsyncClient(timeout=120) as http:
                answer = await http.post(f"{self.root}/extras/tokenize", json={"input": text, "model": self.model})
            if answer.status_code == 200:
                return list(answer.json()["tokens"])
            self.available = False
        return None

    async def count(self, text: str) -> int:
        tokens = await self.tokenize(text)
        return len(tokens) if tokens is not None else int(count_tokens(text) * 1.5)

    async def head(self, text: str, limit: int) -> tuple[str, int]:
        """The longest start of `text` within `limit` model tokens, and how many tokens the whole has."""
        tokens = await self.tokenize(text)
        if tokens is None:
            total = int(count_tokens(text) * 1.5)
            return text[: int(len(text) * min(1.0, limit / max(total, 1)))], total
        if len(tokens) <= limit:
            return text, len(tokens)
        async with httpx2.AsyncClient(timeout=120) as http:
            answer = await http.post(
                f"{self.root}/extras/detokenize", json={"tokens": tokens[:limit], "model": self.model}
            )
        answer.raise_for_status()
        head = str(answer.json()["text"])
        return head[: head.rfind("\n") + 1] or head, len(tokens)  # whole lines, as a client's cut would keep


@dataclass(frozen=True)
class Model:
    base_url: str
    name: str
    context: int
    api_key: str | None
    runtime: str


async def ask_directly(model: Model, text: str, question: str, note: str) -> tuple[Completion, float]:
    llm = OpenAICompatible(
        model.base_url, model.name, api_key=model.api_key, context_window=model.context, timeout_secs=1800
    )
    await llm.prepare()  # its tokenizer counts the prompt where the stream reports no usage (llama-cpp-python)
    user = f"TOOL OUTPUT{note}:\n{text}\n\nQUESTION: {question}"
    started = time.perf_counter()
    completion = await llm.complete([Message("system", DIRECT_SYSTEM), Message("user", user)], max_tokens=ANSWER_TOKENS)
    return completion, time.perf_counter() - started


def direct_arm(
    completion: Completion, seconds: float, output: str, case: Case, facts: list[str], client_tokens: int, note: str
) -> Arm:
    answer, _ = verified_answer(completion.text, output)
    quotes = count_quotes(answer)
    judged = judge(completion.text, facts, question=case.question, output=output, shape=case.shape)
    return Arm(
        found=judged.found,
        wrong=judged.wrong,
        invented=judged.invented,
        credited=judged.credited,
        verified=quotes.verified,
        unverified=quotes.unverified,
        strategy="cut" if "cut" in note else "whole",
        seconds=round(seconds, 1),
        tokens_in=completion.input_tokens,
        tokens_out=completion.output_tokens,
        client_tokens=client_tokens,
        answer=completion.text,
        note=note,
    )


async def run_claimcheck(model: Model, case: Case, output: str, facts: list[str], threshold: int, context: int) -> Arm:
    from tests.support.handles import Downstream, client_of, handle_in
    from tests.support.proxies import running_proxy, text_of

    # What a user of a local model writes: where it is and what it is called. The window, the requests in flight
    # and the time limits are claimcheck's defaults (learned from the endpoint); the answer's bound is every arm's.
    extraction: dict[str, Any] = {
        "provider": "openai",
        "baseUrl": model.base_url,
        "model": model.name,
        "maxOutputTokens": ANSWER_TOKENS,
    }
    if context != model.context:  # --claimcheck-context: told a window, not left to learn it
        extraction["contextWindow"] = context
    if model.api_key:
        os.environ["CLAIMCHECK_EVAL_KEY_VALUE"] = model.api_key
        extraction["apiKeyEnv"] = "CLAIMCHECK_EVAL_KEY_VALUE"
    down = Downstream()
    down.server.add_tool(lambda: output, name="out", structured_output=False)
    settings = {
        "extraction": extraction,
        # an output under the threshold would come back whole, with no handle: the small cases are stored too
        "asyncTokenThreshold": min(threshold, count_tokens(output) // 2),
        "asyncTimeoutSecs": 600,
        "api": {"enabled": False},
    }
    async with (
        running_proxy({"down": down.server}, settings=settings) as proxy,
        client_of(proxy) as client,
    ):
        handle = handle_in(text_of(await client.call_tool("down__out", {})))
        started = time.perf_counter()
        result = text_of(await client.call_tool("tool_output", {"handle": handle, "extract": case.question}))
        seconds = time.perf_counter() - started
        usage = proxy.usage_totals()
    scored = score_tool_output(result, facts, case.question, output=output, shape=case.shape)
    return Arm(
        found=scored.judged.found,
        wrong=scored.judged.wrong,
        invented=scored.judged.invented,
        credited=scored.judged.credited,
        verified=scored.quotes.verified,
        unverified=scored.quotes.unverified,
        located=scored.quotes.located,
        missing=scored.quotes.missing,
        strategy=scored.strategy + (" (fallback)" if scored.fallback is not None else ""),
        seconds=round(seconds, 1),
        tokens_in=usage["inputTokens"],
        tokens_out=usage["outputTokens"],
        client_tokens=count_tokens(result),
        answer=scored.body[:4000] if scored.fallback is None else result[:600],
        note=f"fallback: {scored.fallback[:300]}" if scored.fallback is not None else "",
    )


async def run_case(
    model: Model,
    case: Case,
    output: str,
    facts: list[str],
    threshold: int,
    cc_context: int,
    earlier: Result | None = None,
) -> Result:
    """The case's three arms; with `earlier` (the same case, model, window and size, from `--baseline-from`), its
    baseline and oracle are taken from there: their prompts hold no claimcheck code, so only claimcheck is asked."""
    if earlier is not None:
        result = Result(case.name, case.kind, case.where, facts, count_tokens(output), earlier.model_tokens)
        result.arms["baseline"] = earlier.arms["baseline"]
        print(f"  baseline   {progress(earlier.arms['baseline'], facts)} (from the earlier run)", file=sys.stderr)
        arm = await run_claimcheck(model, case, output, facts, threshold, cc_context)
        result.arms["claimcheck"] = arm
        print(f"  claimcheck {progress(arm, facts)} in {arm.seconds} s ({arm.strategy})", file=sys.stderr)
        if "oracle" in earlier.arms:
            result.arms["oracle"] = earlier.arms["oracle"]
        return result
    tokens = ModelTokens(model.base_url, model.name)
    prompt = await tokens.count(DIRECT_SYSTEM + case.question) + PROMPT_SLACK + 40
    room = model.context - ANSWER_TOKENS - prompt
    cut = min(CLIENT_CUT_TOKENS, room)
    shown, total = await tokens.head(output, cut)
    result = Result(case.name, case.kind, case.where, facts, count_tokens(output), total)
    note = ""
    if shown != output:
        omitted = output.count("\n") - shown.count("\n")
        shown += f"[... output truncated: {omitted} more lines not shown ...]\n"
        note = f" (cut to its first {cut} tokens of {total})"
    completion, seconds = await ask_directly(model, shown, case.question, note)
    baseline = direct_arm(completion, seconds, output, case, facts, count_tokens(shown), note)
    result.arms["baseline"] = baseline
    print(f"  baseline   {progress(baseline, facts)} in {baseline.seconds} s", file=sys.stderr)
    arm = await run_claimcheck(model, case, output, facts, threshold, cc_context)
    result.arms["claimcheck"] = arm
    print(f"  claimcheck {progress(arm, facts)} in {arm.seconds} s ({arm.strategy})", file=sys.stderr)
    if total <= room and not note:
        result.arms["oracle"] = Arm(**{**asdict(baseline), "strategy": "whole", "note": "same prompt as baseline"})
    elif total <= room:
        completion, seconds = await ask_directly(model, output, case.question, "")
        result.arms["oracle"] = direct_arm(completion, seconds, output, case, facts, count_tokens(output), "")
    return result


def progress(arm: Arm, facts: list[str]) -> str:
    judged = f"{len(arm.found)} found, {len(arm.wrong)} wrong, {len(arm.invented)} invented"
    return f"{len(arm.credited)}/{len(facts)} credited ({judged})"


@contextlib.contextmanager
def model_from(args: argparse.Namespace) -> Iterator[Model | None]:
    if args.local_model:
        import local_model

        with local_model.serve(args.model, args.context or 8192, args.threads) as served:
            yield Model(served.base_url, served.model, served.context, None, served.runtime)
        return
    base_url, name = os.environ.get("CLAIMCHECK_EVAL_BASE_URL"), os.environ.get("CLAIMCHECK_EVAL_MODEL")
    if not base_url or not name:
        yield None
        return
    context = args.context or int(os.environ.get("CLAIMCHECK_EVAL_CONTEXT", "8192"))
    yield Model(base_url, name, context, os.environ.get("CLAIMCHECK_EVAL_API_KEY"), "as served")


async def run_all(model: Model, selected: list[Case], args: argparse.Namespace, run: Run) -> list[Result]:
    results: list[Result] = []
    earlier: dict[str, Result] = {}
    if args.baseline_from:
        found, runs = load([args.baseline_from], args.size)
        measured = [(r.model, r.context, r.size) for r in runs]
        if measured != [(run.model, run.context, run.size)]:
            raise SystemExit(f"--baseline-from {args.baseline_from} measured {measured}, not this run's model")
        earlier = {result.case: result for result in found}
    with tempfile.TemporaryDirectory() as tmp:
        for case in selected:
            output, facts = case.make(Path(tmp), args.size)
            print(f"{case.name}: {count_tokens(output)} tokens", file=sys.stderr)
            cc_context = args.claimcheck_context or model.context
            kept = earlier.get(case.name)
            results.append(await run_case(model, case, output, facts, args.threshold, cc_context, kept))
            if args.json:  # written after every case, so a long run that is stopped keeps what it measured
                dump(args.json, run, results)
    return results


def run_of(model: Model, args: argparse.Namespace) -> Run:
    """What this run measures with: the model, its context, the size, llama.cpp's threads, the code's commit."""

    def git(*command: str) -> str:
        done = subprocess.run(["git", *command], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else "?"

    commit = git("rev-parse", "--short", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no") not in ("", "?"):
        commit += "-dirty"  # the code measured is not that commit's
    threads = args.threads or (os.cpu_count() if args.local_model else None)
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return Run(model.name, model.context, args.size, threads, commit, date)


def main() -> int:
    global ANSWER_TOKENS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", action="append", help="run only the named case(s), in the order given")
    parser.add_argument("--size", type=float, default=1.0, help="scale of every output (default 1.0)")
    parser.add_argument("--local-model", action="store_true", help="serve bench/local_model.py's model for the run")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="with --local-model: which weights")
    parser.add_argument("--context", type=int, help="the model's context window (default 8192)")
    parser.add_argument("--threads", type=int, help="with --local-model: llama.cpp threads (default: all cores)")
    parser.add_argument("--claimcheck-context", type=int, help="contextWindow given to claimcheck (default: --context)")
    parser.add_argument("--threshold", type=int, default=10_000, help="asyncTokenThreshold (default 10000)")
    parser.add_argument("--answer-tokens", type=int, default=ANSWER_TOKENS, help="max answer tokens, every arm")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--baseline-from",
        type=Path,
        help="take the baseline and oracle arms from an earlier --json run of the same model, window and size "
        "(they hold no claimcheck code); ask only claimcheck",
    )
    parser.add_argument("--report", type=Path, nargs="+", help="print the tables of earlier --json files, run nothing")
    args = parser.parse_args()
    by_name = {case.name: case for case in CASES}
    unknown = sorted(set(args.only or ()) - set(by_name))
    if unknown:
        parser.error(f"no such case: {', '.join(unknown)}")
    selected = [by_name[name] for name in args.only] if args.only else CASES  # --only runs in the order given
    ANSWER_TOKENS = args.answer_tokens
    if args.report:
        import local_model

        results, runs = load(args.report, args.size)
        if len(runs) < len(args.report):  # files of the older form say nothing of their run: the options do
            weights = local_model.WEIGHTS[args.model]
            runs.append(Run(weights.name, args.context or 8192, args.size, args.threads, "?", "?"))
        print(report(results, runs))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the model server is stopped on the way out
    with model_from(args) as model:
        if model is None:
            print("skipped: use --local-model, or set CLAIMCHECK_EVAL_BASE_URL and CLAIMCHECK_EVAL_MODEL")
            return 0
        started = time.perf_counter()
        run = run_of(model, args)
        results = anyio.run(run_all, model, selected, args, run)
        machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        print(report(results, [run], f"model served by {model.runtime} at {model.base_url}; {machine}"))
        print(f"whole eval: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
