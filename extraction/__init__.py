"""Extraction: token counting, chunking, the LLM strategies and backends behind `tool_output`.

A stored output reaches extraction as a `Source` (byte ranges read on demand), never as one string.
"""

from extraction.chunking import Chunk, chunk_source, read_chunk
from extraction.errors import ExtractionError, LLMBadResponse, LLMError, LLMTimeout, LLMUnavailable, NoFinalReport
from extraction.extractor import Extraction, Extractor, Mode
from extraction.llm import LLM, Completion, Message, ToolCall, ToolSpec, Usage
from extraction.prompts import NOT_FOUND, PROMPT_VERSION, Document, parse_final
from extraction.source import Source, TextSource, find_all, read_all, read_chars
from extraction.strategies import FileTool, Policy
from extraction.tokens import (
    ENCODING_NAME,
    count_tokens,
    estimate_file_tokens,
    estimate_source_tokens,
    estimate_tokens,
    exceeds,
    exceeds_by_length,
    file_exceeds,
    head_tokens,
    source_exceeds,
    tail_tokens,
)
from extraction.truncation import fallback_warning, truncate, truncate_source

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
    "Source",
    "TextSource",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "chunk_source",
    "count_tokens",
    "estimate_file_tokens",
    "estimate_source_tokens",
    "estimate_tokens",
    "exceeds",
    "exceeds_by_length",
    "fallback_warning",
    "file_exceeds",
    "find_all",
    "head_tokens",
    "parse_final",
    "read_all",
    "read_chars",
    "read_chunk",
    "source_exceeds",
    "tail_tokens",
    "truncate",
    "truncate_source",
]
