"""The composition root: every object of a run, built from the config groups, in one place.

    components = build_components(cfg)             # data, environment, reward, policy (evaluation, scripts)
    module = build_module(cfg, components)         # the LightningModule with what its credit method needs
    trainer = build_trainer(cfg, components.policy)  # train.run fits the module with these three

Order matters only where one object needs another: the world (and its corpus) comes first because
the tiny testbed fits its tokenizer on it; the base policy is restored (or built) into the plain
model, then LoRA wraps it, and only then is the reference copy taken, so that the reference is the
policy's *initial* RL weights. The credit method's registry entry says which inputs to build
(reference scorer, segment verifier); nothing here branches on a method's name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import torch
from omegaconf import DictConfig, OmegaConf

from agentcredit.agent.chat import ChatFormat
from agentcredit.agent.protocol import SYSTEM_PROMPT, system_prompt
from agentcredit.agent.rollout import RolloutConfig
from agentcredit.common.configs import ConfigError, compose_config, plain, run_dir_path
from agentcredit.env.corpus import Corpus
from agentcredit.env.factory import make_env_factory
from agentcredit.env.reward import make_reward_fn
from agentcredit.models.tokenizer import CHAT_ROLES


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
        if model_cfg.get("kind") == "tiny" and model_cfg.get("warm_start") and (cfg.get("warmstart") or {}).get("init_from"):
            from agentcredit.testbed.warmstart import init_folder

            # A curriculum stage reads with the tokens of the base policy it continues: fitted on this world's
            # questions (data=testbed_long's are longer chains) the merges, hence the vocabulary, would differ.
            model_cfg["tokenizer_path"] = str(init_folder(cfg.warmstart.init_from))
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


def build_credit_inputs(cfg: DictConfig, components, credit, method, references: dict | None = None):
    """What `method` needs beyond the rollouts (`lit.credit_inputs.CreditInputs`), as its registry entry
    declares: the frozen reference and its scorer, the policy to score with, a judge-driven segment verifier.
    `references` (reference path -> ReferenceModel) lets several methods measured on the same policy share one
    reference copy (scripts/credit_fidelity.py); it must be filled before any checkpoint replaces the initial weights."""
    from agentcredit.lit.credit_inputs import CreditInputs
    from agentcredit.models.reference import build_reference
    from agentcredit.models.reference_scorer import ScoringItem, score_batch

    model_cfg = plain(cfg.model)
    needs_reference = method.reads("reference_scores") or credit.loss.get("kl_coef", 0) > 0
    reference = None
    if needs_reference:
        path = credit.run.get("reference_path")
        if references is not None and path in references:
            reference = references[path]
        else:
            reference = build_reference(components.policy, model_cfg, path=path)
            if references is not None:
                references[path] = reference

    def score_fn(ref, items):
        return score_batch(ref, [ScoringItem(torch.tensor(i), b, o, a) for i, b, o, a in items])

    segment_verifier = None
    if method.reads("verified_segment"):
        from agentcredit.judge.verification import make_segment_verifier
        from agentcredit.judge import build_judge

        judge_cfg = plain(cfg.judge)
        step_budget_s = judge_cfg.pop("step_budget_s", None)  # the verifier's limit, not the judge's own knob
        segment_verifier = make_segment_verifier(build_judge(judge_cfg), step_budget_s=step_budget_s)
    answer_reasoning = None
    if model_cfg.get("answer_note") == "plan":
        from agentcredit.testbed.notes import answer_note

        answer_reasoning = answer_note  # the testbed's reference writes its plan note before every answer
    # A method that scores with the current policy (IGPO) holds the trained module itself: the same object the
    # LightningModule trains and FSDP2 shards in place, so its scores always come from the weights of that step.
    policy = components.policy if method.reads("policy_scores") else None
    critic = None
    if method.reads("critic_values"):
        from agentcredit.lit.critic import TurnCritic

        critic = TurnCritic.for_policy(components.policy, credit)  # a fresh head; the module trains and saves it
    return CreditInputs(reference=reference, chat=components.chat, score_fn=score_fn, segment_verifier=segment_verifier,
                        answer_reasoning=answer_reasoning, policy=policy, critic=critic)


def build_module(cfg: DictConfig, components):
    from agentcredit.credit.config import split_credit_config
    from agentcredit.credit.registry import get_credit
    from agentcredit.lit.module import AgentRLModule, TrainSettings

    credit = split_credit_config(plain(cfg.credit))
    method = get_credit(credit.name)
    model_cfg = plain(cfg.model)
    inputs = build_credit_inputs(cfg, components, credit, method)

    train = plain(cfg.train)
    lr = train.pop("lr", None) or model_cfg.get("rl_lr", 1e-6)
    settings = TrainSettings(**train, lr=float(lr), seed=int(cfg.seed), samples_dir=str(run_dir_path(cfg)))
    return AgentRLModule(components.policy, inputs.reference, components.chat, components.env_factory, components.reward_fn,
                         components.rollout_cfg, credit, settings, inputs)


FSDP_SETTINGS = ("param_dtype", "reduce_dtype", "cpu_offload", "activation_checkpointing", "reshard_after_forward")


def build_strategy(strategy, policy: torch.nn.Module | None = None, timeout=None):
    """`trainer.strategy` as Lightning takes it: a name passes through (a DDP name with `timeout`, a
    timedelta, becomes its strategy object with that collective timeout); a mapping with `name: fsdp`
    (conf/trainer/fsdp.yaml) becomes FSDP2 (lit/fsdp2.FSDP2Strategy: fully_shard per decoder layer and
    the root, applied by the module's configure_model). config_checks has vetted the keys; `policy`, when
    given, is checked for decoder layers here, in the launching process, before any worker starts."""
    if not isinstance(strategy, dict):
        if timeout is None or not isinstance(strategy, str):
            return strategy
        from agentcredit.lit.rank_agreement import with_collective_timeout

        return with_collective_timeout(strategy, timeout)
    settings = dict(strategy)
    name = settings.pop("name", None)
    unknown = sorted(set(settings) - set(FSDP_SETTINGS))
    if name != "fsdp" or unknown:
        raise ConfigError(f"trainer.strategy as a mapping needs name: fsdp and only {', '.join(FSDP_SETTINGS)}; "
                          f"got name: {name!r}" + (f" and {', '.join(unknown)}" if unknown else ""))
    from agentcredit.lit.fsdp2 import FSDP2Strategy, decoder_layers

    if policy is not None and not decoder_layers(policy):
        raise ConfigError(f"trainer=fsdp shards one unit per decoder layer, and {type(policy).__name__} has no "
                          "*DecoderLayer modules; use trainer=ddp")
    return FSDP2Strategy(**settings, **({"timeout": timeout} if timeout is not None else {}))


def build_trainer(cfg: DictConfig, policy: torch.nn.Module | None = None):
    import lightning as L

    from agentcredit.lit.callbacks import build_callbacks
    from agentcredit.lit.loggers import build_logger

    out = run_dir_path(cfg)
    from agentcredit.lit.rank_agreement import SameConfigOnEveryRank, collective_timeout

    trainer_cfg = plain(cfg.trainer)
    # Bounded waits: a process the others wait for (stopped, or started with other settings) ends the run with an error.
    timeout = collective_timeout(trainer_cfg)
    trainer_cfg.pop("collective_timeout_s", None)
    trainer_cfg["strategy"] = build_strategy(trainer_cfg.get("strategy", "auto"), policy, timeout)
    from agentcredit.lit.checkpoint_io import VerifiedCheckpointIO

    return L.Trainer(
        **trainer_cfg,
        plugins=[VerifiedCheckpointIO()],
        max_epochs=-1,
        default_root_dir=str(out),
        logger=build_logger(cfg, out),
        callbacks=[*build_callbacks(cfg, out), SameConfigOnEveryRank(cfg)],  # nodes started alike, or none trains
    )
