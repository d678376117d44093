"""Training entry logic behind the top-level `train.py`.

    python train.py                                  # GRPO on the tiny testbed, CPU
    python train.py credit=trace credit.K=3
    python train.py -m credit=grpo,trace credit.K=1,3
    python train.py hydra.run.dir=outputs/runs/<run> resume=true           # continue an interrupted run
    python train.py -m credit=grpo,trace hydra.sweep.dir=<sweep> resume=true   # ... or sweep: finished jobs are skipped

`run_job` is what the command does: a config error is one line (`config error: ...`), and so is a
problem in your own data files (`data error: ...`), with exit status 2; a damaged checkpoint
(`checkpoint error: ...`), a non-finite loss or gradient (`training stopped: ...`), NaN or inf logits while
sampling (`sampling stopped: ...`) and a full disk or quota
(`disk full: ...`, naming the last good checkpoint, which stays whole) are one line with exit status 1;
under `-m` a failing job writes `error.txt` into its folder, returns nan and the sweep
goes on. A folder another run is writing to is refused in one line (its lock, `lit/run_lock.py`); a SIGTERM saves, prints the step reached and the command that continues, and exits 143 (`preemption.py`). With `resume=true` a finished run (its test_summary.json) is skipped and an unfinished one continues
from its last.ckpt (`lit/run_folder.py`) under the settings it started with (`lit/resume_config.py`: another
setting of what it computes is a config error); without it, a folder that already holds a run is a config error. Lightning is imported only after the config has been checked, so a bad value fails fast.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import sys
import traceback
from pathlib import Path

import torch
from omegaconf import DictConfig

from agentcredit.common.configs import ConfigError, plain, run_dir_path
from agentcredit.common.cpuinfo import usable_cores
from agentcredit.lit.run_folder import FINISHED_MARK, DiskFull, as_disk_full, start_plan
from agentcredit.lit.run_lock import FolderInUse, hold_run_folder, launching_rank
from agentcredit.run import preemption, sweep
from agentcredit.run.recorded_arm import recorded_arm
from agentcredit.run.preemption import Preempted, is_sigterm_stop
from agentcredit.checks.validation import prepare_config
from agentcredit.world.user import UserDataError

log = logging.getLogger(__name__)


def spawns_processes(trainer_cfg: dict) -> bool:
    """Whether Lightning would start worker processes itself by re-running the command."""
    strategy = trainer_cfg.get("strategy", "auto")
    name = strategy.get("name") if isinstance(strategy, dict) else str(strategy)
    devices = trainer_cfg.get("devices", 1)
    if isinstance(devices, str) and devices not in ("auto", "-1"):
        devices = [d for d in devices.split(",") if d.strip()]  # "0,1" lists device ids
    many = devices in ("auto", "-1", -1) or (isinstance(devices, int) and devices > 1) or (isinstance(devices, list) and len(devices) > 1)
    launched_outside = "LOCAL_RANK" in os.environ or "SLURM_PROCID" in os.environ
    return name.startswith(("ddp", "fsdp")) and many and not launched_outside and not name.endswith(("spawn", "fork"))


def load_env_file() -> str | None:
    """Variables from the nearest `.env` (cwd upwards; see .env.example). The environment wins over the
    file, and empty values are skipped: `CUDA_VISIBLE_DEVICES=` would otherwise hide every GPU."""
    from dotenv import dotenv_values, find_dotenv

    path = find_dotenv(usecwd=True)
    for key, value in (dotenv_values(path) if path else {}).items():
        if value and key not in os.environ:
            os.environ[key] = value
    return path or None


def metric_by_step(metrics_csv: Path, name: str) -> list[float]:
    """A metric's values in step order from a run's metrics.csv ([] without the file or the metric).
    Of rows repeating a step (folders written before a resumed run dropped the rows after its
    checkpoint), the last counts."""
    from agentcredit.records import RecordError
    from agentcredit.records.metrics import read_steps_rows

    if not metrics_csv.is_file():
        return []
    by_step: dict[int, float] = {}
    try:  # a damaged row is left out with one warning line: the closing line must not fail the run
        for _, row in read_steps_rows(metrics_csv, (name,)):
            if name in row.values:
                by_step[row.step] = row.values[name]
    except RecordError as err:
        print(f"warning: {err}; its figures are left out", file=sys.stderr, flush=True)
    return [by_step[step] for step in sorted(by_step)]


def reward_trend(metrics_csv: Path, n: int = 10) -> tuple[float, float] | None:
    """Mean `train/reward` over the first n and the last n steps of a run's metrics.csv (fewer when
    the run is shorter); None without the file or a logged reward."""
    rewards = metric_by_step(metrics_csv, "train/reward")
    if not rewards:
        return None
    first, last = rewards[:n], rewards[-n:]
    return sum(first) / len(first), sum(last) / len(last)


def run_summary(metrics_csv: Path) -> str:
    """The closing line's figures read back from metrics.csv: whether reward rose (mean train/reward
    over the first and the last 10 steps) and how often groups were mixed (the steps' mean share of
    groups with both right and wrong answers: where outcome credit has anything to compare)."""
    trend = reward_trend(metrics_csv)
    text = f" train/reward first10={trend[0]:.4f} last10={trend[1]:.4f}" if trend else ""
    mixed = metric_by_step(metrics_csv, "train/groups_mixed")
    if mixed:
        text += f" train/groups_mixed mean={sum(mixed) / len(mixed):.4f}"
    return text


def stopped_at(trainer, stage: str) -> Preempted:
    """`Preempted` with the step `trainer` reached and the one its last.ckpt callback wrote last."""
    from agentcredit.lit.callbacks import LastCheckpoint

    last = next((c for c in trainer.callbacks if isinstance(c, LastCheckpoint)), None)
    saved = last._last_global_step_saved if last is not None and last._last_checkpoint_saved else None
    return Preempted(step=int(trainer.global_step), saved=saved, stage=stage)


TESTBED_MAX_HIDDEN = 256  # widths the testbed's own presets use (128); a tiny-kind model past it is a real shape


def job_threads(threads: int | str, model_kind: str | None, hidden_size: int | None = None) -> int | None:
    """torch's intra-op threads for the job (`threads`, checked by validation): an integer as given; `auto`
    1 for the tiny testbed model and None (torch's default) for real ones and for a tiny-kind model built in a
    real model's shape (hidden_size past TESTBED_MAX_HIDDEN, as scripts/gpu_check.sh builds SmolLM2's). The
    testbed model's operations are too small to gain from splitting, and a float sum split over threads adds in
    an order that depends on the thread count, so one thread also gives every host of a CPU family the same
    closing line."""
    if threads != "auto":
        return int(threads)
    testbed_sized = hidden_size is None or int(hidden_size) <= TESTBED_MAX_HIDDEN
    return 1 if model_kind == "tiny" and testbed_sized else None


def run(cfg: DictConfig) -> float:
    """Train and return the final validation accuracy (the metric a sweep optimises)."""
    load_env_file()
    cfg = prepare_config(cfg)  # before any model is loaded or imported: a bad value costs nothing
    run_dir = Path(run_dir_path(cfg)).resolve()
    with hold_run_folder(run_dir):  # one writer per folder, before start_plan reads it (lit/run_lock.py)
        return train_in(cfg, run_dir)


UNBOUNDED_RUN = ("trainer.max_steps=-1: training has no last step and no held-out test; stop it with Ctrl-C or "
                 "SIGTERM (last.ckpt is written first) and continue it with resume=true")


def train_in(cfg: DictConfig, run_dir: Path) -> float:
    """`run` in a folder this process holds; a SIGTERM ends it with `Preempted` (agentcredit/run/preemption.py)."""
    # The held-out test after training; its test_summary.json is what marks a run finished.
    final_test = bool(cfg.get("final_test", True)) and int(cfg.data.get("n_test", 0)) > 0
    plan = start_plan(run_dir, cfg.get("resume", False), cfg.get("ckpt_path"), finished_mark=final_test)
    if plan.ckpt_path and cfg.get("ckpt_path") in (None, "last"):
        # resume=true found the folder's own checkpoint (a ckpt_path= was checked with the config): check it before
        # any model loads, where a truncated file would otherwise be found inside Lightning's fit
        from agentcredit.common.checkpoint_file import CheckpointError, other_checkpoints, whole_checkpoint_problem

        problem = whole_checkpoint_problem(plan.ckpt_path)
        if problem:
            raise CheckpointError(f"{problem}; {other_checkpoints(plan.ckpt_path)}")
    (run_dir / "error.txt").unlink(missing_ok=True)  # an earlier attempt's failure; this attempt writes its own
    if plan.skip:
        return report_finished(run_dir)
    if plan.ckpt_path and cfg.get("ckpt_path") in (None, "last"):  # resume=true found the folder's own checkpoint
        from agentcredit.common.secret_keys import config_for_records
        from agentcredit.lit.resume_config import check_resumed_config

        check_resumed_config(run_dir, config_for_records(cfg))
    cfg = with_checkpoint(cfg, plan.ckpt_path)
    if cfg.trainer.get("max_steps") == -1:
        print(f"[agentcredit] {UNBOUNDED_RUN}", flush=True)
    import lightning as L

    from agentcredit.run.compose import build_components, build_module, build_trainer, split_run_config
    from agentcredit.lit.wandb_logger import finish_wandb

    threads = job_threads(cfg.get("threads", "auto"), cfg.model.get("kind"), cfg.model.get("hidden_size"))
    if threads is not None:
        if threads > (cores := usable_cores()):
            print(f"[agentcredit] warning: threads={threads} is more than the {cores} cores this process may use: "
                  "threads that share a core wait on each other at every operation", file=sys.stderr, flush=True)
        torch.set_num_threads(threads)
    failed = True
    test_metrics: dict = {}
    trainer, stage = None, "training"
    try:
        L.seed_everything(int(cfg.seed), workers=True, verbose=False)
        arm = recorded_arm(cfg)  # the setting it trains, named once (run/recorded_arm.py)
        parts = split_run_config(cfg)  # the config split once; each builder gets only its groups
        # In resolved_config.yaml and W&B too: runs group by it there, and a comparison names a run killed
        # before its test_summary.json by it.
        parts = dataclasses.replace(parts, record={**parts.record, "recorded_arm": arm})
        components = build_components(parts)  # world, environment, reward, policy (after its warm start)
        module = build_module(parts, components)  # credit config split once; reference, judge, verifier
        trainer = build_trainer(parts, components.policy)
        datamodule = components.datamodule
        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
        accuracy = float(trainer.callback_metrics.get("val/accuracy", math.nan))  # trainer.test resets them
        if math.isnan(accuracy):  # a resumed run whose last validation ran before the interruption
            accuracy = (metric_by_step(run_dir / "metrics.csv", "val/accuracy") or [math.nan])[-1]
        if final_test:
            stage = "the held-out test"
            test_metrics = (trainer.test(module, datamodule=datamodule, verbose=False) or [{}])[0]
        failed = False
    except BaseException as err:
        if is_sigterm_stop(err) and trainer is not None:  # Lightning's loop stopped after a whole batch
            raise stopped_at(trainer, stage) from None
        raise
    finally:
        finish_wandb(failed)  # a sweep's next job must start its own W&B run, failed or not
    if trainer.is_global_zero:
        shown = f"{accuracy:.4f}" if not math.isnan(accuracy) else f"n/a (no validation ran: {why_no_validation(cfg)})"
        tested = ""
        if test_metrics:
            summary = write_test_summary(run_dir, cfg, test_metrics, int(trainer.global_step), arm)
            tested = f" test/accuracy={summary['test/accuracy']:.4f} (n={summary['n_test']})"
        print(f"[agentcredit] final val/accuracy={shown}{tested}{run_summary(run_dir / 'metrics.csv')} run_dir={run_dir}", flush=True)
    return accuracy


def why_no_validation(cfg: DictConfig) -> str:
    """The setting that kept a finished run from validating, for its closing line."""
    if int(cfg.data.get("n_val", 1) or 0) == 0:
        return "data.n_val=0"
    if cfg.trainer.get("limit_val_batches") in (0, 0.0):
        return "trainer.limit_val_batches=0"
    if cfg.trainer.get("val_check_interval") is None:
        return "trainer.val_check_interval=null"
    return "trainer.val_check_interval > trainer.max_steps"


def with_checkpoint(cfg: DictConfig, ckpt_path: str | None) -> DictConfig:
    """`cfg` with the checkpoint the run starts from (`lit.run_folder.start_plan`)."""
    if cfg.get("resume") and not cfg.get("ckpt_path"):
        where = f"from {ckpt_path}" if ckpt_path else "from step 0 (no checkpoint in the run folder yet)"
        print(f"[agentcredit] resume=true: continuing {where}", flush=True)
    if ckpt_path == cfg.get("ckpt_path"):
        return cfg
    from omegaconf import open_dict

    with open_dict(cfg):
        cfg.ckpt_path = ckpt_path
    return cfg


def report_finished(run_dir: Path) -> float:
    """A finished run that resume=true skips: one line, and its last val/accuracy for the sweep."""
    accuracies = metric_by_step(run_dir / "metrics.csv", "val/accuracy")
    accuracy = accuracies[-1] if accuracies else math.nan
    print(f"[agentcredit] finished already ({run_dir / FINISHED_MARK}), skipped: run_dir={run_dir}", flush=True)
    return accuracy


def write_test_summary(run_dir: Path, cfg: DictConfig, test_metrics: dict, steps: int, arm: str) -> dict:
    """test_summary.json in the run folder: the held-out metrics and what the run was (scripts/compare.py);
    `arm` is the setting it trained (`recorded_arm`)."""
    import json

    summary = {
        "arm": arm,
        "credit": cfg.credit.name,
        "judge": plain(cfg.judge).get("kind") if cfg.get("judge") is not None else None,
        "seed": int(cfg.seed),
        "steps": steps,
        "n_test": int(test_metrics.get("test/n", cfg.data.n_test)),
        **{k: float(v) for k, v in test_metrics.items() if k.startswith("test/") and k != "test/n"},
    }
    from agentcredit.records import atomic_write_text

    run_dir.mkdir(parents=True, exist_ok=True)
    # Renamed into place: a half-written file would mark an unfinished run as finished for resume=true.
    atomic_write_text(run_dir / FINISHED_MARK, json.dumps(summary, indent=1) + "\n")
    return summary


def sweep_dir() -> str:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().sweep.dir


def in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:  # Hydra is not running this call
        return False


def record_failure(out: Path, err: BaseException) -> Path | str:
    """The traceback of a sweep job's failure in its folder's error.txt; where that cannot be written (the
    failure may be a full disk) the sweep still goes on, and the log line says why."""
    from agentcredit.records import atomic_write_text

    path = out / "error.txt"
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, "".join(traceback.format_exception(err)))
    except OSError as write_err:
        return f"none: {path} could not be written ({write_err.strerror or write_err})"
    return path


def one_line_kind(err: BaseException) -> str | None:
    """The prefix of errors a user can act on from one line (no traceback), None for the rest."""
    from agentcredit.common.checkpoint_file import CheckpointError

    kinds = [(ConfigError, "config error"), (UserDataError, "data error"), (CheckpointError, "checkpoint error"),
             (DiskFull, "disk full")]
    lit_module = sys.modules.get("agentcredit.lit.module")  # not imported yet: no step ran, none stopped (and a
    if lit_module is not None:                              # config error need not wait for its imports)
        kinds.append((lit_module.NonFiniteTraining, "training stopped"))
    sampler = sys.modules.get("agentcredit.agent.next_token")
    if sampler is not None:
        kinds.append((sampler.NonFiniteLogits, "sampling stopped"))
    return next((kind for cls, kind in kinds if isinstance(err, cls)), None)


def exit_on_one_line_error(err: BaseException) -> None:
    """`<kind>: <message>` on stderr and exit (status 2 for config and data errors, 1 for the rest) when
    a user can act on `err` from one line; any other error returns, for the caller to re-raise."""
    kind = one_line_kind(err)
    if kind is not None:
        print(f"{kind}: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2 if kind in ("config error", "data error") else 1) from None


def run_job(cfg: DictConfig) -> float:
    """One Hydra job: `run`, with the command-line error handling described in the module docstring."""
    multirun = in_multirun()
    if multirun:
        preemption.keep_stop_handlers()  # in a joblib worker: a signal between jobs stops the worker's next ones
    if multirun and not preemption.PROGRESS.received and sweep.stop_requested(sweep_dir()):
        # The sweep's process was stopped after this process last heard from it: loky replaces a worker whose
        # memory grew by 300 MB after its job, and the new one never received the signal.
        preemption.PROGRESS.received = True
    if multirun and (preemption.PROGRESS.drained or sweep.drain_requested(sweep_dir())):  # a SIGUSR1 drained it
        preemption.PROGRESS.drained = True
        sweep.mark_drained(sweep_dir())  # where this worker received the signal itself, for the sweep's summary
    if multirun and (preemption.PROGRESS.received or preemption.PROGRESS.drained):  # later jobs do not start
        preemption.PROGRESS.not_run.append(run_dir_path(cfg))
        return math.nan
    previous = None if multirun else preemption.install_stop_handlers()  # under -m: SweepSummary's, for the sweep
    preemption.PROGRESS.in_job = True
    try:
        if multirun and spawns_processes(plain(cfg.trainer)):
            raise ConfigError("a multi-process trainer (ddp/fsdp on several devices) cannot run under -m, because "
                              "Lightning re-runs the command for each worker; run the jobs one at a time")
        accuracy = run(cfg)
        preemption.PROGRESS.finished.append(run_dir_path(cfg))
        return accuracy
    except Preempted as err:
        return stop_on_sigterm(err, run_dir_path(cfg), multirun)
    except Exception as err:
        err = as_disk_full(err, Path(run_dir_path(cfg)).resolve())  # one line naming the last good checkpoint
        if not multirun:
            exit_on_one_line_error(err)
            raise
        if isinstance(err, FolderInUse):  # the folder is another run's: nothing of this job is written into it
            preemption.PROGRESS.refused.append(str(err))
            sweep.record_refusal(sweep_dir(), str(err))  # for the sweep's summary, where this is a worker process
            log.error(f"job not run, the sweep goes on: {err}")
            return math.nan
        path = record_failure(run_dir_path(cfg), err)
        log.error(f"job failed, the sweep goes on: {type(err).__name__}: {err} (traceback in {path})")
        return math.nan
    finally:
        preemption.PROGRESS.in_job = False
        preemption.restore_stop_handlers(previous)


def stop_on_sigterm(err: Preempted, run_dir: Path, multirun: bool) -> float:
    """The closing line of a job a SIGTERM stopped; exit 143, or under -m nan (later jobs are skipped and
    sweep.SweepSummary ends the sweep with the command that continues it)."""
    run_dir = Path(run_dir).resolve()
    preemption.PROGRESS.received = True
    if multirun:
        where = f"at step {err.step}" if err.step is not None else f"during {err.stage}"
        preemption.PROGRESS.interrupted.append(f"{run_dir} ({where})")
        print(preemption.closing_line(err, run_dir, None), flush=True)
        return math.nan
    if launching_rank() == 0:  # the other processes of a ddp/fsdp run stop with it, silently
        print(preemption.closing_line(err, run_dir, preemption.resume_command(sys.argv, "hydra.run.dir", run_dir)),
              flush=True)
    raise SystemExit(preemption.PROGRESS.exit_status)
