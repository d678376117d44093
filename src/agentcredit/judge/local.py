"""`judge=local`: the agentic judge driven by a local Hugging Face model (e.g. SmolLM2-135M-Instruct).

    python train.py credit=prover judge=local

A local chat template may know nothing about function tools, so the protocol goes through text:
the tool schemas are appended to the system message, the model calls a tool by writing
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the same tag the policy uses), and a
tool's reply comes back as a user turn. Generation is greedy and bounded by ``max_new_tokens`` and
``timeout_s`` (HF ``max_time``). A 135M model rarely follows this protocol; its failures go through
the usual path (correction turns, then GRPO credit for the group).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import torch

from agentcredit.judge.agentic import AssistantTurn, ToolCallRequest
from agentcredit.judge.base import JudgeError
from agentcredit.judge.budget import capped_timeout

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

# (template messages) -> (generated text, tokens spent)
GenerateText = Callable[[list[dict]], tuple[str, int]]


def tools_instructions(tools: list[dict]) -> str:
    schemas = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in tools)
    return ("\n\nYou may call one of these tools before answering:\n" + schemas +
            '\nTo call a tool, write only <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> and stop; '
            "its result comes back in the next message.")


def render_messages(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """OpenAI-format messages as plain system/user/assistant turns any chat template accepts."""
    names = {}  # tool_call_id -> tool name, to label replies
    rendered = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            rendered.append({"role": "system", "content": content + (tools_instructions(tools) if tools else "")})
        elif role == "assistant":
            for call in message.get("tool_calls", []):
                names[call["id"]] = call["function"]["name"]
            rendered.append({"role": "assistant", "content": content})
        elif role == "tool":
            name = names.get(message.get("tool_call_id"), "tool")
            rendered.append({"role": "user", "content": f"Result of {name}:\n{content}"})
        else:
            rendered.append({"role": role, "content": content})
    return rendered


def parse_reply(text: str, call_offset: int = 0) -> AssistantTurn:
    """The generated text with its tool calls; unreadable tool calls are left to the text (and so fail
    as a proposal with a correction message, rather than as a tool error)."""
    calls = []
    for body in _TOOL_CALL.findall(text):
        try:
            payload = json.loads(body.strip())
        except json.JSONDecodeError:
            continue
        if isinstance(payload, dict) and isinstance(payload.get("name"), str):
            arguments = payload.get("arguments", {})
            calls.append(ToolCallRequest(f"call_{call_offset + len(calls)}", payload["name"], json.dumps(arguments)))
    return AssistantTurn(text, tuple(calls))


class LocalChatBackend:
    def __init__(self, generate: GenerateText):
        self.generate = generate
        self.calls_made = 0  # gives tool calls ids that are unique within a conversation

    def complete(self, messages: list[dict], tools: list[dict] | None) -> AssistantTurn:
        text, tokens = self.generate(render_messages(messages, tools))
        turn = parse_reply(text, self.calls_made)
        self.calls_made += len(turn.tool_calls)
        return AssistantTurn(turn.content, turn.tool_calls, tokens)


def hf_generator(model, tokenizer, max_new_tokens: int = 192, max_prompt_tokens: int = 6144,
                 timeout_s: float = 120.0) -> GenerateText:
    """Greedy generation with ``model`` through ``tokenizer``'s chat template."""

    @torch.no_grad()
    def generate(messages: list[dict]) -> tuple[str, int]:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        if not isinstance(ids, list):  # some tokenizers return an encoding object
            ids = ids["input_ids"]
        if len(ids) > max_prompt_tokens:
            raise JudgeError(f"the judge prompt has {len(ids)} tokens, over "
                             f"judge.max_prompt_tokens={max_prompt_tokens}; "
                             "lower judge.observation_chars or use a larger-context judge")
        device = next(model.parameters()).device
        input_ids = torch.tensor([ids], device=device)  # (1, P)
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=max_new_tokens,
                             do_sample=False, max_time=capped_timeout(timeout_s), pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id)  # (1, P + N)
        new = out[0, input_ids.shape[1]:]
        return tokenizer.decode(new, skip_special_tokens=True), int(out.shape[1])

    return generate
