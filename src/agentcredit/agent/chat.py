"""Token-id pieces of a model's own chat format, derived once from its chat template.

Rollouts append these pieces as ids and never re-tokenise a whole conversation: re-tokenising
decoded text can merge tokens across a boundary and shift every position after it.
The pieces are found by rendering the template around sentinel strings and cutting the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentcredit.agent.protocol import ANSWER_OPEN, SYSTEM_PROMPT

_ACTION = "\u00a7ACTION\u00a7"
_OBSERVATION = "\u00a7OBSERVATION\u00a7"


@dataclass(frozen=True)
class ChatFormat:
    """Token ids of the fixed pieces around each message.

    A conversation is laid out as
        prompt | header action end | obs_open observation obs_close | header action end | ...
    where S_k (the TRACE state after k observations) ends right after obs_close, before the next header.
    """

    tokenizer: object
    system_prompt: str
    assistant_header: tuple[int, ...]  # opens a policy turn
    assistant_end: tuple[int, ...]  # closes a policy turn (appended, not sampled)
    obs_open: tuple[int, ...]  # opens the tool message
    obs_close: tuple[int, ...]  # closes the tool message
    eos_ids: tuple[int, ...]
    observation_role: str

    @classmethod
    def from_tokenizer(cls, tokenizer, system_prompt: str = SYSTEM_PROMPT) -> "ChatFormat":
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat_template; set one (ChatML works) before rolling out")
        base = [{"role": "system", "content": system_prompt}, {"role": "user", "content": "Q"}]
        prompt_text = _render(tokenizer, base, add_generation_prompt=False)
        with_header = _render(tokenizer, base, add_generation_prompt=True)
        if not with_header.startswith(prompt_text):
            raise ValueError("chat template: the generation prompt does not extend the prompt")
        header = with_header[len(prompt_text):]

        role, full = None, None
        for candidate in ("tool", "user"):
            messages = base + [
                {"role": "assistant", "content": _ACTION},
                {"role": candidate, "content": _OBSERVATION},
            ]
            try:
                full = _render(tokenizer, messages, add_generation_prompt=True)
            except Exception:  # templates that reject a role raise their own exception types
                continue
            if _ACTION in full and _OBSERVATION in full:
                role = candidate
                break
        if role is None:
            raise ValueError("chat template renders neither a tool nor a user message after an assistant turn")
        after_action = full.split(_ACTION, 1)[1]
        between, after_obs = after_action.split(_OBSERVATION, 1)
        if not after_obs.endswith(header):
            raise ValueError("chat template: the next assistant header does not follow the observation")
        obs_close_text = after_obs[: len(after_obs) - len(header)]
        # `between` = end of the assistant turn + opening of the observation message.
        end_text, obs_open_text = _split_end_and_open(between, role)

        encode = lambda s: tuple(tokenizer.encode(s, add_special_tokens=False)) if s else ()
        eos = tokenizer.eos_token_id
        eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else ((eos,) if eos is not None else ())
        end_ids = encode(end_text)
        # The turn-closing special token (e.g. <|im_end|>) also stops sampling.
        if end_ids and end_ids[0] not in eos_ids and len(end_text.strip()) and tokenizer.convert_ids_to_tokens(end_ids[0]) in tokenizer.all_special_tokens:
            eos_ids = eos_ids + (end_ids[0],)
        return cls(
            tokenizer=tokenizer,
            system_prompt=system_prompt,
            assistant_header=encode(header),
            assistant_end=end_ids,
            obs_open=encode(obs_open_text),
            obs_close=encode(obs_close_text),
            eos_ids=eos_ids,
            observation_role=role,
        )

    def prompt_ids(self, question: str) -> list[int]:
        """S_0: system and user messages, without the assistant header."""
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": question}]
        text = _render(self.tokenizer, messages, add_generation_prompt=False)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def observation_ids(self, observation_ids: list[int]) -> list[int]:
        return list(self.obs_open) + list(observation_ids) + list(self.obs_close)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    @property
    def answer_opener(self) -> list[int]:
        """What TRACE's reference scorer appends after S_k: a fresh assistant turn opened with <answer>."""
        return self.answer_opener_after("")

    def answer_opener_after(self, reasoning: str) -> list[int]:
        """A fresh assistant turn that starts with `reasoning` (e.g. the tiny testbed's plan note) and
        opens <answer>: the reference is scored where it would write an answer itself."""
        return list(self.assistant_header) + self.encode(reasoning + ANSWER_OPEN)


def _render(tokenizer, messages, add_generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def _split_end_and_open(between: str, role: str) -> tuple[str, str]:
    """Cut the text between an action and an observation into (end of action, start of observation).

    The observation message starts where its role name is introduced; for ChatML that is
    '<|im_start|>tool\\n'. We cut at the last line start before the role name.
    """
    at = between.rfind(role)
    if at == -1:
        return between, ""
    # Walk back to the beginning of the marker that introduces the role (e.g. '<|im_start|>').
    start = between.rfind("\n", 0, at) + 1
    marker_start = between.rfind("<", start, at)
    cut = marker_start if marker_start != -1 else start
    return between[:cut], between[cut:]
