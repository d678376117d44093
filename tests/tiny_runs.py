"""Helpers for the workflow tests: the real configs shrunk to a tiny run, and ways to run them.

Runs use one torch thread: on a busy 2-core machine two threads contending with other processes made
the tiny model's steps ~25x slower (measured: 0.4 s vs 10.6 s for 5 forward/backward passes).
"""

from __future__ import annotations

import csv
import os
import runpy
import subprocess
import sys
from pathlib import Path
from unittest import mock

import torch

from agentcredit.credit.group import CreditGroup
from agentcredit.credit.registry import available_credits, register_credit
from agentcredit.common.configs import compose_config

ROOT = Path(__file__).resolve().parents[1]
# The `agentcredit` console script ([project.scripts]) of the environment running the tests.
AGENTCREDIT = Path(sys.executable).with_name("agentcredit")

TINY = [
    "model.warm_start=false", "model.hidden_size=64", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=2",
    "model.intermediate_size=128", "model.vocab_size=800",
    "rollout.group_size=2", "rollout.max_tool_turns=2", "rollout.max_turn_tokens=16", "rollout.max_obs_tokens=128",
    "env.retriever=bm25", "env.default_topn=3",
    "data.n_val=2", "data.n_test=2", "data.prompts_per_step=2",
    "trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.limit_val_batches=1.0", "trainer.enable_progress_bar=false",
    "logger=none",
]


# The warm-start path with a base policy built in seconds (8 oracle episodes, 2 steps of 2): for tests of
# the code path only; use it with the `small_base_cache` fixture so the build lands in a temporary cache.
SMALL_WARM_START = ["model.warm_start=true", "warmstart.rebuild=true", "warmstart.aux_worlds=0", "warmstart.episodes=8", "warmstart.steps=2", "warmstart.batch_size=2",
                    "warmstart.window_steps=0", "warmstart.window_mix=0"]


def signal_advantages(group: CreditGroup) -> torch.Tensor:
    """+1 on every policy token of even rollouts, -1 on odd ones: a non-zero gradient from an untrained policy
    (whose rewards are all 0), so that tests of resume and DDP compare weights that actually move."""
    sign = 1.0 - 2.0 * (torch.arange(group.rewards.shape[0]) % 2).float()  # (G,)
    return group.loss_mask.float() * sign[:, None]  # (G, L)


def ensure_signal_credit() -> None:
    if "signal" not in available_credits():
        register_credit("signal")(signal_advantages)


SIGNAL = ["credit=grpo", "credit.name=signal", "train.lr=0.01"]


def tiny_config(out: Path, *overrides: str):
    """The real config shrunk by TINY (its model.* sizes only apply to the tiny model) plus `overrides`."""
    torch.set_num_threads(1)
    other_model = any(o.startswith("model=") and o != "model=tiny" for o in overrides)
    shrink = [o for o in TINY if not (other_model and o.startswith("model."))]
    return compose_config([*shrink, *overrides, f"+output_dir={out}"])


def train_tiny(out: Path, *overrides: str) -> float:
    from agentcredit.run.train import run

    return run(tiny_config(out, *overrides))


def hydra_cli(*args: str) -> None:
    """`python train.py <args>` inside this process (a subprocess would pay ~10-20 s of imports again)."""
    torch.set_num_threads(1)
    with mock.patch.object(sys, "argv", [str(ROOT / "train.py"), *args]):
        runpy.run_path(str(ROOT / "train.py"), run_name="__main__")


def cli(script: str, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """A real command line, as a user types it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def agentcredit_cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`agentcredit <args>`, as a user types it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([str(AGENTCREDIT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def read_metrics(run_dir: Path) -> list[dict]:
    with open(Path(run_dir) / "metrics.csv") as f:
        return list(csv.DictReader(f))


def trained_steps(run_dir: Path) -> int:
    """Training steps a run's metrics.csv has logged so far; 0 while it has none (or is being written)."""
    try:
        return sum(1 for row in read_metrics(run_dir) if row.get("train/loss"))
    except (OSError, ValueError):
        return 0


def logged(run_dir: Path) -> list[dict]:
    """Metrics rows without wall-clock timings: what an interrupted and an uninterrupted run must share."""
    return [{k: v for k, v in r.items() if v != "" and not k.startswith("time/")} for r in read_metrics(run_dir)]




class StoppedBeforeTheModel(Exception):
    """Raised where a run would build its model: the run's start, without the cost of a model."""


def stop_before_the_model(monkeypatch) -> type[Exception]:
    """Make every run stop with StoppedBeforeTheModel where it would build its components (model, data, env)."""
    def stop(*args, **kwargs):
        raise StoppedBeforeTheModel

    monkeypatch.setattr("agentcredit.run.compose.build_components", stop)
    return StoppedBeforeTheModel
