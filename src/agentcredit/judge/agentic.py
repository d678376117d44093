"""The agentic judge protocol, shared by the OpenAI-compatible and the local judges.

The conversation is kept in the OpenAI chat-completions message format (system, user, assistant
with ``tool_calls``, ``tool`` replies); a backend only has to turn a message list into the next
assistant turn. The loop runs tools until the model answers without calling one, then reads the
answer as a proposal. A correction continues the same conversation with the validation error as a
new user turn, so the judge keeps what it already looked up.

The last allowed round offers no tools, which asks the model to answer with what it has; a model
that still calls a tool then has failed (``JudgeError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agentcredit.judge.base import JudgeError, Proposal, parse_proposal
from agentcredit.judge.budget import check_budget
from agentcredit.judge.context import JudgeContext
from agentcredit.judge.prompt import correction_message, system_message, user_message
from agentcredit.judge.tools import TOOL_SPECS, run_tool


@dataclass(frozen=True)
class ToolCallRequest:
    id: str
    name: str
    arguments: str  # JSON text, as the chat-completions protocol carries it


@dataclass(frozen=True)
class AssistantTurn:
    content: str | None
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tokens: int = 0  # prompt + completion tokens the backend spent on this turn


class ChatBackend(Protocol):
    def complete(self, messages: list[dict], tools: list[dict] | None) -> AssistantTurn:
        """The next assistant turn; raises JudgeError when the model cannot be reached or times out."""
        ...


def assistant_message(turn: AssistantTurn) -> dict:
    message: dict = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
    return message


@dataclass
class AgenticJudge:
    """A judge that is an LLM with the two trajectory tools (``judge.tools``)."""

    backend: ChatBackend
    max_tool_rounds: int = 6
    observation_chars: int = 2000  # per observation in the EXPERT and in get_segment replies
    preview_chars: int = 240  # per turn in search results and failed-trajectory indexes
    preview_turns: int = 3  # actions shown per failed trajectory in the user message

    def __post_init__(self):
        if int(self.max_tool_rounds) < 0:
            raise ValueError(f"judge.max_tool_rounds must be >= 0, got {self.max_tool_rounds}")

    def propose(self, context: JudgeContext) -> Proposal:
        messages = [system_message(context),
                    user_message(context, observation_chars=self.observation_chars,
                                 preview_turns=self.preview_turns, preview_chars=self.preview_chars)]
        return self._converse(context, messages, spent=0)

    def correct(self, context: JudgeContext, previous: Proposal, reason: str) -> Proposal:
        if not previous.transcript:
            raise JudgeError("there is no judge conversation to continue with a correction")
        return self._converse(context, list(previous.transcript) + [correction_message(reason)], previous.judge_tokens)

    def _converse(self, context: JudgeContext, messages: list[dict], spent: int) -> Proposal:
        for round_ in range(self.max_tool_rounds + 1):
            tools = TOOL_SPECS if round_ < self.max_tool_rounds else None
            check_budget()  # a slow judge stops between rounds once the step's budget is spent
            turn = self.backend.complete(messages, tools)
            spent += turn.tokens
            messages.append(assistant_message(turn))
            if not turn.tool_calls:
                return parse_proposal(turn.content, transcript=tuple(messages), judge_tokens=spent)
            if tools is None:
                break
            for call in turn.tool_calls:
                reply = run_tool(context, call.name, call.arguments, preview_chars=self.preview_chars,
                                 max_chars=self.observation_chars)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": reply})
        raise JudgeError(f"the judge kept calling tools after {self.max_tool_rounds} tool rounds without answering; "
                         "raise judge.max_tool_rounds or use a stronger judge model")
