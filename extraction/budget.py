"""How many of the model's own tokens one cl100k token of this output is: the ratio chunk plans are scaled by.

claimcheck counts with cl100k; the model's window counts in its own tokens, and they differ most where it
matters: Qwen2.5 writes each digit as a token where cl100k takes up to three, so a log or a CSV table is 1.3-1.6
times as long to it (measured below). Where the endpoint has a tokenizer (llama.cpp's, llama-cpp-python's,
vLLM's), a few samples of the output are counted both ways; elsewhere `UNKNOWN_RATIO` is used.

`UNKNOWN_RATIO` is measured, not guessed: Qwen2.5-Coder's tokenizer (via llama-cpp-python's
`/extras/tokenize/count`) against cl100k on 8 KiB pieces of every bench/extraction_cases.py output at size 1.0;
the highest piece was 1.576 (a CSV table: numbers), logs 1.41, JSON 1.10. Llama 3 and GPT tokenizers group
digits as cl100k does and come out near 1.0, so the margin only costs room on models that never needed it.
"""

from __future__ import annotations

from collections.abc import Sequence

from extraction.llm import LLM
from extraction.source import Source
from extraction.tokens import count_tokens

__all__ = ["MARGIN", "SAMPLE_BYTES", "UNKNOWN_RATIO", "samples", "token_ratio"]

UNKNOWN_RATIO = 1.6
SAMPLE_BYTES = 8 * 1024
_SAMPLES = 4  # spread over the output: start, two in the middle, end
MARGIN = 1.03  # over the highest sample: the rest of the output was not counted


def samples(source: Source) -> list[str]:
    """Up to `_SAMPLES` pieces spread over the output, decoded (blocking)."""
    size = source.size
    if size <= SAMPLE_BYTES * _SAMPLES:
        starts = list(range(0, size, SAMPLE_BYTES)) or [0]
    else:
        step = (size - SAMPLE_BYTES) // (_SAMPLES - 1)
        starts = [i * step for i in range(_SAMPLES)]
    return [source.read(start, SAMPLE_BYTES).decode("utf-8", "ignore") for start in starts]


async def token_ratio(llm: LLM, pieces: Sequence[str], extra: Sequence[str] = ()) -> float:
    """Model tokens per cl100k token over `pieces` (and the prompt's own text in `extra`), with a small margin;
    `UNKNOWN_RATIO` when the model has no tokenizer to ask, or it stops answering."""
    count = getattr(llm, "count_model_tokens", None)
    texts = [text for text in [*pieces, *extra] if text.strip()]
    if count is None or not texts:
        return UNKNOWN_RATIO if count is None else 1.0
    counted = await count(texts)
    if counted is None:
        return UNKNOWN_RATIO
    ratios = [model / max(count_tokens(text), 1) for model, text in zip(counted, texts, strict=True)]
    return float(max(1.0, max(ratios) * MARGIN))
