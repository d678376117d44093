"""The composition root: every object of a run, built from the config groups, in one place.

    parts = split_run_config(cfg)                    # the config split once into plain dicts, one per group
    components = build_components(parts)             # data, environment, reward, policy (evaluation, scripts)
    module = build_module(parts, components)         # the LightningModule with what its credit method needs
    trainer = build_trainer(parts, components.policy)  # train.run fits the module with these three

The whole config stops here: every builder below this module receives only its own group, as a plain
dict (or a small typed object made from one), never the DictConfig. The builders also take the DictConfig
itself (evaluation, scripts and tests call them so) and split it on the way in.

Order matters only where one object needs another: the world (and its corpus) comes first because
the tiny testbed fits its tokenizer on it; the base policy is restored (or built) into the plain
model, then LoRA wraps it, and only then is the reference copy taken, so that the reference is the
policy's *initial* RL weights. The credit method's registry entry says which inputs to build
(reference scorer, segment verifier); nothing here branches on a method's name.
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
from agentcredit.agent.rollout import RolloutConfig, context_problem
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


@dataclass(frozen=True)
class RunParts:
    """The run config split once, by group: plain dicts (interpolations resolved) and a few scalars."""
    model: dict
    data: dict
    env: dict
    rollout: dict
    credit: dict
    train: dict
    trainer: dict
    judge: dict
    logger: dict
    checkpoint: dict
    warmstart: dict
    seed: int
    run_dir: Path
    ckpt_path: str | None
    record: dict       # the whole config as resolved_config.yaml and W&B write it down (secrets redacted)
    as_composed: dict  # the whole config, interpolations as written: the digest every rank compares
    synthetic_base: "RunParts | None" = None  # the run a tiny model on your own data takes its base policy from


def split_run_config(cfg: "DictConfig | RunParts") -> RunParts:
    """`cfg` split into its groups, once; a `RunParts` passes through unchanged."""
    if isinstance(cfg, RunParts):
        return cfg
    from agentcredit.common.secret_keys import config_for_records

    synthetic = split_run_config(synthetic_base_config(cfg)) if uses_synthetic_base_policy(cfg) else None
    ckpt_path = cfg.get("ckpt_path")
    return RunParts(
        model=plain(cfg.model), data=plain(cfg.data), env=plain(cfg.env), rollout=plain(cfg.rollout),
        credit=plain(cfg.credit), train=plain(cfg.get("train")), trainer=plain(cfg.trainer),
        judge=plain(cfg.get("judge")), logger=plain(cfg.get("logger")), checkpoint=plain(cfg.get("checkpoint")),
        warmstart=plain(cfg.get("warmstart")), seed=int(cfg.seed), run_dir=run_dir_path(cfg),
        ckpt_path=None if ckpt_path is None else str(ckpt_path), record=config_for_records(cfg),
        as_composed=OmegaConf.to_container(cfg, resolve=False), synthetic_base=synthetic)


def base_policy_settings(cfg: "DictConfig | RunParts"):
    """What the tiny testbed's base policy depends on (testbed.base_policy.BasePolicySettings)."""
    from agentcredit.testbed.base_policy import BasePolicySettings

    parts = split_run_config(cfg)
    return BasePolicySettings(model=parts.model, warmstart=parts.warmstart, env=parts.env, data=parts.data,
                              rollout=parts.rollout)


def build_components(cfg: "DictConfig | RunParts", *, progress: bool = True, base_policy: bool = True) -> Components:
    """`base_policy=False` leaves a warm-started model at its initial weights (for a build, or when a
    checkpoint's weights replace them anyway)."""
    from agentcredit.lit.datamodule import QuestionDataModule
    from agentcredit.models.loading import load_policy, wrap_with_lora

    parts = split_run_config(cfg)
    datamodule = QuestionDataModule.from_config(parts.data, seed=parts.seed)
    world = datamodule.world
    corpus = Corpus(world.documents)
    env_factory = make_env_factory(corpus, parts.env)
    reward_fn = make_reward_fn(parts.env)
    model_cfg = dict(parts.model)  # a copy: the tokenizer path below is this build's own
    lora_cfg = model_cfg.get("lora") or {}
    base_info = None
    if parts.synthetic_base is not None:
        # The tiny testbed's base policy is learnt from oracle episodes, which only the synthetic world
        # has: on your own data the tiny model starts from the synthetic world's base policy and its
        # tokenizer (byte-level BPE, so any text encodes; it was fitted on the synthetic corpus).
        print("[agentcredit] model=tiny on your own data starts from the synthetic world's base policy "
              "(model.warm_start=true; false starts from random weights)", flush=True)
        synthetic = build_components(parts.synthetic_base, progress=progress, base_policy=base_policy)
        policy, tokenizer, base_info = synthetic.policy, synthetic.tokenizer, synthetic.base_policy_info
    else:
        if model_cfg.get("kind") == "tiny" and model_cfg.get("warm_start") and parts.warmstart.get("init_from"):
            from agentcredit.testbed.warmstart import init_folder

            # A curriculum stage reads with the tokens of the base policy it continues: fitted on this world's
            # questions (data=testbed_long's are longer chains) the merges, hence the vocabulary, would differ.
            model_cfg["tokenizer_path"] = str(init_folder(parts.warmstart["init_from"]))
        # LoRA wraps the model only after the base policy is in it: the cached weights are plain keys.
        policy, tokenizer = load_policy({**model_cfg, "lora": {"enabled": False}},
                                        tokenizer_texts=lambda: tokenizer_corpus(world))
    chat = ChatFormat.from_tokenizer(tokenizer, system_prompt(model_cfg.get("system_prompt", "full")))
    rollout_cfg = RolloutConfig(**parts.rollout)
    refuse_a_context_no_prompt_fits(chat, datamodule, rollout_cfg)
    components = Components(datamodule, corpus, env_factory, reward_fn, policy, tokenizer, chat, rollout_cfg, base_info)
    if base_policy and model_cfg.get("warm_start", False) and base_info is None:
        from agentcredit.testbed.base_policy import ensure_base_policy

        components.base_policy_info = ensure_base_policy(base_policy_settings(parts), components, progress=progress)
    if lora_cfg.get("enabled", False):
        components.policy = wrap_with_lora(components.policy, lora_cfg)
    return components


