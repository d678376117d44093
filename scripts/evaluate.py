"""Evaluate a policy on held-out questions: one JSON line of metrics, and one trajectory per question.

    python scripts/evaluate.py ckpt_path=outputs/runs/<run>/checkpoints/last.ckpt split=test
    python scripts/evaluate.py split=val limit=50            # the untrained base policy (after warm start)

Prints accuracy (`success`), format validity, tool-call counts and the rollout diagnostics of
`agentcredit.evaluate.summarise` as one JSON line on stdout, and writes `trajectories.jsonl`
(`Trajectory.summary()` plus the question and gold answer) into the Hydra run folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
import yaml
from omegaconf import DictConfig

import agentcredit.sweep  # noqa: F401  (the job_dirname resolver named in conf/config.yaml)
from agentcredit.secret_keys import refuse_secret_overrides


def training_overrides(ckpt_path: str | None) -> list[str]:
    """The overrides the checkpoint's run was started with (`<run>/.hydra/overrides.yaml`), if recorded."""
    if not ckpt_path:
        return []
    recorded = Path(ckpt_path).resolve().parents[1] / ".hydra" / "overrides.yaml"
    if not recorded.exists():
        return []
    return [o for o in yaml.safe_load(recorded.read_text()) or [] if not o.startswith(("ckpt_path=", "hydra."))]


def merge_overrides(first: list[str], then: list[str]) -> list[str]:
    """`first` then `then`, a key given in both keeping its value from `then`."""
    key = lambda override: override.lstrip("+~").split("=", 1)[0]  # noqa: E731
    later = {key(o) for o in then}
    return [o for o in first if key(o) not in later] + list(then)


def load_policy_weights(policy, ckpt_path: str) -> None:
    """The policy's weights from a Lightning checkpoint of this project (its `policy.` state_dict entries)."""
    from agentcredit.checkpoint_file import CheckpointError, read_checkpoint

    prefix = "policy."
    try:
        checkpoint = read_checkpoint(ckpt_path, weights_only=False)  # our own file: trusted
    except CheckpointError as err:
        raise SystemExit(f"evaluate: {err}") from None
    state = {k[len(prefix):]: v for k, v in checkpoint.get("state_dict", {}).items() if k.startswith(prefix)}
    if not state:
        raise SystemExit(f"evaluate: {ckpt_path} holds no policy weights; give a checkpoint written by train.py")
    try:
        policy.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err))
        raise SystemExit(f"evaluate: {ckpt_path} does not fit the configured model ({first}); "
                         "pass the model overrides the run was trained with") from None


def evaluate(cfg: DictConfig, out: Path) -> dict:
    from agentcredit.compose import build_components
    from agentcredit.evaluate import rollout_questions, summarise
    from agentcredit.validation import prepare_config

    cfg = prepare_config(cfg)
    # A checkpoint's weights replace the base policy's: no need to load (or build) it first.
    components = build_components(cfg, base_policy=not cfg.ckpt_path)
    if cfg.ckpt_path:
        load_policy_weights(components.policy, cfg.ckpt_path)
    limit = cfg.limit if cfg.limit is not None else {"test": cfg.data.n_test, "val": cfg.data.n_val}.get(cfg.split)
    questions = list(components.datamodule.split_questions(cfg.split))[:limit]
    trajectories = rollout_questions(components, questions, float(cfg.temperature), int(cfg.batch_size), int(cfg.eval_seed))
    path = out / "trajectories.jsonl"
    with path.open("w") as f:
        for question, trajectory in zip(questions, trajectories):
            record = {"question": question.text, "gold_answer": question.answer, "template": question.template,
                      **trajectory.summary()}
            f.write(json.dumps(record, default=float) + "\n")
    correct = float(cfg.env.reward.correct_score)
    return {"ckpt_path": cfg.ckpt_path, "split": cfg.split, **summarise(trajectories, questions, correct),
            "trajectories": str(path)}


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    from agentcredit.train import load_env_file
    from agentcredit.configs import ConfigError

    load_env_file()
    hydra_cfg = HydraConfig.get()
    recorded = training_overrides(cfg.ckpt_path)
    if recorded:
        cfg = compose(config_name="eval", overrides=merge_overrides(recorded, list(hydra_cfg.overrides.task)))
    try:
        result = evaluate(cfg, Path(hydra_cfg.runtime.output_dir))
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    refuse_secret_overrides()  # before Hydra writes the command line anywhere
    main()
