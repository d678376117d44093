"""Experiment loggers chosen with logger=csv|wandb|none. W&B runs also write the CSV, which
`scripts/plot_run.py` reads from the run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger

from agentcredit.secret_keys import is_secret_key


def redact_secrets(value: Any) -> Any:
    """A copy of a plain config tree with the values of secret-looking keys (judge.api_key, ...) replaced."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if is_secret_key(str(k)) and v is not None else redact_secrets(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    return value


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
