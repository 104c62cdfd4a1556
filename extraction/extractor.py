"""`tool_output`'s LLM modes: route, run a strategy, verify its evidence, cache, or fall back to truncate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import anyio

from extraction.errors import ExtractionError, Ungrounded
from extraction.llm import LLM, Usage
from extraction.prompts import NOT_FOUND, PROMPT_VERSION, Document, new_nonce
from extraction.provenance import split_evidence, verify, with_evidence
from extraction.source import Source
from extraction.strategies import FileTool, Policy, chunk_budget, full_chunked, plan_chunks, read_grep
from extraction.truncation import fallback_warning, truncate_source

__all__ = ["Extraction", "Extractor", "Mode"]

Mode = Literal["auto", "full-chunked", "read-grep"]
_CACHE_LIMIT = 256


@dataclass(frozen=True, slots=True)
class Extraction:
    strategy: Literal["full-chunked", "read-grep", "truncate"]
    body: str
    not_found: bool = False
    cached: bool = False


class Extractor:
    """Answers extraction requests for one process; results are cached by content, request and model."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or Policy()
        self._cache: dict[tuple[str, str, str, str, str], Extraction] = {}

    def route(self, document: Document, source: Source, llm: LLM, extract: str) -> Literal["full-chunked", "read-grep"]:
        """auto: long lines or few chunks → full-chunked; otherwise read-grep (if the model can call tools).

        Decided once the prompt's own size is known: when it leaves no room, `LLMError` says so.
        Blocking: planning the chunks reads a little near each cut."""
        chunk_budget(llm, document, extract, new_nonce())
        average_line = document.bytes / max(document.lines, 1)
        if average_line >= self.policy.avg_line_bytes_threshold or not llm.supports_tools:
            return "full-chunked"
        chunks = plan_chunks(source, llm, document, extract, self.policy, new_nonce())
        return "full-chunked" if len(chunks) <= self.policy.max_chunks else "read-grep"

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
    ) -> Extraction:
        if llm is None:
            return await self._fallback(source, threshold, unavailable_reason)
        key = (sha256, extract, mode, llm.model, PROMPT_VERSION)
        if (hit := self._cache.get(key)) is not None:
            return Extraction(hit.strategy, hit.body, hit.not_found, cached=True)
        nonce = new_nonce()
        try:
            if mode == "auto":
                strategy = await anyio.to_thread.run_sync(self.route, document, source, llm, extract)
            else:
                strategy = mode
            if strategy == "read-grep" and not llm.supports_tools:
                raise ExtractionError(f"the model {llm.model} cannot call tools, which read-grep needs")
            result = None
            if strategy == "read-grep":
                try:
                    result = await read_grep(llm, usage, document, extract, tools, self.policy, nonce)
                    chunks = "n/a"
                except Ungrounded:
                    if mode != "auto":
                        raise
                    strategy = "full-chunked"  # a model that will not look gets every chunk shown instead
            if result is None:
                result = await full_chunked(llm, usage, document, source, extract, self.policy, nonce)
                chunks = f"{result.chunks_searched}/{result.chunks_total}"
        except ExtractionError as exc:
            return await self._fallback(source, threshold, str(exc))
        answer, quotes = split_evidence(result.answer)
        not_found = answer.startswith(NOT_FOUND)
        body = with_evidence(answer, await anyio.to_thread.run_sync(verify, quotes, source))
        body += f"\n\nsource: sha256={sha256} bytes={document.bytes} chunks={chunks} model={llm.model}"
        extraction = Extraction(strategy, body, not_found)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = extraction
        return extraction

    @staticmethod
    async def _fallback(source: Source, threshold: int, reason: str) -> Extraction:
        body = await anyio.to_thread.run_sync(lambda: truncate_source(source, threshold=threshold))
        return Extraction("truncate", f"{fallback_warning(reason)}\n\n{body}")