CONTEXT_SAMPLE = 256  # questions whose prompts are measured at build time: enough to find a short one, in about 0.1 s


def refuse_a_context_no_prompt_fits(chat: ChatFormat, datamodule, rollout_cfg: RolloutConfig) -> None:
    """Before a base policy is built (minutes on a first run) or a step samples: a context shorter than every
    prompt would train on nothing. The first CONTEXT_SAMPLE training questions stand for the rest; each batch is
    checked again when it rolls out (agent/rollout.py)."""
    questions = datamodule.split_questions("train")[:CONTEXT_SAMPLE]
    prompts = [chat.prompt_ids(question.text) for question in questions]
    problem = context_problem(chat, prompts, rollout_cfg.max_context_tokens,
                              f"the first {len(prompts)} training questions' prompts")
    if problem:
        raise ConfigError(problem)


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


def build_credit_inputs(cfg: "DictConfig | RunParts", components, credit, method, references: dict | None = None):
    """What `method` needs beyond the rollouts (`lit.credit_inputs.CreditInputs`), as its registry entry
    declares: the frozen reference and its scorer, the policy to score with, a judge-driven segment verifier.
    `references` (reference path -> ReferenceModel) lets several methods measured on the same policy share one
    reference copy (scripts/credit_fidelity.py); it must be filled before any checkpoint replaces the initial weights."""
    from agentcredit.lit.credit_inputs import CreditInputs
    from agentcredit.models.reference import build_reference
    from agentcredit.models.reference_scorer import ScoringItem, score_batch

    parts = split_run_config(cfg)
    model_cfg = parts.model
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

        judge_cfg = dict(parts.judge)
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


def build_module(cfg: "DictConfig | RunParts", components):
    from agentcredit.credit.config import split_credit_config
    from agentcredit.credit.registry import get_credit
    from agentcredit.lit.module import AgentRLModule, TrainSettings

    parts = split_run_config(cfg)
    credit = split_credit_config(parts.credit)
    method = get_credit(credit.name)
    inputs = build_credit_inputs(parts, components, credit, method)

    train = dict(parts.train)
    lr = train.pop("lr", None) or parts.model.get("rl_lr", 1e-6)
    settings = TrainSettings(**train, lr=float(lr), seed=parts.seed, samples_dir=str(parts.run_dir))
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


def build_trainer(cfg: "DictConfig | RunParts", policy: torch.nn.Module | None = None):
    import lightning as L

    from agentcredit.lit.callbacks import build_callbacks
    from agentcredit.lit.loggers import build_logger

    parts = split_run_config(cfg)
    out = parts.run_dir
    from agentcredit.lit.rank_agreement import SameConfigOnEveryRank, collective_timeout

    trainer_cfg = dict(parts.trainer)
    # Bounded waits: a process the others wait for (stopped, or started with other settings) ends the run with an error.
    timeout = collective_timeout(trainer_cfg)
    trainer_cfg.pop("collective_timeout_s", None)
    trainer_cfg["strategy"] = build_strategy(trainer_cfg.get("strategy", "auto"), policy, timeout)
    from agentcredit.lit.checkpoint_io import VerifiedCheckpointIO
    from agentcredit.lit.quiet_logs import quiet_lightning

    quiet_lightning()
    return L.Trainer(
        **trainer_cfg,
        plugins=[VerifiedCheckpointIO()],
        max_epochs=-1,
        default_root_dir=str(out),
        logger=build_logger(parts.logger, out, parts.record),
        callbacks=[*build_callbacks(out, record=parts.record, checkpoint=parts.checkpoint, resuming=parts.ckpt_path is not None),
                   SameConfigOnEveryRank(parts.as_composed)],  # nodes started alike, or none trains
    )
