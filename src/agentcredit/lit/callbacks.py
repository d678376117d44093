"""Callbacks every run gets: checkpoints, RNG states in the checkpoint, and the resolved config (secrets
redacted) in the run folder.

Checkpoints: `checkpoints/step<N>.ckpt` every `checkpoint.every_n_steps` and `checkpoints/last.ckpt`
every `checkpoint.last_every_n_steps` (1 by default, so a killed run loses at most the step it was
in; after a step that a validation follows, at the end of the validation). Lightning writes each file to a temporary name and renames it, so `last.ckpt` is always
either the previous complete checkpoint or the new one. A resumed run overwrites both in place (no
`last-v1.ckpt` beside a stale `last.ckpt`), and `ContinueRunFolder` keeps its logs in step with the
checkpoint it continues from (`lit/run_folder.py`).
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import OmegaConf

from agentcredit.lit.run_folder import keep_logs_of
from agentcredit.records import atomic_write_text
from agentcredit.records.environment import append_environment, environment_record


class LastCheckpoint(ModelCheckpoint):
    """Only `last.ckpt`, on its own schedule (a subclass, so Lightning keeps its state apart from the periodic one).

    After a step that a validation follows, it is written at the end of that validation: a resumed run does
    not repeat a validation begun after the checkpoint it restores, so a kill during it would lose its row.

    After a SIGTERM (one process), the batch that ends is the last this run makes (Lightning's loop stops
    after it): last.ckpt is written now, whatever its schedule, so a resume continues from this step
    (agentcredit/run/preemption.py)."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if validation_follows(trainer):
            self._defer_save_until_validation = True  # ModelCheckpoint.on_validation_end saves it
            return
        # Several processes each note the signal at their own time, and a save is a collective: they keep the schedule.
        if trainer.received_sigterm and trainer.world_size == 1 and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)


def validation_follows(trainer) -> bool:
    """Whether the training loop validates after the batch that just ended (Lightning's own test)."""
    loop = trainer.fit_loop
    return bool(loop.epoch_loop._should_check_val_fx(loop._data_fetcher))


class ContinueRunFolder(Callback):
    """Before a run writes its first row, drop what its folder's logs hold of steps after the one it starts
    from: the restored checkpoint's step on a resume, every row on a start from step 0."""

    def __init__(self, out: Path, resuming: bool) -> None:
        self.out = out
        self.resuming = resuming  # from the config: with FSDP the checkpoint is restored only after on_fit_start

    def _keep_before(self, step: int) -> None:
        if rank_zero_only.rank == 0:
            dropped = keep_logs_of(self.out, step)
            if dropped:
                print(f"[agentcredit] continuing {self.out} from step {step}: dropped {dropped} logged line(s) "
                      "(and any test_summary.json) of later steps, which this run writes again", flush=True)

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        self._keep_before(int(checkpoint["global_step"]))

    def on_fit_start(self, trainer, pl_module) -> None:
        if not self.resuming:
            self._keep_before(0)


class TestRowAtLastStep(Callback):
    """The held-out test's row as an uninterrupted run logs it, also in a run resumed from a checkpoint of its
    last step (a kill during the final test), which trains no batch. Lightning numbers rows by a count of
    batches that it restores one short (it is raised just after a batch's checkpoint is written) and
    corrects only when training goes on, so that test row was logged a step early (3 of 4); and the epoch
    that an uninterrupted run completes when training stops was never completed. Every training step makes
    one optimiser step, so global_step is the count."""

    def on_test_start(self, trainer, pl_module) -> None:
        loop = trainer.fit_loop
        if loop.epoch_loop._batches_that_stepped < trainer.global_step:  # restored here, no batch trained since
            loop.epoch_loop._batches_that_stepped = int(trainer.global_step)
            loop.epoch_progress.increment_completed()


class RNGStates(Callback):
    """Global Python, NumPy and torch RNG states travel with the checkpoint.

    Rollout sampling draws from generators seeded by (seed, step, rank) and needs none of this; the
    global states cover everything else (e.g. dropout in models that use it)."""

    def state_dict(self) -> dict[str, Any]:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        # Plain lists and tensors only: Lightning loads checkpoints with torch.load(weights_only=True).
        numpy_state = [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]
        state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        random.setstate(state_dict["python"])
        name, keys, pos, has_gauss, cached = state_dict["numpy"]
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(state_dict["torch"])
        if "cuda" in state_dict and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])


def build_callbacks(out: Path, *, record: dict, checkpoint: dict, resuming: bool) -> list:
    """The run's callbacks; `record` is the whole config as resolved_config.yaml holds it
    (`secret_keys.config_for_records`), `checkpoint` the config's checkpoint group, `resuming` whether the run
    continues from a checkpoint of its folder."""
    # A checkpoint after a step should hold the weights after that step's update, which is what this warns about.
    warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")
    # Lightning's own pytree helper builds a LeafSpec, which recent torch deprecates: nothing a run can act on.
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    # The module sets the policy's mode itself (eval to sample, train to update: AgentRLModule.training_step), and a
    # frozen reference stays in eval: Lightning's count of modules in eval mode at the start says nothing wrong.
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode at the start of training")
    if rank_zero_only.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        # ${oc.env:...} left as written in `record`: the environment's secrets stay there
        atomic_write_text(out / "resolved_config.yaml", OmegaConf.to_yaml(OmegaConf.create(record)))
        append_environment(out, environment_record(resuming=resuming))  # what this start ran on
    if resuming:  # continuing a run folder: its checkpoints are expected there
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    every = int(checkpoint.get("every_n_steps", 10))
    last_every = int(checkpoint.get("last_every_n_steps", 1))
    dirpath = str(out / "checkpoints")
    return [
        # enable_version_counter=False: a resumed run overwrites its own files instead of adding -v1 copies
        ModelCheckpoint(dirpath=dirpath, filename="step{step}", auto_insert_metric_name=False,
                        every_n_train_steps=every, save_top_k=-1, save_last=False, enable_version_counter=False),
        LastCheckpoint(dirpath=dirpath, every_n_train_steps=last_every, save_top_k=0, save_last=True,
                       enable_version_counter=False),
        RNGStates(),
        ContinueRunFolder(out, resuming=resuming),
        TestRowAtLastStep(),
    ]
