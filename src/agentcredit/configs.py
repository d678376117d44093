"""Reading the composed Hydra config: the layer every other module may import (it imports none of them).

    cfg = compose_config(["credit=trace", "credit.K=1"])   # what `python train.py credit=trace credit.K=1` composes
    plain(cfg.env)                                          # a group as a plain dict, interpolations resolved
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from agentcredit.paths import config_dir


class ConfigError(ValueError):
    """A config value that cannot work; `train.py` prints it as one `config error: ...` line."""


def plain(cfg: DictConfig | dict | None) -> dict:
    if cfg is None:
        return {}
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return dict(cfg)


def compose_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The run config exactly as `python train.py <overrides>` would compose it (also from inside a
    running Hydra app, whose global state is already initialised with the same config directory)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose(config_name=config_name, overrides=list(overrides))
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides))


def run_dir_path(cfg: DictConfig) -> Path:
    """The job's output folder: Hydra's, or `output_dir` (default outputs/adhoc) outside @hydra.main."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # not under @hydra.main (tests compose configs directly)
        return Path(cfg.get("output_dir") or "outputs/adhoc")
