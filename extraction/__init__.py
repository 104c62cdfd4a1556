"""Extraction: token counting now; chunking, strategies and LLM backends arrive with the extraction issue."""

from extraction.tokens import ENCODING_NAME, count_tokens, estimate_tokens, exceeds, head_tokens, tail_tokens

__all__ = ["ENCODING_NAME", "count_tokens", "estimate_tokens", "exceeds", "head_tokens", "tail_tokens"]
