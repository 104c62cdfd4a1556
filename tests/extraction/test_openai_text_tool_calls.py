"""Tool calls that a server without a tool-call parser leaves in the text (llama-cpp-python serving Qwen, found by
bench/extraction_eval.py) are read back, so read-grep works there too."""

from __future__ import annotations

from typing import Any

from extraction import ToolCall
from extraction.openai import _completion


def answer(content: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}], "usage": {"prompt_tokens": 9}}


def test_a_hermes_style_call_in_the_text_becomes_a_tool_call_when_tools_were_offered() -> None:
    text = 'Let me look.\n<tool_call>\n{"name": "Grep", "arguments": {"regex": "ERROR"}}\n</tool_call>'
    completion = _completion(answer(text), tools_offered=True)
    assert completion.tool_calls == (ToolCall("call-1", "Grep", {"regex": "ERROR"}),)
    assert completion.text == "Let me look."
    assert completion.input_tokens == 9


def test_several_calls_and_arguments_given_as_a_json_string_are_read() -> None:
    text = (
        '<tool_call>{"name": "Grep", "arguments": "{\\"regex\\": \\"TLS\\"}"}</tool_call>\n'
        '<tool_call>{"name": "Read", "arguments": {"start": 10, "lines": 5}}'  # the closing tag may be missing
    )
    completion = _completion(answer(text), tools_offered=True)
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("Grep", {"regex": "TLS"}),
        ("Read", {"start": 10, "lines": 5}),
    ]
    assert completion.text == ""


def test_text_calls_are_left_alone_when_no_tools_were_offered() -> None:
    text = '<tool_call>{"name": "Grep", "arguments": {"regex": "x"}}</tool_call>'
    completion = _completion(answer(text))
    assert completion.tool_calls == ()
    assert completion.text == text


def test_a_block_that_is_not_a_call_stays_in_the_text() -> None:
    text = '<tool_call>{not json}</tool_call> and <tool_call>{"name": 3}</tool_call>'
    completion = _completion(answer(text), tools_offered=True)
    assert completion.tool_calls == ()
    assert completion.text == text


def test_native_tool_calls_win_over_text() -> None:
    call = {"id": "c9", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    data = {"choices": [{"message": {"content": '<tool_call>{"name": "Grep", "arguments": {}}', "tool_calls": [call]}}]}
    completion = _completion(data, tools_offered=True)
    assert completion.tool_calls == (ToolCall("c9", "Read", {}),)
