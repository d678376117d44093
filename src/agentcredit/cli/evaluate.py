"""`agentcredit evaluate` (and `python scripts/evaluate.py`): evaluate a policy on held-out questions: one
JSON line of metrics, and one trajectory per question.

    python scripts/evaluate.py split=val n=200                 # the configured model's base policy (model=tiny: after warm start)
    python scripts/evaluate.py ckpt_path=outputs/runs/<run>/checkpoints/last.ckpt split=test
    python scripts/evaluate.py model=smollm2_135m split=val n=20
    python scripts/evaluate.py split=val n=200 oracle_queries=true   # + how often rollouts search what the oracle searches
    python scripts/evaluate.py split=val temperature=0.7 eval_seed=3 rollout.max_tool_turns=12   # any override of conf/

The keys split, n, temperature, eval_seed, batch_size and oracle_queries are conf/eval.yaml's; every
other key is the training config's. Prints the model, accuracy (`success`, `per_template`), format
validity, well-formed turns, tool-call counts and the rollout diagnostics (`agentcredit.run.evaluate`),
on synthetic questions the answer prior of the same questions, with oracle_queries=true the oracle's
searches issued (`agentcredit.testbed.report`), and the base policy's record when the policy starts
from one, as one JSON line on stdout; writes `trajectories.jsonl` (`Trajectory.summary()` plus the
question and gold answer) into the Hydra run folder. A bad value is one line on stderr, before any
model loads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from agentcredit.cli.hydra_start import run_hydra_command
from agentcredit.records import check_output_path


def evaluate_job(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from agentcredit.run.compose import build_components
    from agentcredit.run.evaluate import evaluate_policy, evaluation_config, result_line, write_trajectories
    from agentcredit.testbed.report import synthetic_world_figures
    from agentcredit.run.train import exit_on_one_line_error, load_env_file

    load_env_file()
    hydra_cfg = HydraConfig.get()
    path = Path(hydra_cfg.runtime.output_dir) / "trajectories.jsonl"
    try:
        check_output_path(path)  # before any rollout: a folder in its place would fail after the whole evaluation
    except ValueError as err:
        raise SystemExit(f"evaluate: {err}") from None
    try:
        cfg = evaluation_config(cfg, list(hydra_cfg.overrides.task))
        evaluation = evaluate_policy(cfg, build_components(cfg, base_policy=not cfg.ckpt_path))
    except Exception as err:
        exit_on_one_line_error(err)
        raise
    path = write_trajectories(evaluation, path)
    testbed = synthetic_world_figures(cfg, evaluation.components, evaluation.trajectories, evaluation.questions,
                                      oracle_queries=bool(cfg.oracle_queries))
    print(json.dumps(result_line(evaluation, path, testbed)), flush=True)



def refuse_a_training_run_folder(overrides: list[str]) -> None:
    """An evaluation writes its own record (Hydra's .hydra/, trajectories.jsonl) into hydra.run.dir: aimed at a
    training run's folder it would replace the record of the run's command, which `ckpt_path=` evaluations,
    `progress` and `carry` read. Refused before Hydra writes anything."""
    from agentcredit.cli.hydra_start import refuse, single_run_folder
    from agentcredit.lit.run_folder import FINISHED_MARK, holds_a_run

    run_dir = single_run_folder(overrides, "eval")
    if run_dir is not None and run_dir.is_dir() and (holds_a_run(run_dir) or (run_dir / FINISHED_MARK).is_file()):
        refuse(f"hydra.run.dir {run_dir} holds a training run, whose record an evaluation would replace; choose "
               "another folder (the checkpoint is read from ckpt_path=)")


def main(argv: Sequence[str] | None = None, program: Sequence[str] | None = None) -> None:
    run_hydra_command(evaluate_job, "eval", argv, program, checks=(refuse_a_training_run_folder,))
