"""Results of bench/extraction_eval.py: what one run measured, its `--json` file, and the tables printed from it.

A `--json` file is `{"run": {model, context, size, threads, commit, date}, "results": [...]}`, one result per case
with an arm per way of answering (baseline, claimcheck, oracle). Files of the older form (the bare list of results)
still load: their arms are judged again from the answers they stored, as the current scorer judges.

The tables count credited facts (found and not outnumbered by wrong or invented items, bench/extraction_scoring.py)
beside the facts found, the wrong and invented items, and give the totals again over the cases whose answer lies
past the start of the output, where cutting the output cannot work.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from extraction_cases import CASES
from extraction_scoring import judge

__all__ = ["Arm", "Result", "Run", "dump", "load", "report", "totals"]

ARMS = ("baseline", "claimcheck", "oracle")


@dataclass
class Arm:
    """One way of answering one case."""

    found: list[str]
    verified: int
    unverified: int
    strategy: str
    seconds: float
    tokens_in: int
    tokens_out: int
    client_tokens: int  # what enters the client model's context: the cut output, the whole output, or the answer
    answer: str
    note: str = ""
    wrong: list[str] = field(default_factory=list)  # answer-shaped items of the output that are no fact
    invented: list[str] = field(default_factory=list)  # answer-shaped items that are nowhere in the output
    credited: list[str] = field(default_factory=list)  # the facts found, or none when wrong + invented outnumber them
    located: int = 0  # lines claimcheck found holding the answer's values, where the model quoted nothing
    missing: int = 0  # the answer's values found nowhere in the output


@dataclass
class Result:
    case: str
    kind: str
    where: str
    facts: list[str]
    output_tokens: int  # cl100k, as claimcheck counts
    model_tokens: int  # the model's own tokenizer
    arms: dict[str, Arm] = field(default_factory=dict)


@dataclass(frozen=True)
class Run:
    """What a run was measured with."""

    model: str
    context: int
    size: float
    threads: int | None  # llama.cpp threads; None where the model is served elsewhere
    commit: str  # `git rev-parse --short HEAD`, "-dirty" when tracked files had changes
    date: str  # ISO 8601, UTC


def dump(path: Path, run: Run, results: Sequence[Result]) -> None:
    data = {"run": asdict(run), "results": [asdict(result) for result in results]}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def load(paths: Sequence[Path], size: float) -> tuple[list[Result], list[Run]]:
    """Results written by --json and the runs that wrote them (runs over different --only cases may be joined; a
    case in a later file wins). A file of the older form is taken as measured at `size`."""
    results: dict[str, Result] = {}
    runs: list[Run] = []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            runs.append(Run(**data["run"]))
            rows, at = data["results"], runs[-1].size
        else:
            rows, at = data, size
        for row in rows:
            stale = any("credited" not in arm for arm in row["arms"].values())
            arms = {name: Arm(**arm) for name, arm in row.pop("arms").items()}
            result = Result(**row, arms=arms)
            if stale:
                _judge_again(result, at)
            results[result.case] = result
    order = [case.name for case in CASES]
    return sorted(results.values(), key=lambda r: order.index(r.case) if r.case in order else len(order)), runs


def _judge_again(result: Result, size: float) -> None:
    """An arm from before wrong and invented items were counted, judged from the answer it stored (claimcheck's
    was cut to 4 000 characters; a fallback's is no answer)."""
    by_name = {case.name: case for case in CASES}
    case = by_name.get(result.case)
    if case is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        output, _ = case.make(Path(tmp), size)
    for arm in result.arms.values():
        if "fallback" in arm.strategy:
            arm.found, arm.wrong, arm.invented, arm.credited = [], [], [], []
            continue
        judged = judge(arm.answer, result.facts, question=case.question, output=output, shape=case.shape)
        arm.found, arm.wrong, arm.invented, arm.credited = judged.found, judged.wrong, judged.invented, judged.credited


def totals(results: Sequence[Result], arm: str, only: set[str] | None = None) -> dict[str, Any]:
    chosen = [r for r in results if arm in r.arms and (only is None or r.case in only)]
    arms = [r.arms[arm] for r in chosen]
    return {
        "cases": len(chosen),
        "facts": sum(len(r.facts) for r in chosen),
        "credited": sum(len(a.credited) for a in arms),
        "found": sum(len(a.found) for a in arms),
        "wrong": sum(len(a.wrong) for a in arms),
        "invented": sum(len(a.invented) for a in arms),
        "invented_credited": sum(bool(a.invented and a.credited) for a in arms),  # answers credited beside an invention
        "verified": sum(a.verified for a in arms),
        "unverified": sum(a.unverified for a in arms),
        "located": sum(a.located for a in arms),
        "missing": sum(a.missing for a in arms),
        "seconds": round(sum(a.seconds for a in arms), 1),
        "tokens_in": sum(a.tokens_in for a in arms),
        "tokens_out": sum(a.tokens_out for a in arms),
        "client_tokens": sum(a.client_tokens for a in arms),
        "fallbacks": sum("fallback" in a.strategy for a in arms),
    }


def _quotes(arm: Arm | dict[str, Any]) -> str:
    """Quotes verified/unverified, and "+ located/missing" where claimcheck located the answer's values."""
    get = arm.get if isinstance(arm, dict) else lambda key: getattr(arm, key)
    cell = f"{get('verified')}/{get('unverified')}"
    return cell + (f" + {get('located')}/{get('missing')}" if get("located") or get("missing") else "")


def report(results: Sequence[Result], runs: Sequence[Run], note: str = "") -> str:
    lines = [
        "| case | kind | answer at | output tokens | baseline | claimcheck | oracle | wrong/invented b · c · o "
        "| claimcheck strategy | quotes ✓/✗ (+ located ✓/✗) b · c · o | time, tokens in/out: baseline | claimcheck "
        "| context saved |",
        "|---|---|---|---:|---:|---:|---:|---|---|---|---|---|---:|",
    ]
    for r in results:
        c = r.arms["claimcheck"]
        saved = f"{r.output_tokens / max(c.client_tokens, 1):.0f}×"
        facts = " | ".join(_credited(r, arm) for arm in ARMS)
        extras = " · ".join(_per_arm(r, arm, lambda a: f"{len(a.wrong)}/{len(a.invented)}") for arm in ARMS)
        quotes = " · ".join(_per_arm(r, arm, _quotes) for arm in ARMS)
        costs = [_per_arm(r, arm, lambda a: f"{a.seconds:g} s, {a.tokens_in}/{a.tokens_out}") for arm in ARMS[:2]]
        lines.append(
            f"| {r.case} | {r.kind} | {r.where} | {r.output_tokens} | {facts} | {extras} | {c.strategy} | {quotes} "
            f"| {costs[0]} | {costs[1]} | {saved} |"
        )
    lines += [
        "",
        "| | cases | facts credited | found | wrong | invented | quotes ✓/✗ (+ located ✓/✗) | wall time "
        "| model tokens in/out "
        "| client context tokens |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    fits = {r.case for r in results if "oracle" in r.arms}
    past = {r.case for r in results if r.where != "start"}
    rows: list[tuple[str, str, set[str] | None]] = [(arm, arm, None) for arm in ARMS]
    if fits and len(fits) < len(results):
        rows += [(f"{arm} (oracle's cases)", arm, fits) for arm in ARMS[:2]]
    if past and len(past) < len(results):
        rows += [(f"{arm} (answer past the start)", arm, past) for arm in ARMS if past & _with(results, arm)]
    for label, arm, only in rows:
        t = totals(results, arm, only)
        share = f"{t['credited']}/{t['facts']} ({t['credited'] / max(t['facts'], 1):.0%})"
        lines.append(
            f"| {label} | {t['cases']} | {share} | {t['found']} | {t['wrong']} | {t['invented']} "
            f"| {_quotes(t)} | {t['seconds']:g} s | {t['tokens_in']}/{t['tokens_out']} "
            f"| {t['client_tokens']} |"
        )
    lines += ["", _goal(results, past)]
    lines += [
        f"run: model {run.model}, context {run.context} tokens, size {run.size:g}, threads {run.threads or '?'}, "
        f"commit {run.commit}, {run.date}"
        for run in runs
    ]
    return "\n".join(lines + ([note] if note else []))


def _credited(r: Result, arm: str) -> str:
    a = r.arms.get(arm)
    if a is None:
        return "—"
    shown = f"{len(a.credited)}/{len(r.facts)}"
    return shown if len(a.found) == len(a.credited) else f"{shown} ({len(a.found)} found)"


def _per_arm(r: Result, arm: str, show: Callable[[Arm], str]) -> str:
    a = r.arms.get(arm)
    return "—" if a is None else show(a)


def _with(results: Sequence[Result], arm: str) -> set[str]:
    return {r.case for r in results if arm in r.arms}


def _goal(results: Sequence[Result], past: set[str]) -> str:
    """The measure the eval is for: past the start, claimcheck credits at least twice the baseline's facts, and no
    answer holding an invented item is credited."""
    c, b = totals(results, "claimcheck", past), totals(results, "baseline", past)
    met = c["credited"] >= 2 * b["credited"] and c["credited"] > 0
    ratio = f"{c['credited'] / b['credited']:.1f}×" if b["credited"] else "∞" if c["credited"] else "—"
    cases = f"{c['cases']} case" + ("" if c["cases"] == 1 else "s")
    return (
        f"answer past the start ({cases}): claimcheck credited {c['credited']} facts, baseline {b['credited']} "
        f"({ratio}; at least 2× {'met' if met else 'not met'}); answers credited beside an invented "
        f"item: claimcheck {c['invented_credited']}, baseline {b['invented_credited']}"
    )
