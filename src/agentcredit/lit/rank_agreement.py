"""Processes of one run agree on its config, and none waits for the others without end.

    callbacks=[SameConfigOnEveryRank(parts.as_composed)]         # compose.build_trainer
    strategy = with_collective_timeout("ddp", timedelta(...))     # trainer.collective_timeout_s

Every node of a torchrun or SLURM job composes its config from its own command line. Nodes started with
different overrides (say trainer.max_steps) train different numbers of steps, and the first to finish
leaves the others waiting in a collective. At the start of fit (`setup`, when the process group exists)
every process gathers every other's digest of its config; on a mismatch each one stops with the same
`config error:` line naming the keys that differ, before the first step.

The digest covers the config as composed, interpolations as written: `${oc.env:...}` or `${now:...}`
may rightly resolve differently on each node (a node's own scratch folder), and what they are written
as is the same. Hydra's own settings (hydra.*, e.g. the job name Lightning gives each worker) are not
part of a job's config.

The collective timeout bounds any other wait: a process that waits longer than
`trainer.collective_timeout_s` at a collective fails with an error instead of hanging.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf

from agentcredit.common.configs import ConfigError


def flat_config(cfg: DictConfig | dict) -> dict[str, str]:
    """`cfg` as dotted key -> JSON text of its value, interpolations unresolved (see the module docstring)."""
    tree = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else cfg
    out: dict[str, str] = {}

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else str(key))
        else:
            out[prefix] = json.dumps(node, sort_keys=True, default=str)

    walk(tree, "")
    return out


def config_digest(flat: dict[str, str]) -> str:
    """A short digest of a flat config: equal for equal configs, whatever order their keys are in."""
    return hashlib.sha256(json.dumps(flat, sort_keys=True).encode()).hexdigest()[:16]


def disagreement(flats: list[dict[str, str]], limit: int = 4) -> str:
    """The first rank whose config differs from rank 0's, and the keys (up to `limit`) with both values."""
    first = flats[0]
    for rank, other in enumerate(flats[1:], start=1):
        keys = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))
        if keys:
            shown = ", ".join(f"{k}={other.get(k, '<absent>')} (rank 0: {first.get(k, '<absent>')})" for k in keys[:limit])
            more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
            return f"rank {rank}'s {shown}{more}"
    return "the digests differ"  # not reached: equal flat configs give equal digests


class SameConfigOnEveryRank(Callback):
    """Stops every process of a run, in one line, when they were started with different configs."""

    def __init__(self, as_composed: dict) -> None:
        self.flat = flat_config(as_composed)
        self.digest = config_digest(self.flat)

    def setup(self, trainer, pl_module, stage: str) -> None:
        import torch.distributed as dist

        if trainer.world_size <= 1 or not (dist.is_available() and dist.is_initialized()):
            return
        digests: list = [None] * dist.get_world_size()
        dist.all_gather_object(digests, self.digest)  # every process learns every digest: all of them stop, or none
        if len(set(digests)) == 1:
            return
        flats: list = [None] * dist.get_world_size()
        dist.all_gather_object(flats, self.flat)  # only on a mismatch: to name the keys
        raise ConfigError(f"the processes of this run were started with different configs: {disagreement(flats)}; "
                          "start every node with the same overrides")


def collective_timeout(trainer_cfg: dict) -> timedelta:
    """`trainer.collective_timeout_s` (config_checks vetted it) as the strategy takes it."""
    return timedelta(seconds=float(trainer_cfg.get("collective_timeout_s") or 1800))


def with_collective_timeout(strategy: str, timeout: timedelta):
    """A strategy name of the DDP family as its object with `timeout` on its process group; other names
    (auto, single device, ...) pass through: they start no process group of their own."""
    from lightning.pytorch.strategies import DDPStrategy, StrategyRegistry

    entry = dict.get(StrategyRegistry, strategy)  # the registered class and arguments (its .get builds one)
    if entry is None or not issubclass(entry["strategy"], DDPStrategy):
        return strategy
    return entry["strategy"](**entry["init_params"], timeout=timeout)
