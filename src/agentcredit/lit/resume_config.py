"""A resumed run continues the run its folder holds, so it must compute what that run computed.

    python train.py credit=trace credit.K=3 hydra.run.dir=outputs/runs/<run> resume=true   # the run's own overrides

`resume=true` loads the folder's last.ckpt into whatever config the command composes. A command that leaves
out one of the run's overrides (`credit=trace` above) would train GRPO on from TRACE's weights, in TRACE's
folder, with no word. So before any model loads, the resumed run's config (as resolved_config.yaml writes it
down) is compared with the one the run last started with, and any difference in what is computed is a config
error naming it. Settings of the host or of what is written down, not of what is computed, may change:
`FREE_ON_RESUME`. Keys one side does not have are passed over: a run started by an older checkout lacks the
keys added since, and ran with what their defaults now do.

To continue a run's weights under other settings, start a new folder from its checkpoint:
`hydra.run.dir=outputs/runs/<new> ckpt_path=outputs/runs/<run>/checkpoints/last.ckpt <the new overrides>`.
"""

from __future__ import annotations

from pathlib import Path

from agentcredit.common.configs import ConfigError

SAVED_CONFIG = "resolved_config.yaml"  # written at every start (lit/callbacks.py), so it holds the last start's config

# Keys (and everything under them) free to differ between a run and its resumption, each for its reason:
FREE_ON_RESUME = (
    "resume", "ckpt_path",                          # how this start finds its checkpoint
    "output_dir",                                   # where the folder is now (carried, restored or moved runs)
    "threads", "rollout.threads",                   # the host's cores (one thread is the default on every host)
    "logger",                                       # where the metrics go
    "checkpoint",                                   # how often checkpoints are written
    "final_test",                                   # whether the run tests after its last step
    "trainer.max_steps",                            # training further (no schedule reads it)
    "trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.log_every_n_steps",
    "trainer.collective_timeout_s",
    "data.val_batches_per_call", "data.test_batches_per_call",   # rows per call; each batch keeps its own stream
    "rollout.vllm.kv_cache_gib", "rollout.vllm.gpu_memory_utilization",   # the engine's share of memory
)
SHOWN = 3  # differences a refusal names before counting the rest


def is_free(key: str) -> bool:
    return any(key == free or key.startswith(free + ".") for free in FREE_ON_RESUME)


def setting_changes(saved: object, now: object, prefix: str = "") -> list[tuple[str, object, object]]:
    """(key, saved value, value now) for every setting both configs hold with different values, in the order
    of `saved`; lists are compared whole, and keys only one side holds are passed over."""
    if isinstance(saved, dict) and isinstance(now, dict):
        changes = []
        for key, value in saved.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key in now and not is_free(path):
                changes.extend(setting_changes(value, now[key], path))
        return changes
    return [] if saved == now else [(prefix, saved, now)]


def check_resumed_config(run_dir: Path, record: dict) -> None:
    """ConfigError (one line) when `record`, the config of a run resumed in `run_dir`, differs from the one
    the folder's run started with in anything but `FREE_ON_RESUME`. A folder without resolved_config.yaml
    (a job restored from a committed summary) has nothing to compare with and passes."""
    import yaml

    path = run_dir / SAVED_CONFIG
    if not path.is_file():
        return
    try:
        saved = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{path} cannot be read ({type(err).__name__}), so the resumed run cannot be checked "
                          "against the config it started with; repair or remove that file to resume") from None
    if not isinstance(saved, dict):
        raise ConfigError(f"{path} holds no config mapping; repair or remove that file to resume")
    changes = setting_changes(saved, record)
    if not changes:
        return
    named = ", ".join(f"{key}={now!r} where the run has {was!r}" for key, was, now in changes[:SHOWN])
    more = f" and {len(changes) - SHOWN} more" if len(changes) > SHOWN else ""
    raise ConfigError(
        f"resume=true would continue the run in {run_dir} under other settings: {named}{more}; repeat the run's "
        f"own overrides (its .hydra/overrides.yaml), or start a new folder from its checkpoint "
        f"(hydra.run.dir=<new folder> ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'})")
