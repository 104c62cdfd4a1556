"""Extraction: token counting, chunking, the LLM strategies and backends behind `tool_output`."""

from extraction.chunking import Chunk, chunk_text
from extraction.errors import ExtractionError, LLMBadResponse, LLMError, LLMTimeout, LLMUnavailable, NoFinalReport
from extraction.extractor import Extraction, Extractor, Mode
from extraction.llm import LLM, Completion, Message, ToolCall, ToolSpec, Usage
from extraction.prompts import NOT_FOUND, PROMPT_VERSION, Document, parse_final
from extraction.strategies import FileTool, Policy
from extraction.tokens import (
    ENCODING_NAME,
    count_tokens,
    estimate_file_tokens,
    estimate_tokens,
    exceeds,
    file_exceeds,
    head_tokens,
    tail_tokens,
)
from extraction.truncation import fallback_warning, truncate

__all__ = [
    "ENCODING_NAME",
    "LLM",
    "NOT_FOUND",
    "PROMPT_VERSION",
    "Chunk",
    "Completion",
    "Document",
    "Extraction",
    "ExtractionError",
    "Extractor",
    "FileTool",
    "LLMBadResponse",
    "LLMError",
    "LLMTimeout",
    "LLMUnavailable",
    "Message",
    "Mode",
    "NoFinalReport",
    "Policy",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "chunk_text",
    "count_tokens",
    "estimate_file_tokens",
    "estimate_tokens",
    "exceeds",
    "fallback_warning",
    "file_exceeds",
    "head_tokens",
    "parse_final",
    "tail_tokens",
    "truncate",
]
