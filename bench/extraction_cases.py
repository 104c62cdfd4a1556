"""The cases of bench/extraction_eval.py: tool outputs of the kinds agents meet, a question, the facts to find.

Outputs are generated deterministically (bench/extraction_outputs.py; the git history by real `git` in a scratch
repository), so the facts, computed from the same parameters, hold on any machine. `size` scales every output
(1.0: about 14 000 tokens of cl100k each, a few times the small model's context and under Claude Code's
25 000-token cut); `where` says where the answer sits in the output, which is what decides whether cutting the
output can work. `shape` says what an answer's items look like (a time, an id, a path), so the scorer can count
the wrong ones an answer gives beside or instead of the facts (bench/extraction_scoring.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import extraction_outputs as out

__all__ = ["CASES", "Case"]


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # log, json, table, code search, git, wide table, minified js, diff
    where: str  # start, middle, end, spread: where the answer is in the output
    question: str
    output: Callable[[Path, float], str]  # (scratch directory, size) -> the tool output
    facts: Callable[[float], list[str]]  # size -> what a right answer must contain
    scale: float = 1.0  # this case's output size against the others (small ones fit the model's context whole)
    shape: tuple[str, ...] = ()  # regexes (matched ignoring case) of the items an answer gives: times, ids, paths

    def make(self, tmp: Path, size: float) -> tuple[str, list[str]]:
        """The output and the facts at `size`."""
        return self.output(tmp, size * self.scale), self.facts(size * self.scale)


# Answer-shaped items (Case.shape), shared by several cases.
IP = r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?!\.?\d)"
TIME = r"(?<!\d)\d{2}:\d{2}:\d{2}(?!\d)"
NUMBER = r"(?<![\w.])\d{3,}(?!\.?\d)(?!\w)"  # ids, PIDs, line numbers, values: three digits or more
SOURCE_PATH = r"\bsrc/[\w/]+\.py\b"  # without its line: a right path with a wrong line is a wrong line
URL = r"https?://[^\s\"'<>()\[\]{}`]*[^\s\"'<>()\[\]{}`.,;:!?]"


CASES = [
    Case(
        "log-errors",
        "log",
        "spread",
        "List every ERROR line of this log with its message.",
        out.log,
        lambda s: ["disk full", "TLS handshake failed", "OOM killed"],
    ),
    Case(
        "log-tls-ip",
        "log",
        "middle",
        "A TLS handshake failed: with which IP address?",
        out.log,
        lambda s: ["10.1.2.3"],
        shape=(IP,),
    ),
    Case(
        "log-oom-time",
        "log",
        "end",
        "At what time was a worker killed for running out of memory?",
        out.log,
        out.oom_time,
        shape=(TIME,),
    ),
    Case(
        "log-hosts",
        "log",
        "start",
        "Which hosts (the field after the timestamp) appear in this log?",
        out.log,
        lambda s: ["web-0", "web-1", "web-2", "web-3"],
        scale=0.3,
        shape=(r"\bweb-\d+\b",),
    ),
    Case(
        "json-admins",
        "json",
        "spread",
        'Which users have "admin": true? Give their names.',
        out.users,
        lambda s: [f"user{out.at(int(out.USERS * s), f):04d}" for f in out.ADMINS],
        shape=(r"\buser\d+\b",),
    ),
    Case(
        "json-cursor",
        "json",
        "end",
        "What cursor value fetches the next page of these results?",
        out.users,
        lambda s: ["c-9f3a21"],
        shape=(r"\bc-[0-9a-f]{4,}\b",),
    ),
    Case(
        "csv-refunds",
        "table",
        "spread",
        "Which order ids have the status refunded?",
        out.orders,
        out.refund_ids,
        shape=(r"(?<![\d.])1\d{4}(?!\.?\d)",),
    ),
    Case(
        "ps-backup",
        "table",
        "middle",
        "Which user runs the backup agent process, and what is its PID?",
        out.ps,
        lambda s: ["svc-backup", "48213"],
        shape=(r"\b(?:svc-[\w-]+|root|www-data|postgres)\b", NUMBER),
    ),
    Case(
        "grep-definition",
        "code search",
        "middle",
        "In these search results, which file and line define the function rotate_keys?",
        out.grep,
        lambda s: ["src/auth/keystore.py", "1412"],
        shape=(SOURCE_PATH, NUMBER),
    ),
    Case(
        "grep-callers",
        "code search",
        "spread",
        "Which files call revoke_session? List their paths.",
        out.grep,
        lambda s: list(out.CALLERS.values()),
        shape=(SOURCE_PATH,),
    ),
    Case(
        "git-cve",
        "git",
        "middle",
        "Which commit mentions a CVE? Give the CVE id and the commit message.",
        out.git_log,
        lambda s: ["CVE-2026-1234", f"change {out.cve_commit(s)}"],
        shape=(r"\bCVE-\d{4}-\d+\b", r"\bchange \d+\b"),
    ),
    Case(
        "git-oldest",
        "git",
        "end",
        "What is the message of the oldest commit (the first one made), and who is its author?",
        out.git_log,
        lambda s: ["auth: change 0", "Ada"],
        shape=(r"\b[a-z]+: change \d+\b", r"\b(?:Ada|Linus|Grace)\b"),
    ),
    Case(
        "git-authors",
        "git",
        "start",
        "Who are the authors of these commits? List their names.",
        out.git_log,
        lambda s: [name for name, _ in out.AUTHORS],
        scale=0.3,
        shape=(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",),
    ),
    Case(
        "csv-wide-recalled",
        "wide table",
        "middle",
        "Which item in this inventory table has the status recalled? Give its sku and its bin.",
        out.inventory,
        out.recalled,
        shape=(r"\bSKU-\d+\b", r"\b[A-H]\d{3}\b"),
    ),
    Case(
        "js-bundle-config",
        "minified js",
        "end",
        "Which base URL does this bundle's configuration use for API requests, and which release string does it set?",
        out.bundle,
        lambda s: [out.API_BASE, out.RELEASE],
        shape=(URL, r"(?<![\w.])\d+\.\d+\.\d+(?:-\w+)?\b"),
    ),
    Case(
        "diff-constant",
        "diff",
        "end",
        "Which file changes the constant MAX_RETRY_BACKOFF_MS, and what is the constant's new value?",
        out.diff,
        lambda s: [out.TARGET_PATH, "7250"],
        shape=(r"(?<![\w./-])(?:[\w.-]+/)+[\w-]+\.[a-z]+\b", NUMBER),
    ),
]
