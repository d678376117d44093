"""Tool-call parsing: valid calls round-trip, and malformed policy output never raises."""

import json
import random
import string

import pytest

from agentcredit.agent.protocol import (
    ParsedTurn,
    error_observation,
    parse_turn,
    render_answer,
    render_tool_call,
)
from agentcredit.env.types import ToolCall


def test_valid_tool_call_round_trips():
    call = ToolCall("browser.search", {"query": "Lena Marsh award", "topn": 5})
    parsed = parse_turn("I should search first. " + render_tool_call(call))
    assert parsed == ParsedTurn("tool", call=call)


def test_answer_is_extracted_and_wins_over_a_later_tool_call():
    parsed = parse_turn(render_answer(" Harbor Lights ") + render_tool_call(ToolCall("browser.open", {"id": 0})))
    assert parsed.kind == "answer" and parsed.answer == "Harbor Lights"


def test_missing_arguments_means_defaults():
    parsed = parse_turn('<tool_call>{"name": "browser.open"}</tool_call>')
    assert parsed.kind == "tool" and parsed.call == ToolCall("browser.open", {})


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("just some words", "no tool call or answer"),
        ("<tool_call>{\"name\": \"browser.search\"", "not closed"),
        ("<tool_call>{name: browser.search}</tool_call>", "not valid JSON"),
        ('<tool_call>["browser.search"]</tool_call>', "JSON object"),
        ('<tool_call>{"name": "browser.delete", "arguments": {}}</tool_call>', "unknown tool"),
        ('<tool_call>{"name": "browser.find", "arguments": "x"}</tool_call>', "arguments must be"),
        ("<answer>never closed", "not closed"),
    ],
)
def test_malformed_turns_name_the_problem(text, fragment):
    parsed = parse_turn(text)
    assert parsed.kind == "invalid"
    assert fragment in parsed.error
    assert error_observation(parsed.error).startswith("Error: ")


def _fuzz_text(rng: random.Random) -> str:
    pieces = [
        "<tool_call>", "</tool_call>", "<answer>", "</answer>", "{", "}", "[", "]", '"name"', '"arguments"',
        ":", ",", '"browser.search"', '"browser.open"', '"browser.find"', '"query"', "null", "1e999", "-1",
        "\\", "\x00", "\u2028", "{" * 50, "true", " ",
    ]
    out = []
    for _ in range(rng.randint(0, 30)):
        if rng.random() < 0.7:
            out.append(rng.choice(pieces))
        else:
            out.append("".join(rng.choice(string.printable) for _ in range(rng.randint(1, 12))))
    return "".join(out)


def test_five_hundred_fuzzed_outputs_never_raise():
    rng = random.Random(0)
    kinds = {"tool": 0, "answer": 0, "invalid": 0}
    for _ in range(600):
        parsed = parse_turn(_fuzz_text(rng))
        kinds[parsed.kind] += 1
        if parsed.kind == "tool":
            assert isinstance(parsed.call.arguments, dict)
        if parsed.kind == "invalid":
            assert parsed.error
    assert kinds["invalid"] > 300  # the fuzzer mostly produces garbage, as intended


def test_deeply_nested_json_is_an_error_not_a_crash():
    body = "[" * 100_000 + "]" * 100_000
    parsed = parse_turn(f"<tool_call>{body}</tool_call>")
    assert parsed.kind == "invalid"


def test_non_string_input_is_invalid():
    assert parse_turn(None).kind == "invalid"  # type: ignore[arg-type]


def test_rendered_call_is_json_inside_tags():
    text = render_tool_call(ToolCall("browser.find", {"pattern": "a.b*"}))
    inner = text[len("<tool_call>"): -len("</tool_call>")]
    assert json.loads(inner) == {"name": "browser.find", "arguments": {"pattern": "a.b*"}}
