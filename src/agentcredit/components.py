"""Build the run's objects from the composed Hydra config, shared by training, evaluation and scripts.

Order matters only where one object needs another: the world (and its corpus) comes first because
the tiny testbed fits its tokenizer on it; the base policy is restored (or built) into the plain
model, then LoRA wraps it, and only then is the reference copy taken, so that the reference is the
policy's *initial* RL weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from omegaconf import DictConfig, OmegaConf

from agentcredit.agent.chat import ChatFormat
from agentcredit.agent.protocol import SYSTEM_PROMPT, system_prompt
from agentcredit.agent.rollout import RolloutConfig
from agentcredit.env.corpus import Corpus
from agentcredit.env.factory import make_env_factory
from agentcredit.env.reward import answer_is_well_formed, extract_answer, score_answer
from agentcredit.models.tokenizer import CHAT_ROLES
from agentcredit.world.types import Question


def plain(cfg: DictConfig | dict | None) -> dict:
    if cfg is None:
        return {}
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return dict(cfg)


def make_reward_fn(env_cfg: dict) -> Callable[[str | None, Question], tuple[float, str | None, bool]]:
    reward_cfg = env_cfg.get("reward", {}) or {}
    correct, fmt = float(reward_cfg.get("correct_score", 1.0)), float(reward_cfg.get("format_score", 0.1))

    def reward_fn(final_text: str | None, question: Question) -> tuple[float, str | None, bool]:
        return score_answer(final_text, question.answer, correct, fmt), extract_answer(final_text), answer_is_well_formed(final_text)

    return reward_fn


@dataclass
class Components:
    datamodule: Any
    corpus: Corpus
    env_factory: Callable
    reward_fn: Callable
    policy: torch.nn.Module
    tokenizer: Any
    chat: ChatFormat
    rollout_cfg: RolloutConfig
    base_policy_info: dict | None = None


def build_components(cfg: DictConfig, *, progress: bool = True, base_policy: bool = True) -> Components:
    """`base_policy=False` leaves a warm-started model at its initial weights (for a build, or when a
    checkpoint's weights replace them anyway)."""
    from agentcredit.lit.datamodule import QuestionDataModule
    from agentcredit.models.loading import load_policy, wrap_with_lora

    datamodule = QuestionDataModule.from_config(cfg)
    world = datamodule.world
    corpus = Corpus(world.documents)
    env_cfg = plain(cfg.env)
    env_factory = make_env_factory(corpus, env_cfg)
    reward_fn = make_reward_fn(env_cfg)
    model_cfg = plain(cfg.model)
    lora_cfg = model_cfg.get("lora") or {}
    base_info = None
    if uses_synthetic_base_policy(cfg):
        # The tiny testbed's base policy is learnt from oracle episodes, which only the synthetic world
        # has: on your own data the tiny model starts from the synthetic world's base policy and its
        # tokenizer (byte-level BPE, so any text encodes; it was fitted on the synthetic corpus).
        print("[agentcredit] model=tiny on your own data starts from the synthetic world's base policy "
              "(model.warm_start=true; false starts from random weights)", flush=True)
        synthetic = build_components(synthetic_base_config(cfg), progress=progress, base_policy=base_policy)
        policy, tokenizer, base_info = synthetic.policy, synthetic.tokenizer, synthetic.base_policy_info
    else:
        # LoRA wraps the model only after the base policy is in it: the cached weights are plain keys.
        policy, tokenizer = load_policy({**model_cfg, "lora": {"enabled": False}},
                                        tokenizer_texts=lambda: tokenizer_corpus(world))
    chat = ChatFormat.from_tokenizer(tokenizer, system_prompt(model_cfg.get("system_prompt", "full")))
    rollout_cfg = RolloutConfig(**plain(cfg.rollout))
    components = Components(datamodule, corpus, env_factory, reward_fn, policy, tokenizer, chat, rollout_cfg, base_info)
    if base_policy and model_cfg.get("warm_start", False) and base_info is None:
        from agentcredit.testbed.base_policy import ensure_base_policy

        components.base_policy_info = ensure_base_policy(cfg, components, progress=progress)
    if lora_cfg.get("enabled", False):
        components.policy = wrap_with_lora(components.policy, lora_cfg)
    return components


def uses_synthetic_base_policy(cfg: DictConfig) -> bool:
    """The tiny model with warm start on your own data (data.corpus_path set)."""
    model = cfg.model
    return model.get("kind") == "tiny" and bool(model.get("warm_start")) and cfg.data.get("corpus_path") is not None


def synthetic_base_config(cfg: DictConfig) -> DictConfig:
    """`cfg` with the model's own synthetic world (conf/data/<model.kind>.yaml: the testbed preset for
    the tiny model) in place of your own data and LoRA off: the run whose base policy a tiny model on
    your own data starts from."""
    from agentcredit.evaluate import compose_config

    tree = plain(cfg)
    tree["data"] = plain(compose_config([f"model={cfg.model.kind}"]).data)
    tree["model"] = {**tree["model"], "lora": {**(tree["model"].get("lora") or {}), "enabled": False}}
    return OmegaConf.create(tree)


def tokenizer_corpus(world) -> list[str]:
    """Texts the tiny testbed's tokenizer is fitted on: everything it will read or write."""
    from agentcredit.agent.protocol import render_answer, render_tool_call
    from agentcredit.env.types import ToolCall

    texts = [SYSTEM_PROMPT, system_prompt("compact")]
    texts += [f"{d.title}\n{d.url}\n" + "\n".join(d.lines) for d in world.documents]
    texts += [q.text for q in world.questions]
    texts += [render_answer(q.answer) for q in world.questions]
    # Tool-call JSON in the exact rendered form, so its punctuation becomes a handful of tokens.
    examples = [ToolCall("browser.search", {"query": "x", "topn": 5}), ToolCall("browser.open", {"id": 0}),
                ToolCall("browser.find", {"pattern": "x"})]
    texts += [render_tool_call(c) for c in examples] * 200
    # Chat roles follow a special token in every turn header; seen often, each becomes one token.
    texts += ["\n".join(CHAT_ROLES) + "\n"] * 200
    texts += ["Error: " + json.dumps({"id": -1}), "Matches", "No matches", "[observation truncated]"]
    return texts


def run_dir_path(cfg: DictConfig) -> Path:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # not under @hydra.main (tests compose configs directly)
        return Path(cfg.get("output_dir") or "outputs/adhoc")
