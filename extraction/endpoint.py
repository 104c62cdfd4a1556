"""What an OpenAI-compatible endpoint says about itself: its context window, how many requests it serves at
once, and whether it counts tokens with the model's own tokenizer.

Each server says it in its own place, so each place is asked once, best effort (a short timeout, a bounded
body; a failure means "not said here"):

- vLLM: window `/v1/models` `max_model_len`; tokenizer `/tokenize` (`prompt`).
- llama.cpp server: window `/props` `default_generation_settings.n_ctx`; slots `/props` `total_slots`;
  tokenizer `/tokenize` (`content`); its context-length error names `n_ctx`.
- llama-cpp-python: no window said (its context-length error names it, and it is learned then); one request
  at a time; tokenizer `/extras/tokenize/count`.
- Ollama: window `/api/show` `num_ctx`, else its documented default 4096 (capped by the model's own length).
- LM Studio: window `/api/v0/models` `loaded_context_length`.

llama-cpp-python is checked against the real server (bench/local_model.py); the other rows follow those
servers' documented answers and are tested against those shapes only.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx2

__all__ = ["OLLAMA_DEFAULT_CONTEXT", "EndpointFacts", "count_tokens", "is_local", "probe", "root_of", "window_in_error"]

PROBE_TIMEOUT_SECS = 5.0
PROBE_BODY_LIMIT = 1 << 20  # a /models list of a big hosted catalogue is a few hundred KiB
OLLAMA_DEFAULT_CONTEXT = 4096  # what Ollama serves a model with when num_ctx is not set (its documented default)

Tokenizer = Literal["extras", "llama.cpp", "vllm"]


@dataclass(frozen=True, slots=True)
class EndpointFacts:
    context_window: int | None = None
    window_from: str = ""  # where the window was read, for messages and /v1/health
    slots: int | None = None  # requests it serves at once, where it says
    tokenizer: Tokenizer | None = None


def root_of(base_url: str) -> str:
    """The server's root: the base URL without a trailing `/v1` (where llama.cpp and Ollama answer)."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def is_local(base_url: str) -> bool:
    """Whether the endpoint runs on this machine or a private network: a local server (llama.cpp, Ollama) most
    often answers one request at a time."""
    host = urlsplit(base_url).hostname or ""
    if host in ("localhost", "host.docker.internal") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


_CONTEXT_ERRORS = (
    re.compile(r"maximum context length is (\d+)"),  # OpenAI, vLLM, llama-cpp-python
    re.compile(r"exceeds the available context size \((\d+) tokens\)"),  # llama.cpp server
    re.compile(r"context window of (\d+)"),  # llama-cpp-python's own ValueError
)
_CONTEXT_WORDS = ("context length", "context size", "context window", "context_length_exceeded")


def window_in_error(body: str) -> tuple[bool, int | None]:
    """(is this a context-length error, the window it names if any) for an endpoint's error body."""
    for pattern in _CONTEXT_ERRORS:
        if (match := pattern.search(body)) is not None:
            return True, int(match.group(1))
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("n_ctx"), int):
        return True, int(error["n_ctx"])
    lowered = body.lower()
    return any(word in lowered for word in _CONTEXT_WORDS), None


async def probe(base_url: str, model: str, headers: dict[str, str]) -> EndpointFacts:
    """Ask the endpoint what it serves; never raises (an endpoint that says nothing gives empty facts)."""
    root = root_of(base_url)
    window: int | None = None
    source, slots = "", None
    async with httpx2.AsyncClient(timeout=PROBE_TIMEOUT_SECS, headers=headers) as http:
        entry = _entry(await _get(http, f"{base_url.rstrip('/')}/models"), model)
        for key in ("max_model_len", "loaded_context_length", "context_length", "context_window"):
            if window is None and _positive(entry.get(key)):
                window, source = int(entry[key]), f"/v1/models {key}"
        props = await _get(http, f"{root}/props")
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
        if window is None and isinstance(n_ctx, int) and _positive(n_ctx):
            window, source = n_ctx, "/props n_ctx"
        if _positive(props.get("total_slots")):
            slots = int(props["total_slots"])
        if window is None:
            window, source = _ollama(await _post(http, f"{root}/api/show", {"model": model}))
        if window is None:
            lm_studio = _entry(await _get(http, f"{root}/api/v0/models"), model)
            if _positive(lm_studio.get("loaded_context_length")):
                window, source = int(lm_studio["loaded_context_length"]), "/api/v0/models loaded_context_length"
        tokenizer = await _tokenizer(http, root, model)
    return EndpointFacts(window, source, slots, tokenizer)


