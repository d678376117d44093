"""Experiment loggers chosen with logger=csv|wandb|none."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.loggers import CSVLogger


def build_logger(cfg, out: Path):
    kind = cfg.logger.kind
    if kind == "none":
        return False
    if kind == "csv":
        return CSVLogger(save_dir=str(out), name="", version="")
    if kind == "wandb":
        from agentcredit.lit.wandb_logger import build_wandb_logger

        return build_wandb_logger(cfg, out)
    raise ValueError(f"logger.kind must be csv, wandb or none, got {kind!r}")
