"""Which transport a server's URL is reached over after a failed attempt (`connect.Reach`): the whole sequence,
without a network (the subprocess tests meet it against real servers)."""

from __future__ import annotations

from server.config_sections import ServerConfig
from server.downstream.connect import Reach

URL = "http://127.0.0.1:9/mcp"


def test_a_url_of_no_type_refused_with_a_4xx_is_tried_over_sse_once_and_then_both_answers_are_said() -> None:
    reach = Reach(ServerConfig(url=URL))
    assert reach.kind == "streamable-http"
    assert reach.after_failure("HTTP 405", 405) == (True, "HTTP 405")
    assert reach.kind == "sse"
    assert reach.after_failure("HTTP 404", 404) == (False, "HTTP 405 (tried over SSE too: HTTP 404)")
    assert reach.kind == "streamable-http"  # the next attempt starts over


def test_no_other_transport_is_tried_for_a_refusal_a_server_error_or_a_command() -> None:
    for status in (401, 403, 500, None):
        reach = Reach(ServerConfig(url=URL))
        assert reach.after_failure("why", status) == (False, "why")
        assert reach.kind == "streamable-http"
    assert Reach(ServerConfig(command="srv")).after_failure("why", 404) == (False, "why")


def test_a_url_with_a_type_answered_4xx_says_how_to_ask_for_the_other_transport() -> None:
    said = Reach(ServerConfig(url=URL, transport="sse")).after_failure("HTTP 405", 405)
    assert said == (False, 'HTTP 405 (if it serves streamable HTTP, its "type" is "http"; or leave "type" out)')
    said = Reach(ServerConfig(url=URL, transport="streamable-http")).after_failure("HTTP 404", 404)
    assert said == (False, 'HTTP 404 (if it serves SSE, its "type" is "sse"; or leave "type" out)')
    assert Reach(ServerConfig(url=URL, transport="sse")).after_failure("gone", None) == (False, "gone")


def test_a_url_of_no_path_that_neither_transport_answers_says_a_server_answers_at_one() -> None:
    reach = Reach(ServerConfig(url="http://127.0.0.1:3000"))
    assert reach.after_failure("HTTP 404", 404) == (True, "HTTP 404")
    assert reach.after_failure("HTTP 404", 404) == (
        False,
        "HTTP 404 (tried over SSE too: HTTP 404); its URL has no path: a server answers at one, such as /mcp or /sse",
    )
