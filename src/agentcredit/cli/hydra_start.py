"""The one start-up of every command that composes the run config with Hydra (train, evaluate, fidelity, and
base-policy, which composes it without a Hydra app of its own).

Before Hydra composes or writes anything: older spellings of the command line are read as today's
(`+threads=1` is `threads=1`), the config nodes derived from the credit registry are stored, the command
line and every config it would compose are refused when they hold a secret, a command line Hydra cannot
compose (an unknown option of a config group, a key the config lacks) is one line rather than Hydra's
message and search path, and the command's own checks run (train refuses a run folder another run holds
or that holds a run it would overwrite). Then `@hydra.main` runs the task with the config
groups shipped in the package, so `python train.py`, `python scripts/<x>.py` and `agentcredit <x>`
compose the same config.

Hydra names the job (`hydra.job.name`: the `<name>.log` in the run folder, Lightning's DDP workers) after
the module the task function is defined in, so each command's task lives in a module named as its job
(`agentcredit.cli.train` -> train).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

CONFIG_ERROR_EXIT = 2  # what a command's config error exits with (run/train.py, run/evaluate.py)
HYDRA_RECORD = ".hydra"  # the folder Hydra writes a run's command line and config into


def refuse(problem: str) -> None:
    """A command's config error: `config error: <problem>` on stderr, exit status CONFIG_ERROR_EXIT."""
    print(f"config error: {problem}", file=sys.stderr, flush=True)
    raise SystemExit(CONFIG_ERROR_EXIT)


def checked_overrides(argv: Sequence[str], config_name: str) -> list[str]:
    """`argv` with older spellings read as today's, after the config nodes are stored and the command line and
    every config it composes are checked for secrets (exit 2 with one line), before anything is written."""
    from agentcredit.checks.arm_overrides import arm_override_problem
    from agentcredit.checks.secret_check import refuse_secrets
    from agentcredit.common.configs import current_overrides, register_config_nodes
    from agentcredit.common.paths import config_dir

    overrides = current_overrides(argv)
    register_config_nodes()  # credit/_sweepable and credit/_defaults/<name>, from the credit registry
    refuse_secrets(__file__, str(config_dir()), config_name, overrides)  # first: no message may echo a secret
    problem = composition_problem(overrides, config_name) or arm_override_problem(overrides)
    if problem:
        refuse(problem)
    return overrides


def compose_command_config(argv: Sequence[str], config_name: str = "config") -> DictConfig:
    """The run config of a command that parses its own options and composes without `@hydra.main`
    (base-policy, whose info.json records its overrides), after the same checks."""
    from agentcredit.checks.secret_check import one_composition
    from agentcredit.common.configs import compose_config

    with one_composition():
        overrides = checked_overrides(argv, config_name)
    return compose_config(overrides, config_name)


def composition_problem(argv: Sequence[str], config_name: str) -> str | None:
    """One line on why Hydra cannot compose the command line `argv` (the single run's config, or each of a
    sweep's jobs), or None when it can (or when Hydra answers the command itself: --help and the like)."""
    from agentcredit.checks.secret_check import composed_configs
    from agentcredit.common.paths import config_dir

    try:
        for _ in composed_configs(argv, __file__, str(config_dir()), config_name, strict=True):
            pass
    except Exception as err:  # noqa: BLE001 -- every composition error Hydra raises, in one line
        return hydra_error_line(err)
    return None


def hydra_error_line(err: Exception) -> str:
    """Hydra's composition error in one line: its message without the config search path and the link to
    its grammar page; an unknown option of a group lists the group's options (not the ones Hydra keeps
    for itself, named with a leading underscore)."""
    text = str(err)
    lines = [line.strip() for line in text.splitlines()]
    if "Config search path:" in lines:
        lines = lines[:lines.index("Config search path:")]
    found = re.search(r"^Available options in '([^']+)':$", text, flags=re.MULTILINE)
    if found:
        head = lines[0].removeprefix("In 'config': ")
        options = [line for line in lines[lines.index(found.group(0)) + 1:] if line and not line.startswith("_")]
        return f"{head}; the options of {found.group(1)}: {', '.join(options)}"
    kept = [line.rstrip(".") for line in lines if line and not line.startswith("See https://hydra.cc")]
    what = "; ".join(kept[:1] + [line[:1].lower() + line[1:] for line in kept[1:]]) or type(err).__name__
    return f"the command line does not parse: {what}" if type(err).__name__ == "OverrideParseException" else what


