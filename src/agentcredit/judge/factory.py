"""`build_judge(cfg.judge)`: the segment judge named by ``kind`` in a `conf/judge/*.yaml` group."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from agentcredit.judge.agentic import AgenticJudge
from agentcredit.judge.base import Judge
from agentcredit.judge.heuristic import HeuristicJudge
from agentcredit.judge.local import LocalChatBackend, hf_generator
from agentcredit.judge.openai_judge import OpenAIChatBackend
from agentcredit.judge.random_judge import RandomJudge

AGENTIC_KNOBS = ("max_tool_rounds", "observation_chars", "preview_chars", "preview_turns")
LOCAL_MODEL_KINDS = ("smollm2_135m", "hf")


def _split(cfg: dict, names: tuple[str, ...]) -> tuple[dict, dict]:
    return {k: v for k, v in cfg.items() if k in names}, {k: v for k, v in cfg.items() if k not in names}


def _check_keys(kind: str, cfg: dict, allowed: set[str]) -> None:
    unknown = sorted(set(cfg) - allowed)
    if unknown:
        raise ValueError(f"judge={kind} does not take {', '.join(unknown)}; its keys are {', '.join(sorted(allowed))}")


def _parameters(fn: Callable) -> set[str]:
    return {n for n in inspect.signature(fn).parameters if n not in ("self", "options", "cls")}


def _random(cfg: dict) -> Judge:
    _check_keys("random", cfg, {"seed", "mode"})
    return RandomJudge(**cfg)


def _heuristic(cfg: dict) -> Judge:
    _check_keys("heuristic", cfg, set())
    return HeuristicJudge()


def _openai(cfg: dict) -> Judge:
    agentic, backend = _split(cfg, AGENTIC_KNOBS)
    _check_keys("openai", backend, _parameters(OpenAIChatBackend.from_config) | _parameters(OpenAIChatBackend.__init__))
    return AgenticJudge(OpenAIChatBackend.from_config(**backend), **agentic)


def _local(cfg: dict) -> Judge:
    agentic, rest = _split(cfg, AGENTIC_KNOBS)
    _check_keys("local", rest, {"model"} | _parameters(hf_generator) - {"model", "tokenizer"})
    model_cfg = dict(rest.pop("model", None) or {})
    if model_cfg.get("kind") not in LOCAL_MODEL_KINDS:
        raise ValueError(f"judge.model.kind must be one of {list(LOCAL_MODEL_KINDS)} (a pretrained chat model), "
                         f"got {model_cfg.get('kind')!r}")
    model_cfg["lora"] = {"enabled": False}  # the judge is never trained
    from agentcredit.models.loading import load_policy  # transformers is slow to import; only this judge needs it

    model, tokenizer = load_policy(model_cfg)
    model.eval()
    return AgenticJudge(LocalChatBackend(hf_generator(model, tokenizer, **rest)), **agentic)


BUILDERS: dict[str, Callable[[dict], Judge]] = {
    "random": _random, "heuristic": _heuristic, "openai": _openai, "local": _local,
}


def build_judge(judge_cfg: Mapping[str, Any]) -> Judge:
    """The judge of a `conf/judge/<kind>.yaml` group (a plain mapping; ``kind`` selects the judge)."""
    cfg = dict(judge_cfg)
    kind = cfg.pop("kind", None)
    cfg.pop("step_budget_s", None)  # the verifier's per-step limit (judge/verification.py), not the judge's
    if kind not in BUILDERS:
        raise ValueError(f"judge.kind={kind!r} is not known; use judge= one of {sorted(BUILDERS)}")
    return BUILDERS[kind](cfg)
