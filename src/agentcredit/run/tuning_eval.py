"""A tuning job's score: its last checkpoint rolled out once on each question of the tuning set.

The tuning set is `world.splits.tuning_questions`: the last `size` questions of the val split, which no
training, validation or test reads. The job's own training overrides (its `.hydra/overrides.yaml`) give the
model, data and rollout settings, as `scripts/evaluate.py` does with a checkpoint. Written into the job folder:
`tune_outcomes.jsonl` (one line per question, `records/outcomes.py`'s schema) and then `tune_summary.json`
(accuracy, the checkpoint's step, the seed of the rollouts), each whole and atomically; the summary last, so
that both present means the job is finished (`analysis/tuning.py`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from agentcredit.analysis.tuning import TUNE_OUTCOMES, TUNE_SUMMARY
from agentcredit.common.configs import ConfigError, compose_config
from agentcredit.records import atomic_write_text
from agentcredit.records.outcomes import write_outcomes
from agentcredit.run.evaluate import apply_policy_state, evaluation_config, read_policy_state, rollout_questions
from agentcredit.world.splits import tuning_questions


def outcome_record(question, trajectory, is_success) -> dict:
    return {"id": question.id, "hops": question.hops or None, "template": question.template,
            "success": float(is_success(trajectory.reward)), "samples": 1,
            "tool_calls": float(trajectory.num_tool_turns), "tokens": float(trajectory.num_policy_tokens)}


def evaluate_tuning_job(folder: str | Path, size: int, expected_steps: int | None = None, batch_size: int = 256,
                        eval_seed: int = 0) -> dict:
    """Score the job in `folder` on the tuning set; returns what tune_summary.json holds."""
    from agentcredit.run.compose import build_components

    if isinstance(size, bool) or not isinstance(size, int) or size < 1:  # before a model is loaded for nothing
        raise ConfigError(f"the tuning set's size (--size) must be an integer >= 1, got {size!r}")
    folder = Path(folder).resolve()
    ckpt = folder / "checkpoints" / "last.ckpt"
    if not ckpt.is_file():
        raise ConfigError(f"{folder} holds no checkpoints/last.ckpt: the job has not trained yet")
    state, step = read_policy_state(str(ckpt))
    if expected_steps is not None and step != expected_steps:
        raise ConfigError(f"{ckpt} is at step {step}, not {expected_steps}: the job's training is not finished; "
                          "run it again (it resumes) before scoring it")
    # n=1 only satisfies the evaluation's own check; the questions are the tuning set's, chosen below.
    overrides = [f"ckpt_path={ckpt}", "split=val", "n=1", f"batch_size={batch_size}", f"eval_seed={eval_seed}"]
    cfg = evaluation_config(compose_config(overrides, config_name="eval"), overrides)
    components = build_components(cfg, base_policy=False)
    apply_policy_state(components.policy, state, str(ckpt))
    try:
        questions = list(tuning_questions(components.datamodule.split_questions("val"), size))
    except ValueError as error:  # more questions than the val split holds past the head that validation reads
        raise ConfigError(str(error)) from None
    start = time.time()
    trajectories = rollout_questions(components, questions, float(cfg.temperature), batch_size, eval_seed)
    seconds = time.time() - start
    is_success = components.reward_fn.is_success
    records = sorted((outcome_record(q, t, is_success) for q, t in zip(questions, trajectories)), key=lambda r: r["id"])
    write_outcomes(folder / TUNE_OUTCOMES, records)
    summary = {"accuracy": sum(r["success"] for r in records) / len(records), "questions": len(records),
               "steps": step, "seed": int(cfg.seed), "eval_seed": eval_seed, "temperature": float(cfg.temperature),
               "seconds": round(seconds, 1)}
    atomic_write_text(folder / TUNE_SUMMARY, json.dumps(summary, indent=1) + "\n")
    return summary