def single_run_folder(overrides: list[str], config_name: str) -> Path | None:
    """The folder a single (not -m) run of `overrides` writes into, when it is fixed before Hydra starts
    (hydra.run.dir given, or a default without a timestamp); None for a sweep, or a dated folder."""
    from agentcredit.checks.secret_check import composed_configs
    from agentcredit.common.paths import config_dir

    for where, cfg in composed_configs(overrides, __file__, str(config_dir()), config_name):
        if where != "the config":
            return None
        run_dir = OmegaConf.select(cfg, "hydra.run.dir", throw_on_resolution_failure=False)
        return Path(run_dir) if isinstance(run_dir, str) and run_dir else None
    return None


def run_folder_problem(run_dir: Path | None) -> str | None:
    """One line when `run_dir` cannot be a folder: it is a file, or lies under one."""
    if run_dir is None:
        return None
    for place in (run_dir, *run_dir.parents):
        if place.exists():
            if place.is_dir():
                return None
            where = "is a file" if place == run_dir else f"lies under the file {place}"
            return f"hydra.run.dir {run_dir} {where}; choose a folder"
    return None


def kept_record(run_dir: Path | None) -> dict[Path, bytes] | None:
    """The files of `run_dir`'s Hydra record (.hydra/) as they are now, to put back if the command is refused
    ({} when the folder holds none); None when the folder does not exist."""
    if run_dir is None or not run_dir.is_dir():
        return None
    record = run_dir / HYDRA_RECORD
    return {path: path.read_bytes() for path in record.iterdir() if path.is_file()} if record.is_dir() else {}


def undo_refused_record(output_dir: Path, kept: dict[Path, bytes] | None, task_overrides: Sequence[str] = ()) -> None:
    """After a refused single run in a folder that existed before it: that folder's Hydra record put back as it
    was (Hydra wrote the refused command's over it). The log file Hydra opened stays: its handler still holds
    it until the process ends (or the next run in this process sets up its own). In a folder this command made
    (`kept` None), the folder goes."""
    if kept is None:  # the folder is this command's own (new, or a dated default): nothing of it is worth keeping
        _remove_new_run_folder(output_dir, task_overrides)
        return
    record = output_dir / HYDRA_RECORD
    if not kept:
        import shutil

        shutil.rmtree(record, ignore_errors=True)  # the folder held no record before: it holds none again
        return
    for path in record.iterdir():  # what Hydra added beside the files the record held
        if path.is_file() and path.name not in {kept_path.name for kept_path in kept}:
            path.unlink()
    for path, data in kept.items():
        (record / path.name).write_bytes(data)


def _remove_new_run_folder(output_dir: Path, task_overrides: Sequence[str]) -> None:
    """A refused command's new run folder, when it holds only what Hydra wrote (.hydra/ and the job's log) and its
    record is this command's (its overrides.yaml lists `task_overrides`): a refusal leaves no folder behind. Anything
    else in it, or another command's record (a run started in the same dated folder in the same second), keeps it."""
    import shutil

    import yaml

    try:
        entries = list(output_dir.iterdir())
        recorded = yaml.safe_load((output_dir / HYDRA_RECORD / "overrides.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    only_hydra = all(entry.name == HYDRA_RECORD or (entry.is_file() and entry.suffix == ".log") for entry in entries)
    if only_hydra and list(recorded or []) == list(task_overrides):
        shutil.rmtree(output_dir, ignore_errors=True)


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

    from agentcredit.checks.secret_check import one_composition

    with one_composition():  # every check below reads the same composed configs (Hydra composes its own after)
        overrides = checked_overrides(sys.argv[1:] if argv is None else argv, config_name)
        program = list(sys.argv[:1] if program is None else program)
        run_dir = single_run_folder(overrides, config_name)
        problem = run_folder_problem(run_dir)
        if problem:
            refuse(problem)
        for check in checks:
            check(overrides)
    # Hydra writes the command's .hydra/ record before the task's own checks run: a refused command must not
    # leave its record over the one of the run already in that folder (evaluate ckpt_path= and carry read it).
    kept = kept_record(run_dir)

    @functools.wraps(task)  # Hydra follows __wrapped__ to the task's module for the job's name
    def with_whole_command_line(cfg: DictConfig):
        sys.argv = [*program, *overrides]
        try:
            return task(cfg)
        except SystemExit as stop:
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            hydra_cfg = HydraConfig.get()
            if stop.code == CONFIG_ERROR_EXIT and hydra_cfg.mode == RunMode.RUN:
                undo_refused_record(Path(hydra_cfg.runtime.output_dir), kept, list(hydra_cfg.overrides.task))
            raise

    sys.argv = [program[0], *overrides]  # Hydra parses its arguments from sys.argv
    return hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=config_name)(
        with_whole_command_line)()