async def count_tokens(
    base_url: str, model: str, headers: dict[str, str], tokenizer: Tokenizer, texts: list[str]
) -> list[int] | None:
    """The model's own token count of each text, or None when the endpoint stops answering."""
    root = root_of(base_url)
    counts: list[int] = []
    async with httpx2.AsyncClient(timeout=60, headers=headers) as http:
        for text in texts:
            if tokenizer == "extras":
                data = await _post(http, f"{root}/extras/tokenize/count", {"input": text, "model": model})
                count = data.get("count")
            else:
                body = {"content": text} if tokenizer == "llama.cpp" else {"model": model, "prompt": text}
                data = await _post(http, f"{root}/tokenize", body, limit=max(PROBE_BODY_LIMIT, len(text) * 16))
                tokens = data.get("tokens")
                count = len(tokens) if isinstance(tokens, list) else data.get("count")
            if not isinstance(count, int):
                return None
            counts.append(count)
    return counts


async def _tokenizer(http: httpx2.AsyncClient, root: str, model: str) -> Tokenizer | None:
    if isinstance(
        (await _post(http, f"{root}/extras/tokenize/count", {"input": "a b", "model": model})).get("count"), int
    ):
        return "extras"
    answer = await _post(http, f"{root}/tokenize", {"content": "a b"})
    if isinstance(answer.get("tokens"), list):
        return "llama.cpp"
    answer = await _post(http, f"{root}/tokenize", {"model": model, "prompt": "a b"})
    if isinstance(answer.get("tokens"), list) or isinstance(answer.get("count"), int):
        return "vllm"
    return None


def _ollama(show: dict[str, Any]) -> tuple[int | None, str]:
    parameters = show.get("parameters")
    if isinstance(parameters, str) and (match := re.search(r"(?m)^\s*num_ctx\s+(\d+)", parameters)):
        return int(match.group(1)), "Ollama /api/show num_ctx"
    info = show.get("model_info")
    if not isinstance(info, dict):
        return None, ""
    trained = next((v for k, v in info.items() if k.endswith(".context_length") and _positive(v)), None)
    if trained is None:
        return None, ""
    return min(int(trained), OLLAMA_DEFAULT_CONTEXT), "Ollama's default num_ctx"


def _entry(listing: dict[str, Any], model: str) -> dict[str, Any]:
    """The model's entry in a `/models` list (the only one, if the server lists one under another name)."""
    data = listing.get("data")
    if not isinstance(data, list):
        return {}
    entries = [e for e in data if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model]
    return named[0] if named else entries[0] if len(entries) == 1 else {}


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


async def _get(http: httpx2.AsyncClient, url: str) -> dict[str, Any]:
    return await _json(http, "GET", url, None, PROBE_BODY_LIMIT)


async def _post(
    http: httpx2.AsyncClient, url: str, body: dict[str, Any], limit: int = PROBE_BODY_LIMIT
) -> dict[str, Any]:
    return await _json(http, "POST", url, body, limit)


async def _json(
    http: httpx2.AsyncClient, method: str, url: str, body: dict[str, Any] | None, limit: int
) -> dict[str, Any]:
    """The JSON object at `url`, or {} for anything else (an error, a timeout, a body past `limit`)."""
    try:
        async with http.stream(method, url, json=body) as response:
            if response.status_code != 200:
                return {}
            raw = bytearray()
            async for piece in response.aiter_bytes():
                raw += piece
                if len(raw) > limit:
                    return {}
        data = json.loads(raw)
    except (httpx2.HTTPError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}
