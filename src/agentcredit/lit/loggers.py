"""Experiment loggers chosen with logger=csv|wandb|none. W&B runs also write the CSV, which
`scripts/plot_run.py` reads from the run folder."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.loggers import CSVLogger


def build_logger(cfg, out: Path):
    kind = cfg.logger.kind
    if kind == "none":
        return False
    csv = CSVLogger(save_dir=str(out), name="", version="")
    if kind == "csv":
        return csv
    if kind == "wandb":
        from agentcredit.lit.wandb_logger import build_wandb_logger

        return [csv, build_wandb_logger(cfg, out)]
    raise ValueError(f"logger.kind must be csv, wandb or none, got {kind!r}")
