"""Which transport a server's URL is reached over after a failed attempt (`connect.Reach`): the whole sequence,
without a network (the subprocess tests meet it against real servers)."""

from __future__ import annotations

import socket

import httpx2

from server.config_sections import ServerConfig
from server.downstream.connect import Reach
from server.downstream.listing import describe

URL = "http://127.0.0.1:9/mcp"


def test_a_url_of_no_type_refused_with_a_4xx_is_tried_over_sse_once_and_then_both_answers_are_said() -> None:
    reach = Reach(ServerConfig(url=URL))
    assert reach.kind == "streamable-http"
    assert reach.after_failure("HTTP 405", 405) == (True, "HTTP 405")
    assert reach.kind == "sse"
    said = reach.after_failure("HTTP 404", 404)
    assert said == (False, "HTTP 405 (tried over SSE too: HTTP 404 Not Found (nothing serves MCP at this path))")
    assert reach.kind == "streamable-http"  # the next attempt starts over


def test_no_other_transport_is_tried_for_a_refusal_a_server_error_or_a_command() -> None:
    for status in (401, 403, 500, None):
        reach = Reach(ServerConfig(url=URL))
        said = reach.after_failure("why", status)
        if status == 500:  # the SDK's "Server returned an error response (JSON-RPC error -32603)", in words
            assert said == (False, f"{URL}: HTTP 500: the server failed to answer `initialize` (its log says why)")
        else:
            assert said == (False, "why")
        assert reach.kind == "streamable-http"
    assert Reach(ServerConfig(command="srv")).after_failure("why", 404) == (False, "why")


def test_a_url_with_a_type_answered_4xx_says_how_to_ask_for_the_other_transport() -> None:
    said = Reach(ServerConfig(url=URL, transport="sse")).after_failure("HTTP 405", 405)
    assert said == (False, 'HTTP 405 (if it serves streamable HTTP, its "type" is "http"; or leave "type" out)')
    said = Reach(ServerConfig(url=URL, transport="streamable-http")).after_failure("HTTP 404", 404)
    answer = f"{URL}: HTTP 404 Not Found (nothing serves MCP at this path)"
    assert said == (False, f'{answer} (if it serves SSE, its "type" is "sse"; or leave "type" out)')
    assert Reach(ServerConfig(url=URL, transport="sse")).after_failure("gone", None) == (False, "gone")


def test_a_url_of_no_path_that_neither_transport_answers_says_a_server_answers_at_one() -> None:
    reach = Reach(ServerConfig(url="http://127.0.0.1:3000"))
    first = "http://127.0.0.1:3000: HTTP 404 Not Found (nothing serves MCP at this path)"
    assert reach.after_failure("Not Found (JSON-RPC error -32601)", 404) == (True, first)
    assert reach.after_failure("HTTP 404 Not Found (from http://127.0.0.1:3000)", 404) == (
        False,
        "http://127.0.0.1:3000: HTTP 404 Not Found over streamable HTTP and SSE (nothing serves MCP at this path); "
        "its URL has no path: a server answers at one, such as /mcp or /sse",
    )


def test_a_host_that_does_not_resolve_is_told_from_a_port_where_nothing_listens() -> None:
    """httpx's ConnectError says "[Errno -2] Name or service not known" or "All connection attempts failed": the
    first is the URL's host, the second the server not running (or the port wrong)."""
    try:
        try:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        except socket.gaierror as exc:
            raise httpx2.ConnectError(str(exc)) from exc
    except httpx2.ConnectError as exc:
        unknown = exc
    assert describe(unknown) == "its host name is not known (Name or service not known)"
    refused = httpx2.ConnectError("All connection attempts failed")
    assert (
        describe(refused)
        == "nothing answered a connection there (refused or unreachable: All connection attempts failed)"
    )
    assert describe(httpx2.ConnectTimeout("")) == "nothing answered a connection there (it timed out)"
