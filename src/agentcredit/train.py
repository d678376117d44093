"""Training entry logic behind the top-level `train.py`.

    python train.py                                  # GRPO on the tiny testbed, CPU
    python train.py credit=trace credit.K=3
    python train.py -m credit=grpo,trace credit.K=1,3
"""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import torch
from omegaconf import DictConfig

from agentcredit.components import build_components, plain, run_dir_path
from agentcredit.validation import prepare_config


def build_module(cfg: DictConfig, components):
    from agentcredit.credit.config import split_credit_config
    from agentcredit.credit.registry import get_credit
    from agentcredit.lit.credit_inputs import CreditInputs
    from agentcredit.lit.module import AgentRLModule, TrainSettings
    from agentcredit.models.reference import build_reference
    from agentcredit.models.reference_scorer import ScoringItem, score_batch

    credit = split_credit_config(plain(cfg.credit))
    method = get_credit(credit.name)
    model_cfg = plain(cfg.model)
    needs_reference = method.needs_reference_scores or credit.loss.get("kl_coef", 0) > 0
    reference = None
    if needs_reference:
        reference = build_reference(components.policy, model_cfg, path=credit.run.get("reference_path"))

    def score_fn(ref, items):
        return score_batch(ref, [ScoringItem(torch.tensor(i), b, o, a) for i, b, o, a in items])

    segment_verifier = None
    if method.needs_segment_verification:
        from agentcredit.agent.verification import make_segment_verifier
        from agentcredit.judge import build_judge

        segment_verifier = make_segment_verifier(build_judge(plain(cfg.judge)))
    inputs = CreditInputs(reference=reference, chat=components.chat, score_fn=score_fn, segment_verifier=segment_verifier)

    train = plain(cfg.train)
    lr = train.pop("lr", None) or model_cfg.get("rl_lr", 1e-6)
    settings = TrainSettings(**train, lr=float(lr), seed=int(cfg.seed), samples_dir=str(run_dir_path(cfg)))
    return AgentRLModule(components.policy, reference, components.chat, components.env_factory, components.reward_fn,
                         components.rollout_cfg, plain(cfg.credit), settings, inputs)


def build_trainer(cfg: DictConfig) -> L.Trainer:
    from agentcredit.lit.callbacks import build_callbacks
    from agentcredit.lit.loggers import build_logger

    out = run_dir_path(cfg)
    trainer_cfg = plain(cfg.trainer)
    return L.Trainer(
        **trainer_cfg,
        max_epochs=-1,
        default_root_dir=str(out),
        logger=build_logger(cfg, out),
        callbacks=build_callbacks(cfg, out),
    )


def run(cfg: DictConfig) -> float:
    """Train and return the final validation accuracy (the metric a sweep optimises)."""
    cfg = prepare_config(cfg)  # before any model is loaded: a bad value costs nothing
    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    components = build_components(cfg)
    module = build_module(cfg, components)
    trainer = build_trainer(cfg)
    trainer.fit(module, datamodule=components.datamodule, ckpt_path=cfg.get("ckpt_path"))
    accuracy = float(trainer.callback_metrics.get("val/accuracy", math.nan))
    if trainer.is_global_zero:
        print(f"[agentcredit] final val/accuracy={accuracy:.4f} run_dir={Path(run_dir_path(cfg)).resolve()}", flush=True)
    return accuracy
