"""`tool_output`'s LLM modes: route, run a strategy, verify its evidence, cache, or fall back to truncate.

Before the first request the endpoint is asked what it serves (`prepare`), and the output is measured in the
model's own tokens (extraction.budget), so no prompt is planned past the model's window. A prompt that still
does not fit (`LLMContextOverflow`) is planned again smaller, with the window the error named, instead of
falling back. A model that answered read-grep without looking (`Ungrounded`) is not routed there again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

import anyio

from extraction.allowance import Allowance, AllowanceSpent, Metered
from extraction.budget import samples, token_ratio
from extraction.errors import ExtractionError, LLMContextOverflow, NoFinalReport, Ungrounded
from extraction.llm import LLM, Usage
from extraction.locate import locate
from extraction.prompts import NOT_FOUND, PROMPT_VERSION, Document, map_prompt, new_nonce
from extraction.provenance import settle, with_evidence
from extraction.source import Source
from extraction.strategies import FileTool, Policy, StrategyResult, excerpts, full_chunked, plan_chunks, read_grep
from extraction.truncation import fallback_warning, truncate_source
from extraction.turns import Turns, queue_for
from fs_sandbox import FairQueue

__all__ = ["Extraction", "Extractor", "Mode"]

Mode = Literal["auto", "full-chunked", "read-grep", "excerpts"]
Strategy = Literal["full-chunked", "read-grep", "excerpts"]
_CACHE_LIMIT = 256
_BACKENDS_KEPT = 16
_REPLANS = 3  # plans after a context-length error: each smaller than the one before
_SHRINK = 1.3  # when the error names no window: each new plan's chunks this much smaller


@dataclass(frozen=True, slots=True)
class Extraction:
    strategy: Literal["full-chunked", "read-grep", "excerpts", "truncate"]
    body: str
    not_found: bool = False
    cached: bool = False


class Extractor:
    """Answers extraction requests for one proxy; results are cached by content, request and model."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or Policy()
        self._cache: dict[tuple[str, str, str, str, str], Extraction] = {}
        self._backends: dict[Hashable, LLM] = {}
        self._turns: dict[Hashable, FairQueue] = {}  # each backend's, its requests' turns by owner
        self._looks_without_tools: set[str] = set()  # models that answered read-grep without one Read or Grep

    def backend(self, key: Hashable, make: Callable[[], LLM], owner: str | None = None) -> LLM:
        """The backend for `key` (an endpoint and its settings), made once and kept: what it learned about its
        endpoint (window, tokenizer, slots) is asked once, not once per extraction. With `owner` (whose question
        it is: a principal), as that owner uses it: each request waits for the owner's turn at the endpoint's
        slots, shared fairly with every other owner's (`extraction.turns`)."""
        found = self._backends.get(key)
        if found is None:
            if len(self._backends) >= _BACKENDS_KEPT:
                oldest = next(iter(self._backends))
                del self._backends[oldest]
                self._turns.pop(oldest, None)
            found = self._backends[key] = make()
        if owner is None:
            return found
        queue = self._turns.get(key)
        if queue is None:
            queue = self._turns[key] = queue_for(found, self.policy)
        return Turns(found, queue, owner, self.policy)

    def route(self, document: Document, source: Source, llm: LLM, extract: str, ratio: float = 1.0) -> Strategy:
        """auto: few chunks → full-chunked; otherwise excerpts for a small model (then full-chunked if they do not
        hold the answer), read-grep for one that can call tools and has not shown that it answers without them,
        else full-chunked (also for long lines, which read-grep reads badly).

        Decided once the prompt's own size is known: when it leaves no room, `LLMError` says so.
        Blocking: planning the chunks reads a little near each cut."""
        chunks = plan_chunks(source, llm, document, extract, self.policy, new_nonce(), ratio)
        if len(chunks) <= self.policy.max_chunks:
            return "full-chunked"
        if getattr(llm, "small", False):
            return "excerpts"
        average_line = document.bytes / max(document.lines, 1)
        if (
            average_line >= self.policy.avg_line_bytes_threshold
            or not llm.supports_tools
            or llm.model in self._looks_without_tools
        ):
            return "full-chunked"
        return "read-grep"

    async def extract(
        self,
        document: Document,
        source: Source,
        sha256: str,
        extract: str,
        mode: Mode,
        *,
        llm: LLM | None,
        usage: Usage,
        tools: Mapping[str, FileTool],
        threshold: int,
        unavailable_reason: str = "no LLM is configured and the client offers no sampling",
        allowance: Allowance | None = None,
    ) -> Extraction:
        """`allowance`: the most this question may send to `llm` (the client's model, through sampling)."""
        if llm is None:
            return await self._fallback(source, threshold, unavailable_reason)
        key = (sha256, extract, mode, llm.model, PROMPT_VERSION)
        if (hit := self._cache.get(key)) is not None:
            return Extraction(hit.strategy, hit.body, hit.not_found, cached=True)
        nonce = new_nonce()
        metered = llm = Metered(llm, allowance) if allowance is not None else llm
        try:
            if (prepare := getattr(llm, "prepare", None)) is not None:
                await prepare()
            pieces = await anyio.to_thread.run_sync(samples, source)
            ratio = await token_ratio(llm, pieces, map_prompt(document, extract, "", 1, 1, 0, nonce))
            for plan in range(_REPLANS + 1):
                window = llm.context_window
                try:
                    strategy, result, chunks = await self._run(
                        document, source, extract, mode, llm, usage, tools, nonce, ratio
                    )
                    break
                except LLMContextOverflow:
                    if plan == _REPLANS:
                        raise
                    if llm.context_window >= window:  # no smaller window learned: the chunks were too big
                        ratio *= _SHRINK
        except ExtractionError as exc:
            return await self._fallback(source, threshold, str(exc) + _sent(metered))
        answer, evidence = await anyio.to_thread.run_sync(settle, result.answer, source)
        not_found = answer.startswith(NOT_FOUND)
        body = with_evidence(answer, evidence)
        if note := result.note():
            body = f"{note}\n\n{body}"
        if not evidence and not not_found:  # nothing quoted: show where the answer's values stand in the output
            if located := await anyio.to_thread.run_sync(locate, answer, source):
                body += "\n\nEVIDENCE:\n" + "\n".join(item.describe() for item in located)
        body += f"\n\nsource: sha256={sha256} bytes={document.bytes} chunks={chunks} model={llm.model}"
        body += _sent(metered)
        extraction = Extraction(strategy, body, not_found)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = extraction
        return extraction

    async def _run(
        self,
        document: Document,
        source: Source,
        extract: str,
        mode: Mode,
        llm: LLM,
        usage: Usage,
        tools: Mapping[str, FileTool],
        nonce: str,
        ratio: float,
    ) -> tuple[Strategy, StrategyResult, str]:
        """(strategy, its result, chunks searched/total, lines chosen/total or n/a) of one plan."""
        if mode == "auto":
            strategy: Strategy = await anyio.to_thread.run_sync(self.route, document, source, llm, extract, ratio)
            if strategy == "full-chunked" and await self._over(llm, document, source, extract, nonce, ratio):
                strategy = "excerpts"  # within the client's model's allowance: the lines that share its words first
        else:
            strategy = mode
        if strategy == "excerpts":
            try:
                result = await excerpts(llm, usage, document, source, extract, self.policy, nonce, ratio)
            except NoFinalReport:
                if mode == "excerpts":
                    raise
            else:
                lines = f"{result.chunks_searched}-of-{result.chunks_total}-lines"
                if mode == "excerpts" or not result.answer.startswith(NOT_FOUND):
                    return strategy, result, lines
                if over := await self._over(llm, document, source, extract, nonce, ratio):
                    withheld = (
                        "Not in the lines that share the question's words, and the output was not read whole: "
                        f"{over}. Grep the output, or ask again with a larger allowance."
                    )
                    return strategy, replace(result, withheld=withheld), lines
            strategy = "full-chunked"  # the lines that share its words did not answer: read it all
        if strategy == "read-grep" and not llm.supports_tools:
            raise ExtractionError(f"the model {llm.model} cannot call tools, which read-grep needs")
        if strategy == "read-grep":
            try:
                return strategy, await read_grep(llm, usage, document, extract, tools, self.policy, nonce), "n/a"
            except Ungrounded:
                if mode != "auto":
                    raise
                self._looks_without_tools.add(llm.model)
                strategy = "full-chunked"  # a model that will not look gets every chunk shown instead
        if over := await self._over(llm, document, source, extract, nonce, ratio):
            raise AllowanceSpent(f"the output was not read whole: {over}; ask with mode excerpts, or Grep it")
        result = await full_chunked(llm, usage, document, source, extract, self.policy, nonce, ratio)
        return strategy, result, f"{result.chunks_searched}/{result.chunks_total}"

    async def _over(self, llm: LLM, document: Document, source: Source, extract: str, nonce: str, ratio: float) -> str:
        """Why reading the output whole (full-chunked) would pass the allowance of the client's model; empty when
        it would not, or `llm` has none."""
        if not isinstance(llm, Metered):
            return ""
        chunks = await anyio.to_thread.run_sync(plan_chunks, source, llm, document, extract, self.policy, nonce, ratio)
        searched = min(len(chunks), self.policy.max_chunks_hard)
        requests = searched + (1 if searched > 1 else 0)  # and one to bring the parts' answers together
        tokens = document.tokens * searched // max(len(chunks), 1)
        if llm.fits(requests, tokens):
            return ""
        return (
            f"that takes {requests} sampling request(s) of about {tokens:,} tokens, past this question's allowance "
            f"of the client's model: {llm.allowance.describe()}"
        )

    @staticmethod
    async def _fallback(source: Source, threshold: int, reason: str) -> Extraction:
        body = await anyio.to_thread.run_sync(lambda: truncate_source(source, threshold=threshold))
        return Extraction("truncate", f"{fallback_warning(reason)}\n\n{body}")


def _sent(llm: LLM) -> str:
    """The line saying what the client's model was sent for this question (empty for an endpoint's model)."""
    if not isinstance(llm, Metered):
        return ""
    return f"\n\nsent to the client's model: {llm.sent()}; its allowance for one question: {llm.allowance.describe()}"
