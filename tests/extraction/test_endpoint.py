"""What an endpoint says about itself (extraction.endpoint): each server's documented answer read in its place,
and nothing believed from an answer that is broken, too big or of another shape."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from extraction.endpoint import EndpointFacts, count_tokens, is_local, probe, root_of, window_in_error
from tests.support.app_server import served

pytestmark = pytest.mark.anyio


def app_of(routes: dict[tuple[str, str], Any]) -> Starlette:
    """An app answering each (method, path) with its JSON (or a Response, or a function of the request body)."""

    def route(path: str, method: str, answer: Any) -> Route:
        async def endpoint(request: Request) -> Response:
            if isinstance(answer, Response):
                return answer
            if callable(answer):
                return JSONResponse(answer(await request.json()))
            return JSONResponse(answer)

        return Route(path, endpoint, methods=[method])

    return Starlette(routes=[route(path, method, answer) for (method, path), answer in routes.items()])


async def facts_of(routes: dict[tuple[str, str], Any], model: str = "m") -> EndpointFacts:
    async with served(app_of(routes)) as root:
        with anyio.fail_after(30):
            return await probe(f"{root}/v1", model, {})


async def test_vllm_says_its_window_in_the_model_list_and_counts_with_its_tokenizer() -> None:
    routes = {
        ("GET", "/v1/models"): {"data": [{"id": "other", "max_model_len": 4096}, {"id": "m", "max_model_len": 32768}]},
        ("POST", "/tokenize"): lambda body: {"count": 3, "tokens": [1, 2, 3]} if "prompt" in body else {},
    }
    assert await facts_of(routes) == EndpointFacts(32768, "/v1/models max_model_len", None, "vllm")


async def test_llama_cpp_server_says_its_window_and_slots_in_props() -> None:
    props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 2}
    routes = {
        ("GET", "/v1/models"): {"data": [{"id": "m", "meta": {"n_ctx_train": 131072}}]},  # trained, not served
        ("GET", "/props"): props,
        ("POST", "/tokenize"): lambda body: {"tokens": [1, 2]} if "content" in body else {},
    }
    assert await facts_of(routes) == EndpointFacts(8192, "/props n_ctx", 2, "llama.cpp")


async def test_llama_cpp_python_says_no_window_but_has_its_tokenizer() -> None:
    routes = {
        ("GET", "/v1/models"): {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "me"}]},
        ("POST", "/extras/tokenize/count"): {"count": 2},
    }
    assert await facts_of(routes) == EndpointFacts(None, "", None, "extras")


@pytest.mark.parametrize(
    ("show", "window", "said"),
    [
        (
            {"parameters": "temperature 0\nnum_ctx 16384", "model_info": {"qwen2.context_length": 32768}},
            16384,
            "num_ctx",
        ),
        ({"model_info": {"qwen2.context_length": 32768}}, 4096, "default"),  # Ollama serves 4096 unless told
        ({"model_info": {"llama.context_length": 2048}}, 2048, "default"),
    ],
)
async def test_ollama_serves_num_ctx_else_its_default_capped_by_the_models_length(
    show: dict[str, Any], window: int, said: str
) -> None:
    facts = await facts_of({("POST", "/api/show"): lambda body: show if body == {"model": "m"} else {}})
    assert (facts.context_window, facts.tokenizer) == (window, None)
    assert said in facts.window_from


async def test_lm_studio_says_the_loaded_window() -> None:
    listing = {"data": [{"id": "m", "max_context_length": 131072, "loaded_context_length": 4096}]}
    facts = await facts_of({("GET", "/api/v0/models"): listing})
    assert facts.context_window == 4096


@pytest.mark.parametrize(
    "answer",
    [
        PlainTextResponse("{not json"),
        JSONResponse([{"max_model_len": 9}]),  # a list, not the object the servers answer
        JSONResponse({"data": [{"id": "m", "max_model_len": "8192"}]}),  # a string is no window
        JSONResponse({"data": [{"id": "m", "max_model_len": True}]}),
        JSONResponse({"data": [{"id": "m", "max_model_len": -5}]}),
        JSONResponse({"data": [{"id": "m", "max_model_len": 7}], "pad": "x" * (2 << 20)}),  # past the 1 MiB bound
        JSONResponse({"data": [{"id": "m", "max_model_len": 7}]}, status_code=500),
    ],
    ids=["not json", "a list", "a string", "a boolean", "negative", "too big", "an error status"],
)
async def test_nothing_is_believed_from_a_broken_or_oversized_answer(answer: Response) -> None:
    assert await facts_of({("GET", "/v1/models"): answer}) == EndpointFacts()


async def test_a_hosted_endpoint_that_says_nothing_gives_empty_facts_and_a_refused_connection_too() -> None:
    assert await facts_of({("GET", "/v1/models"): {"data": [{"id": "gpt"}, {"id": "m"}]}}) == EndpointFacts()
    with anyio.fail_after(30):
        assert await probe("http://127.0.0.1:9/v1", "m", {}) == EndpointFacts()  # discard port: nothing listens


async def test_the_models_own_counts_come_back_in_order() -> None:
    routes = {("POST", "/extras/tokenize/count"): lambda body: {"count": len(body["input"].split())}}
    async with served(app_of(routes)) as root:
        with anyio.fail_after(30):
            assert await count_tokens(f"{root}/v1", "m", {}, "extras", ["a b c", "d", "e f"]) == [3, 1, 2]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # OpenAI, vLLM and llama-cpp-python word it the same way
        ("This model's maximum context length is 8192 tokens. However, you requested 8736 tokens", (True, 8192)),
        (
            json.dumps(
                {
                    "error": {
                        "code": 400,
                        "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": 4476,
                        "n_ctx": 4096,
                    }
                }
            ),
            (True, 4096),
        ),
        ('{"error": {"type": "exceed_context_size_error", "n_ctx": 2048}}', (True, 2048)),
        ('{"error": {"code": "context_length_exceeded", "message": "too long"}}', (True, None)),
        ('{"error": {"message": "model not found"}}', (False, None)),
        ("[" * 100_000, (False, None)),  # too deep to parse: not an error about the context
    ],
)
def test_a_context_length_error_is_known_and_its_window_read(body: str, expected: tuple[bool, int | None]) -> None:
    assert window_in_error(body) == expected


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://[::1]:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://8.8.8.8/v1", False),
    ],
)
def test_an_endpoint_on_this_machine_or_a_private_network_is_local(url: str, local: bool) -> None:
    assert is_local(url) is local


def test_the_root_is_the_base_url_without_v1() -> None:
    assert root_of("http://h:1/v1/") == root_of("http://h:1/v1") == "http://h:1"
    assert root_of("http://h:1/api/openai") == "http://h:1/api/openai"
