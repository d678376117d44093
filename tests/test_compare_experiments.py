"""The comparison experiments share one base (conf/experiment/_compare_base.yaml) and compose exactly as they did
when each repeated it: every key an experiment sets, sweeper and launcher included, equals the recorded one.

The record, tests/fixtures/compare_experiments.json, holds what each experiment changes against the default
config ([dotted key, value] in composed order, interpolations unresolved), so a new key in conf/config.yaml does not touch it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from agentcredit.common.configs import register_config_nodes
from agentcredit.common.paths import config_dir

RECORD = Path(__file__).parent / "fixtures" / "compare_experiments.json"
EXPERIMENTS = ("compare", "compare_long", "compare_ablations")
# Hydra's bookkeeping of the call itself (the override typed, the process), not what the experiment sets.
NOT_SET_BY_EXPERIMENTS = ("hydra.runtime", "hydra.overrides", "hydra.job.override_dirname")


def flatten(tree, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists and scalars are leaves."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    out = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def composed(overrides: list[str]) -> dict:
    register_config_nodes()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    flat = flatten(OmegaConf.to_container(cfg, resolve=False))
    return {k: v for k, v in flat.items() if not k.startswith(NOT_SET_BY_EXPERIMENTS)}


def what_experiment_sets(experiment: str) -> list:
    """[key, value] of every key whose value differs from the default config's (or that it adds), in the composed
    order (the sweeper's axes run in it), then [key, None] for keys it removes."""
    base, exp = composed([]), composed([f"experiment={experiment}"])
    changed = [[k, v] for k, v in exp.items() if k not in base or base[k] != v]
    return changed + [[k, None] for k in base if k not in exp]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_composes_as_recorded(experiment):
    recorded = json.loads(RECORD.read_text())[experiment]
    assert what_experiment_sets(experiment) == recorded


def test_the_shared_block_lives_in_one_base_file():
    base = config_dir() / "experiment" / "_compare_base.yaml"
    for experiment in EXPERIMENTS:
        text = (config_dir() / "experiment" / f"{experiment}.yaml").read_text()
        assert "_compare_base" in text, f"experiment={experiment} does not start from _compare_base.yaml"
        assert "n_jobs" not in text, f"experiment={experiment} repeats the launcher block of {base.name}"
