"""The text protocol between the policy and the browser: system prompt, tool-call format, parser.

A policy turn is free text that ends in exactly one of
    <tool_call>{"name": "browser.search", "arguments": {"query": "...", "topn": 5}}</tool_call>
    <answer>...</answer>
Text before the tag is the turn's private reasoning and is allowed. Anything the parser cannot read
becomes an error observation: the rollout goes on and the diagnostics count it (never an exception).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from agentcredit.env.arguments import short_repr
from agentcredit.env.types import TOOL_NAMES, ToolCall

TOOL_OPEN, TOOL_CLOSE = "<tool_call>", "</tool_call>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
# Generation of one turn stops as soon as one of these closes.
STOP_STRINGS = (TOOL_CLOSE, ANSWER_CLOSE)

SYSTEM_PROMPT = """You answer questions by searching a closed corpus with browser tools.
Tools (TRACE Table 7):
- browser.search(query: str, topn: int = 10): top results with index, title, url and summary.
- browser.open(id: int = -1, loc: int = -1, num_lines: int = -1): open result `id` (zero-based) of the most recent search; -1 re-reads the current page; loc is the first line; num_lines -1 uses the default.
- browser.find(pattern: str, cursor: int = -1): line numbers of exact-text matches in the current page (cursor -1) or an earlier opened page.
Call one tool per turn as <tool_call>{"name": "browser.search", "arguments": {"query": "..."}}</tool_call>
When you know the answer, reply with <answer>short answer</answer> and nothing after it."""

# The tiny testbed reads every prompt token on every training step; this keeps the same rules in 1/10 the tokens.
COMPACT_SYSTEM_PROMPT = """Answer with browser tools: browser.search(query, topn), browser.open(id, loc, num_lines), browser.find(pattern, cursor).
One call per turn: <tool_call>{"name": ..., "arguments": {...}}</tool_call>. Finish with <answer>...</answer>."""

SYSTEM_PROMPTS = {"full": SYSTEM_PROMPT, "compact": COMPACT_SYSTEM_PROMPT}


def system_prompt(style: str) -> str:
    if style not in SYSTEM_PROMPTS:
        raise ValueError(f"model.system_prompt must be one of {sorted(SYSTEM_PROMPTS)}, got {style!r}")
    return SYSTEM_PROMPTS[style]


@dataclass(frozen=True)
class ParsedTurn:
    kind: Literal["tool", "answer", "invalid"]
    call: ToolCall | None = None
    answer: str | None = None
    error: str | None = None


FORMAT_HINT = 'Call a tool as <tool_call>{"name": ..., "arguments": {...}}</tool_call> or answer as <answer>...</answer>.'
MAX_ERROR_SNIPPET = 60
# Every error observation is cut to this many characters, as env.max_line_chars cuts page lines:
# whatever a policy writes, what it reads back stays small.
MAX_ERROR_CHARS = 300


def parse_turn(text: str) -> ParsedTurn:
    """Read one generated assistant turn. Never raises."""
    if not isinstance(text, str):
        return ParsedTurn("invalid", error="turn is not text")
    answer_at = text.find(ANSWER_OPEN)
    tool_at = text.find(TOOL_OPEN)
    # Whichever tag comes first decides the turn: a model that answers and then calls a tool has answered.
    if answer_at != -1 and (tool_at == -1 or answer_at < tool_at):
        return _parse_answer(text[answer_at + len(ANSWER_OPEN):])
    if tool_at != -1:
        return _parse_tool_call(text[tool_at + len(TOOL_OPEN):])
    return ParsedTurn("invalid", error="no tool call or answer found")


def _parse_answer(rest: str) -> ParsedTurn:
    close = rest.find(ANSWER_CLOSE)
    if close == -1:
        return ParsedTurn("invalid", error="answer block is not closed with </answer>")
    return ParsedTurn("answer", answer=rest[:close].strip())


def _parse_tool_call(rest: str) -> ParsedTurn:
    close = rest.find(TOOL_CLOSE)
    if close == -1:
        return ParsedTurn("invalid", error="tool call is not closed with </tool_call>")
    body = rest[:close].strip()
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, RecursionError, ValueError):
        return ParsedTurn("invalid", error=f"tool call is not valid JSON: {body[:MAX_ERROR_SNIPPET]!r}")
    if not isinstance(payload, dict):
        return ParsedTurn("invalid", error="tool call must be a JSON object with name and arguments")
    name = payload.get("name")
    if not isinstance(name, str) or name not in TOOL_NAMES:
        return ParsedTurn("invalid", error=f"unknown tool {short_repr(name, MAX_ERROR_SNIPPET)}; use one of {', '.join(TOOL_NAMES)}")
    arguments = payload.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ParsedTurn("invalid", error="tool arguments must be a JSON object")
    return ParsedTurn("tool", call=ToolCall(name, arguments))


def error_observation(error: str) -> str:
    if len(error) > MAX_ERROR_CHARS:
        error = error[: MAX_ERROR_CHARS - 1] + "…"
    return f"Error: {error}. {FORMAT_HINT}"


def render_tool_call(call: ToolCall) -> str:
    """The canonical text of a tool call; the warm-start data uses exactly this form."""
    payload = {"name": call.name, "arguments": call.arguments}
    return f"{TOOL_OPEN}{json.dumps(payload, ensure_ascii=False)}{TOOL_CLOSE}"


def render_answer(answer: str) -> str:
    return f"{ANSWER_OPEN}{answer}{ANSWER_CLOSE}"
