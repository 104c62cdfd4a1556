"""Prompts for the extraction strategies and the FINAL wrapper their answers must use.

The wrapper carries a per-request nonce, so text inside the tool output cannot fake an answer. A closing tag is
optional (models often stop early) and a leading `<think>` block is dropped. An answer without the wrapper is
still an answer (`answer_of`): a small model often forgets it, and what it said is judged by its content (its
quotes are verified like any other), not thrown away for its form.

The chunk prompt is short (prompt version 4): Qwen2.5-Coder-0.5B echoed the chunk's first line under the long
one, which described the document's statistics and the wrapper's rules before the chunk (bench/extraction_eval.py).
The source tool's arguments are quoted capped (`cap_arguments`), so a call with a huge argument
still leaves room in the model's context window for its output.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ARGUMENTS_MAX_CHARS",
    "ARGUMENT_VALUE_MAX_CHARS",
    "NOT_FOUND",
    "PROMPT_VERSION",
    "Document",
    "answer_of",
    "cap_arguments",
    "excerpt_prompt",
    "map_prompt",
    "new_nonce",
    "parse_final",
    "read_grep_prompt",
    "reduce_prompt",
]

PROMPT_VERSION = "5"
ARGUMENT_VALUE_MAX_CHARS = 500
"""The most characters of one string (value or key) of the source tool's arguments a prompt quotes."""
ARGUMENTS_MAX_CHARS = 2000
"""The most characters of the source tool's whole arguments JSON a prompt quotes."""
NOT_FOUND = "NO RELEVANT DATA FOUND"
_THINK = re.compile(r"^\s*<think>.*?(?:</think>|$)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Document:
    """What the prompts say about the output being read."""

    tool: str
    arguments_json: str
    handle: str
    bytes: int
    lines: int
    tokens: int


def new_nonce() -> str:
    return secrets.token_hex(4)


def _tag(nonce: str) -> str:
    return f"claimcheck-{nonce}-FINAL"


def _output_format(nonce: str, scope: str) -> str:
    tag = _tag(nonce)
    return f"""OUTPUT FORMAT (required)
- Emit exactly one wrapper: <{tag} format="text"> ... </{tag}>
- Put your extracted result inside the wrapper. Be precise and complete; keep numbers, names and ids exact.
- After the result, add a line EVIDENCE: and then one line per supporting quote, each copied verbatim from
  the document and wrapped in double quotes, like: > "exact text from the document"
- If no relevant data exists, output inside the wrapper:
  {NOT_FOUND}
  <short description of what kind of information is available in {scope}>"""


@functools.lru_cache(maxsize=8)  # every chunk's prompt quotes the same arguments
def cap_arguments(arguments_json: str) -> str:
    """The arguments JSON with each string cut to ARGUMENT_VALUE_MAX_CHARS and the whole to
    ARGUMENTS_MAX_CHARS; every cut is marked with how long the original was."""
    try:
        capped = json.dumps(_cap_strings(json.loads(arguments_json)), ensure_ascii=False, sort_keys=True)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to walk: quote it as text
        capped = json.dumps(_cap_strings(arguments_json), ensure_ascii=False)
    if len(capped) <= ARGUMENTS_MAX_CHARS:
        return capped
    return f"{capped[:ARGUMENTS_MAX_CHARS]}…[arguments cut: {len(arguments_json)} characters in all]"


def _cap_strings(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) <= ARGUMENT_VALUE_MAX_CHARS:
            return value
        return f"{value[:ARGUMENT_VALUE_MAX_CHARS]}…[cut: {len(value)} characters in all]"
    if isinstance(value, list):
        return [_cap_strings(item) for item in value]
    if isinstance(value, dict):
        return {_cap_strings(str(key)): _cap_strings(item) for key, item in value.items()}
    return value


def _source(document: Document) -> str:
    return f"""SOURCE TOOL
- Name: {document.tool}
- Arguments (JSON; long values cut, marked): {cap_arguments(document.arguments_json)}

DOCUMENT STATS
- Bytes: {document.bytes}
- Lines: {document.lines}
- Tokens (estimate): {document.tokens}"""


def _ask_again(extract: str) -> str:
    """The request once more after the document: small models answer what they read last (measured on
    Qwen2.5-Coder-0.5B by bench/extraction_eval.py: without it, the chunk that held the answer said not found)."""
    return f"WHAT TO EXTRACT: {extract}\nAnswer inside the wrapper, then EVIDENCE: with verbatim quotes."


def map_prompt(
    document: Document, extract: str, chunk: str, index: int, total: int, overlap: float, nonce: str
) -> tuple[str, str]:
    """(system, user) for one chunk of the full-chunked map step: short, the question last. An output read in one
    chunk is asked about as the whole output, and no "not found" is offered: Qwen2.5-Coder-1.5B answered "not
    found" to all four facts of a 4 339-token log that the plain question over the same text answered
    (bench/extraction_eval.py, log-hosts), as the 0.5B model did over excerpts (`excerpt_prompt`)."""
    tag = _tag(nonce)
    if total == 1:
        system = f"""You read the whole output of the tool {document.tool} and answer a question about it from \
what it says.
Answer inside <{tag} format="text"> ... </{tag}>. Keep numbers, names, paths and ids exactly as written.
After the answer write EVIDENCE: and, one per line, the lines of the output that show it, copied exactly, \
each like > "copied line"."""
        return system, (
            f"DOCUMENT CHUNK 1 of 1:\n{chunk}\nEND OF CHUNK 1.\n\n"
            f"QUESTION: {extract}\nAnswer inside the wrapper, then EVIDENCE: with copied lines."
        )
    system = f"""You read one document chunk (part {index} of {total}) of the output of the tool {document.tool} \
and answer a question about it from what the chunk says.
Answer inside <{tag} format="text"> ... </{tag}>. Keep numbers, names, paths and ids exactly as written.
After the answer write EVIDENCE: and, one per line, the lines of the chunk that show it, copied exactly, \
each like > "copied line".
If the chunk does not answer the question, answer {NOT_FOUND} and one line saying what the chunk holds."""
    return system, (
        f"DOCUMENT CHUNK {index} of {total}:\n{chunk}\nEND OF CHUNK {index}.\n\n"
        f"QUESTION: {extract}\nAnswer inside the wrapper, then EVIDENCE: with copied lines."
    )


def excerpt_prompt(document: Document, extract: str, excerpts: str) -> tuple[str, str]:
    """(system, user) for the excerpts strategy: a page of marked lines, the question last.

    Neither the wrapper nor a "not found" answer is asked for: Qwen2.5-Coder-0.5B answered "not found" over a page
    that showed the answer when it was offered one (bench/extraction_eval.py), and an answer is read by what it
    says (`answer_of`). Listing the marked lines again before the page found fewer facts (12 of 37, not 16).
    The example quote (`> "copied line"`) stays, though a model sometimes copies it: describing the format
    instead made Qwen2.5-Coder-1.5B answer with quotes alone, no answer before them (9 of 30 facts past the start,
    not 14: bench/results/extraction-real-model-1.5b-evidence-format.json)."""
    system = f"""You answer a question about the output of the tool {document.tool}, from excerpts of it: lines \
marked → hold words of the question; around them are the lines before and after, and the output's first and last \
lines. Answer only from what is shown. Keep numbers, names, paths and ids exactly as written.
After the answer, write EVIDENCE: and the lines that show it, copied exactly, each like > "copied line"."""
    return system, f"EXCERPTS OF THE OUTPUT:\n{excerpts}\n\nQUESTION: {extract}"


def reduce_prompt(document: Document, extract: str, chunk_outputs: list[str], nonce: str) -> tuple[str, str]:
    """(system, user) for the reduce step that merges the chunk answers."""
    system = f"""You are an internal extraction agent. You must synthesize multiple chunk extractions into one final \
answer.

{_source(document)}

WHAT TO EXTRACT
{extract}

Keep the EVIDENCE quotes of the chunk extractions that support your answer, unchanged.

{_output_format(nonce, "the chunks")}"""
    parts = [f"CHUNK {i} EXTRACTION:\n{text}" for i, text in enumerate(chunk_outputs, start=1)]
    return system, "CHUNK OUTPUTS\n\n" + "\n\n".join(parts) + f"\n\n{_ask_again(extract)}"


def read_grep_prompt(document: Document, extract: str, nonce: str) -> tuple[str, str]:
    """(system, user) for the read-grep loop, which sees the document only through Read and Grep."""
    system = f"""You are an internal extraction agent. You can only use the Read and Grep tools.

IMPORTANT: The handle is the filename. Use the filename exactly as given when calling Read or Grep.

{_source(document)}
- Handle/filename: {document.handle}

WHAT TO EXTRACT
{extract}

Use Grep to find the relevant parts and Read to see them in full, then answer.

{_output_format(nonce, "the file")}"""
    return system, f"Extract from the file {document.handle}: {extract}"


def answer_of(text: str, nonce: str) -> str | None:
    """What the model answered: the wrapper's content, or, without one, all it said (without a `<think>` block
    and any stray wrapper tag); None only when it said nothing."""
    if (wrapped := parse_final(text, nonce)) is not None:
        return wrapped or None
    said = _STRAY_TAG.sub("", _THINK.sub("", text, count=1)).strip()
    return said or None


_STRAY_TAG = re.compile(r"</?claimcheck-[0-9a-f]*-?FINAL[^>]*>")


def parse_final(text: str, nonce: str) -> str | None:
    """The content of the FINAL wrapper, or None when the answer has none."""
    text = _THINK.sub("", text, count=1)
    tag = re.escape(_tag(nonce))
    match = re.search(rf"<{tag}(?:\s[^>]*)?>(.*?)(?:</{tag}>|$)", text, re.DOTALL)
    if match is None:
        return None
    return match.group(1).strip()
