"""Reading the composed Hydra config: the layer every other module may import (it imports none of them).

    cfg = compose_config(["credit=trace", "credit.K=1"])   # what `python train.py credit=trace credit.K=1` composes
    plain(cfg.env)                                          # a group as a plain dict, interpolations resolved
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from agentcredit.common.paths import config_dir


class ConfigError(ValueError):
    """A config value that cannot work; `train.py` prints it as one `config error: ...` line."""


def plain(cfg: DictConfig | dict | None) -> dict:
    if cfg is None:
        return {}
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return dict(cfg)


def credit_arms() -> dict[str, tuple[str, str]]:
    """The arms every credit config gives without a file of its own: arm name -> (credit option, recorded arm).

    `arm=<credit option>` runs that option under the arm name comparisons record: the option with `-` spelt `_`
    (`arm=mc_value`, the name the committed tables use). Both spellings select it, so `arm=mc-value` runs the
    same arm. A file conf/arm/<name>.yaml (a named setting with knobs of its own) takes precedence."""
    arm_dir, credit_dir = config_dir() / "arm", config_dir() / "credit"
    arms = {}
    for option in sorted(p.stem for p in credit_dir.glob("*.yaml") if not p.stem.startswith("_")):
        recorded = option.replace("-", "_")
        for spelling in dict.fromkeys((recorded, option)):
            if not (arm_dir / f"{spelling}.yaml").is_file():
                arms[spelling] = (option, recorded)
    return arms


def arm_options() -> list[str]:
    """Every name `arm=<name>` accepts: conf/arm/'s files and `credit_arms`."""
    files = [p.stem for p in (config_dir() / "arm").glob("*.yaml") if not p.stem.startswith("_")]
    return sorted({*files, *credit_arms()})


def register_config_nodes() -> None:
    """Config nodes derived from the credit registry and the credit configs, so that no yaml repeats what the code
    says: `credit/_sweepable`, every registered method's knobs unset (one sweep may set a knob only some of its
    methods use: `-m credit=grpo,trace credit.K=0,1,3,5`), `credit/_defaults/<name>`, a method's knobs
    at the defaults of its functions (conf/credit/<name>.yaml starts from it and sets only departures), and
    `arm/<name>` for every credit config (`credit_arms`: `arm=spo_chain` is `credit=spo-chain` named spo_chain).
    Entry points call it before Hydra composes; a method registered in your own code must be imported
    first to be part of it."""
    from hydra.core.config_store import ConfigStore

    import agentcredit.credit  # noqa: F401  (registers the built-in methods)
    from agentcredit.credit.config import knob_defaults
    from agentcredit.credit.registry import available_credits

    store = ConfigStore.instance()
    defaults = {name: knob_defaults(name) for name in available_credits()}
    store.store(group="credit", name="_sweepable", node={k: None for d in defaults.values() for k in d})
    for name, knobs in defaults.items():
        store.store(group="credit/_defaults", name=name, node={"name": name, **knobs})
    for arm, (option, recorded) in credit_arms().items():
        store.store(group="arm", name=arm, package="_global_",
                    node={"defaults": [{"override /credit": option}], "arm": recorded})


# Keys that were optional (added with +key=...) before conf/config.yaml declared them; Hydra refuses +key=... for
# a declared key, which would break old command lines and the recorded overrides of earlier runs.
DECLARED_SINCE = ("threads",)


def current_overrides(overrides: Sequence[str]) -> list[str]:
    """`overrides` with `+threads=...` read as `threads=...` (DECLARED_SINCE), everything else as given."""
    declared = tuple(f"+{key}=" for key in DECLARED_SINCE)
    return [o[1:] if o.startswith(declared) else o for o in overrides]


def compose_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The run config exactly as `python train.py <overrides>` would compose it (also from inside a
    running Hydra app, whose global state is already initialised with the same config directory)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    overrides = current_overrides(overrides)
    register_config_nodes()
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
