"""`judge=openai`: the agentic judge served by any OpenAI-compatible chat-completions endpoint.

    AGENTCREDIT_JUDGE_BASE_URL=http://localhost:8000/v1 AGENTCREDIT_JUDGE_MODEL=my-model \
        python train.py credit=prover judge=openai

Base URL, model and key come from the config (``judge.base_url`` …) or, when those are null, from
AGENTCREDIT_JUDGE_BASE_URL, AGENTCREDIT_JUDGE_MODEL and AGENTCREDIT_JUDGE_API_KEY (environment or
`.env`; a key is refused on the command line, see `secret_keys.py`). Without a base URL the endpoint
is the OpenAI API itself, never $OPENAI_BASE_URL: the key goes only where the project was configured
to send it, and the endpoint is logged when the judge is built. The tools go out as function tools;
every request has ``timeout_s`` (capped by the step's judge budget, `judge/budget.py`) for its whole
reply, however slowly it arrives, and at most ``max_reply_bytes`` of it (`judge/reply_deadline.py`); a
redirect to another origin is refused; transient
failures are retried ``max_retries`` times inside that budget, replies are capped at
``max_completion_tokens``, and any transport error or timeout becomes a ``JudgeError`` (the group
keeps GRPO credit; training goes on).
"""

from __future__ import annotations

import logging
import os

from agentcredit.common.secret_keys import url_for_logs
from agentcredit.judge.agentic import AssistantTurn, ToolCallRequest
from agentcredit.judge.base import JudgeError
from agentcredit.judge.budget import capped_timeout
from agentcredit.judge.reply_deadline import DEFAULT_MAX_REPLY_BYTES, call_before, deadline_http_client

log = logging.getLogger(__name__)

ENV_BASE_URL = "AGENTCREDIT_JUDGE_BASE_URL"
ENV_MODEL = "AGENTCREDIT_JUDGE_MODEL"
ENV_API_KEY = "AGENTCREDIT_JUDGE_API_KEY"
# Self-hosted endpoints (vLLM, llama.cpp, …) often need no key, but the client insists on one.
NO_KEY = "unused"


OPENAI_API = "https://api.openai.com/v1"
# A reply longer than this is cut: the judge answers with a short JSON object, and a small model left
# uncapped can write thousands of tokens past the timeout.
DEFAULT_MAX_COMPLETION_TOKENS = 512


class OpenAIChatBackend:
    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 2, temperature: float | None = None,
                 max_completion_tokens: int | None = DEFAULT_MAX_COMPLETION_TOKENS,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES):
        from openai import OpenAI

        if float(timeout_s) <= 0:
            raise ValueError(f"judge.timeout_s must be > 0, got {timeout_s}")
        if not (isinstance(max_reply_bytes, int) and not isinstance(max_reply_bytes, bool) and max_reply_bytes >= 1):
            raise ValueError(f"judge.max_reply_bytes must be an integer >= 1, got {max_reply_bytes!r}")
        self.model = model
        # Explicit, never None: the client would otherwise read OPENAI_BASE_URL and send the key there.
        self.base_url = base_url or OPENAI_API
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.temperature = temperature
        self.max_completion_tokens = max_completion_tokens
        self.max_reply_bytes = max_reply_bytes
        # Retries happen in `complete`, inside the step's judge budget; the client's own would not count.
        self.client = OpenAI(base_url=self.base_url, api_key=api_key, timeout=self.timeout_s, max_retries=0,
                             http_client=deadline_http_client(max_reply_bytes))

    @classmethod
    def from_config(cls, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                    **options) -> "OpenAIChatBackend":
        base_url = base_url or os.environ.get(ENV_BASE_URL) or None
        model = model or os.environ.get(ENV_MODEL) or None
        api_key = api_key or os.environ.get(ENV_API_KEY) or None
        if not model:
            raise ValueError(f"judge=openai needs a model name: set {ENV_MODEL} or judge.model=<name>")
        if base_url is None and api_key is None:
            raise ValueError(f"judge=openai needs an endpoint: set {ENV_BASE_URL} (self-hosted) or {ENV_API_KEY} "
                             "(the OpenAI API), or judge.base_url / judge.api_key")
        backend = cls(model, base_url, api_key or NO_KEY, **options)
        key = f"the key from {ENV_API_KEY}" if api_key else "no key"
        log.info(f"judge=openai: model {model} at {url_for_logs(backend.base_url)}, with {key}")
        return backend

    def _create(self, request: dict):
        """One chat completion with up to `max_retries` retries of transient failures, every attempt's
        timeout capped by what is left of the step's judge budget."""
        import openai

        transient = (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
        for attempt in range(self.max_retries + 1):
            timeout = capped_timeout(self.timeout_s)
            try:
                # The client's timeout bounds each read; call_before bounds the whole reply (a slow drip).
                return call_before(timeout, lambda: self.client.chat.completions.create(**request, timeout=timeout))
            except (*transient, TimeoutError) as err:
                if attempt == self.max_retries:
                    if isinstance(err, (openai.APITimeoutError, TimeoutError)):
                        raise JudgeError(f"the judge endpoint gave no answer within {timeout:g}s "
                                         f"(judge.timeout_s={self.timeout_s:g}, {attempt + 1} tries)") from err
                    raise JudgeError(f"the judge endpoint failed: {type(err).__name__}: {err}") from err
            except openai.OpenAIError as err:
                raise JudgeError(f"the judge endpoint failed: {type(err).__name__}: {err}") from err
            except ValueError as err:  # the client parses the body itself; a non-JSON body surfaces as ValueError
                raise JudgeError(f"the judge endpoint's reply is not a chat completion: {err}") from err
        raise AssertionError("unreachable")

    def complete(self, messages: list[dict], tools: list[dict] | None) -> AssistantTurn:
        request: dict = {"model": self.model, "messages": messages}
        if tools:
            request["tools"] = tools
        if self.temperature is not None:
            request["temperature"] = float(self.temperature)
        if self.max_completion_tokens is not None:
            request["max_completion_tokens"] = int(self.max_completion_tokens)
        response = self._create(request)
        choices = getattr(response, "choices", None)
        if not choices:
            raise JudgeError("the judge endpoint returned no choices; check that it speaks chat completions")
        message = choices[0].message
        calls = tuple(
            ToolCallRequest(call.id, call.function.name, call.function.arguments or "")
            for call in (message.tool_calls or [])
            if getattr(call, "function", None) is not None
        )
        usage = getattr(response, "usage", None)
        tokens = int(getattr(usage, "total_tokens", 0) or 0) if usage is not None else 0
        return AssistantTurn(message.content, calls, tokens)
