"""Callbacks every run gets: checkpoints (last + periodic) and the resolved config in the run folder."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import OmegaConf


def build_callbacks(cfg, out: Path) -> list:
    out.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, out / "resolved_config.yaml", resolve=True)
    every = int(cfg.get("checkpoint", {}).get("every_n_steps", 10))
    return [
        ModelCheckpoint(
            dirpath=str(out / "checkpoints"),
            filename="step{step}",
            auto_insert_metric_name=False,
            every_n_train_steps=every,
            save_last=True,
            save_top_k=-1,
        )
    ]
