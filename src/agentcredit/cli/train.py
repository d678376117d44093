"""`agentcredit train` (and `python train.py`): train a policy with the composed run config.

    agentcredit train credit=trace credit.K=3
    agentcredit train -m credit=grpo,trace credit.K=1,3
    agentcredit train hydra.run.dir=outputs/runs/<run> resume=true

The module is named `train` because Hydra names the job after it (train.log in the run folder).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from agentcredit.cli.hydra_start import refuse, run_hydra_command

CONFIG_NAME = "config"


def train_job(cfg: DictConfig) -> float:
    from agentcredit.run.train import run_job

    return run_job(cfg)


def refuse_a_run_folder_in_use(overrides: list[str]) -> None:
    """Hydra writes `.hydra/` (the command line, the config) into hydra.run.dir before the run takes that
    folder's lock, so a command aimed at a folder another run holds, or at a finished or started run without
    resume=true (which the run itself refuses, `lit/run_folder.start_plan`), would overwrite that run's record
    of its own command before being refused: refuse both here, before Hydra writes. A sweep's jobs each take
    their own folder's lock; a dated default folder cannot be held by another run."""
    from agentcredit.checks.secret_check import composed_configs
    from agentcredit.common.configs import ConfigError
    from agentcredit.common.paths import config_dir
    from agentcredit.lit.run_folder import start_plan
    from agentcredit.lit.run_lock import folder_in_use, launching_rank

    if launching_rank() != 0:
        # A worker that Lightning's launcher started by re-running the command (trainer=ddp / fsdp): rank 0 checked
        # the folder and holds its lock, and this process must join it there, not be refused.
        return
    for where, cfg in composed_configs(overrides, __file__, str(config_dir()), CONFIG_NAME):
        run_dir = OmegaConf.select(cfg, "hydra.run.dir", throw_on_resolution_failure=False) if where == "the config" else None
        if not isinstance(run_dir, str):
            return
        if folder_in_use(run_dir):
            refuse(f"{run_dir} is in use by another run; wait until that run ends, or choose another folder "
                   "(hydra.run.dir)")
        try:
            start_plan(Path(run_dir), cfg.get("resume", False), cfg.get("ckpt_path"))
        except ConfigError as err:
            refuse(str(err))
        return


def refuse_a_sweep_with_a_bad_job(overrides: list[str]) -> None:
    """Under -m each job checks its own values when it starts (run/train.run), which for a sweep's late job is
    hours after the sweep began: check every job's config here, before the first one starts, and refuse the
    whole sweep in one line naming the job. A sweep of more than secret_check.MAX_COMBINATIONS jobs is checked
    on combinations that hold every value of every swept key, as the secret check reads it."""
    import copy

    from omegaconf import open_dict
    from omegaconf.errors import OmegaConfBaseException

    from agentcredit.checks.secret_check import composed_configs
    from agentcredit.checks.validation import validate_config
    from agentcredit.common.configs import ConfigError
    from agentcredit.common.paths import config_dir
    from agentcredit.run.train import load_env_file

    load_env_file()  # as each job does first: settings kept in .env (the judge's model and endpoint) count
    prefix = "the sweep job "
    jobs = [(where.removeprefix(prefix).split(" "), cfg)
            for where, cfg in composed_configs(overrides, __file__, str(config_dir()), CONFIG_NAME)
            if where.startswith(prefix)]
    shared = set.intersection(*(set(words) for words, _ in jobs)) if len(jobs) > 1 else set()
    for words, cfg in jobs:
        job = copy.deepcopy(cfg)
        with open_dict(job):
            job.pop("hydra", None)  # Hydra's own node: its runtime values are set only when the job runs
        try:
            validate_config(job)
        except ConfigError as err:
            own = " ".join(word for word in words if word not in shared)  # what sets this job apart
            refuse(f"the sweep's job {own}: {err}" if own else f"the sweep's jobs: {err}")
        except OmegaConfBaseException:
            continue  # a value read from Hydra's runtime (${hydra:job.name}): the job checks itself when it starts


def refuse_other_methods_knobs_typed_for_one_run(overrides: list[str]) -> None:
    """A knob typed on the command line of a single run that the chosen method does not read (`credit=grpo
    credit.K=3`) is a mistake there, not a sweep's shared setting: refuse it in one line. Under -m a knob that only
    some of the sweep's methods read is the point (`-m credit=grpo,trace credit.K=0,1`), and the methods that do not
    read it drop it with a warning (checks/validation.prepare_config). A run continued from a checkpoint
    (resume=true, ckpt_path=) is left alone: one job of such a sweep is continued with its recorded overrides."""
    from agentcredit.checks.secret_check import composed_configs, hydra_args
    from agentcredit.checks.validation import stray_knob_problem, typed_credit_keys
    from agentcredit.common.configs import ConfigError, plain
    from agentcredit.common.paths import config_dir

    args = hydra_args(overrides)
    if args is None:
        return
    for where, cfg in composed_configs(overrides, __file__, str(config_dir()), CONFIG_NAME):
        if where != "the config" or cfg.get("resume") is True or cfg.get("ckpt_path"):
            return  # a sweep, or a run continued from a checkpoint
        try:
            problem = stray_knob_problem(plain(cfg.credit), typed_credit_keys(args.overrides))
        except ConfigError:
            return  # the job's own checks say what is wrong, in one line
        if problem:
            refuse(problem)
        return


def main(argv: Sequence[str] | None = None, program: Sequence[str] | None = None) -> None:
    run_hydra_command(train_job, CONFIG_NAME, argv, program,
                      checks=(refuse_a_run_folder_in_use, refuse_a_sweep_with_a_bad_job,
                              refuse_other_methods_knobs_typed_for_one_run))
