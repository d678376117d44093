"""The one start-up of every command that composes the run config with Hydra (train, evaluate, fidelity, and
base-policy, which composes it without a Hydra app of its own).

Before Hydra composes or writes anything: older spellings of the command line are read as today's
(`+threads=1` is `threads=1`), the config nodes derived from the credit registry are stored, the command
line and every config it would compose are refused when they hold a secret, and the command's own checks
run (train refuses a run folder another run holds). Then `@hydra.main` runs the task with the config
groups shipped in the package, so `python train.py`, `python scripts/<x>.py` and `agentcredit <x>`
compose the same config.

Hydra names the job (`hydra.job.name`: the `<name>.log` in the run folder, Lightning's DDP workers) after
the module the task function is defined in, so each command's task lives in a module named as its job
(`agentcredit.cli.train` -> train).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence

from omegaconf import DictConfig


def checked_overrides(argv: Sequence[str], config_name: str) -> list[str]:
    """`argv` with older spellings read as today's, after the config nodes are stored and the command line and
    every config it composes are checked for secrets (exit 2 with one line), before anything is written."""
    from agentcredit.checks.secret_check import refuse_secrets
    from agentcredit.common.configs import current_overrides, register_config_nodes
    from agentcredit.common.paths import config_dir

    overrides = current_overrides(argv)
    register_config_nodes()  # credit/_sweepable and credit/_defaults/<name>, from the credit registry
    refuse_secrets(__file__, str(config_dir()), config_name, overrides)
    return overrides


def compose_command_config(argv: Sequence[str], config_name: str = "config") -> DictConfig:
    """The run config of a command that parses its own options and composes without `@hydra.main`
    (base-policy, whose info.json records its overrides), after the same checks."""
    from agentcredit.common.configs import compose_config

    return compose_config(checked_overrides(argv, config_name), config_name)


def run_hydra_command(task: Callable[[DictConfig], object], config_name: str, argv: Sequence[str] | None = None,
                      program: Sequence[str] | None = None,
                      checks: Sequence[Callable[[list[str]], None]] = ()) -> object:
    """Run `task` under `@hydra.main(config_name=...)` on the overrides `argv` (default: sys.argv[1:]).
    `program` is what runs the command again (default: sys.argv[0]; `agentcredit train` gives
    [<agentcredit>, "train"]): the task sees it in sys.argv, as Lightning's DDP launcher and the resume
    line of a stopped run read the command line from there. Each of `checks` gets the overrides and
    exits with one line on what it refuses."""
    import agentcredit.run.sweep  # noqa: F401  (registers the job_dirname resolver conf/config.yaml names)
    from agentcredit.common.paths import config_dir

    import hydra

    overrides = checked_overrides(sys.argv[1:] if argv is None else argv, config_name)
    program = list(sys.argv[:1] if program is None else program)
    for check in checks:
        check(overrides)

    @functools.wraps(task)  # Hydra follows __wrapped__ to the task's module for the job's name
    def with_whole_command_line(cfg: DictConfig):
        sys.argv = [*program, *overrides]
        return task(cfg)

    sys.argv = [program[0], *overrides]  # Hydra parses its arguments from sys.argv
    return hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=config_name)(
        with_whole_command_line)()
