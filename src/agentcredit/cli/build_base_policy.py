"""Build the tiny testbed's base policy once and write it where runs load it from.

    python scripts/build_base_policy.py                     # the default recipe -> src/agentcredit/testbed/shipped/
    python scripts/build_base_policy.py data=testbed_long   # a preset's recipe -> src/agentcredit/testbed/shipped/testbed_long/
    python scripts/build_base_policy.py warmstart.steps=20 --out /tmp/bp   # any Hydra override; another folder
    python scripts/build_base_policy.py --no-eval           # skip the held-out evaluation written into info.json

Interrupted builds resume: the state is saved every `warmstart.checkpoint_every` steps under
$AGENTCREDIT_CACHE/base_policy_build/<key>/ and picked up by the same command. info.json records
the key runs match against, the build's figures and time, and (unless --no-eval) success on the
validation split, the answer prior of the same questions, the oracle's later searches issued and
TRACE's readiness (scripts/research/readiness.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder to write (default: the shipped artefact)")
    parser.add_argument("--no-eval", action="store_true")
    parser.add_argument("--n-eval", type=int, default=200)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))

    from agentcredit.run.compose import base_policy_settings, build_components
    from agentcredit.cli.hydra_start import compose_command_config
    from agentcredit.common.paths import cache_dir
    from agentcredit.testbed.base_policy import base_policy_key, build_base_policy, refuse_a_float64_build, save_base_policy
    from agentcredit.checks.validation import ConfigError, prepare_config

    try:
        cfg = prepare_config(compose_command_config(args.overrides))
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    if cfg.model.kind != "tiny" or not cfg.model.warm_start:
        print("config error: the base policy is built for model=tiny with model.warm_start=true", file=sys.stderr)
        return 2
    try:
        refuse_a_float64_build(dict(cfg.model))
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    components = build_components(cfg, progress=not args.quiet, base_policy=False)
    settings = base_policy_settings(cfg)
    key = base_policy_key(settings, components)
    out = args.out or shipped_folder(args.overrides)
    start = time.time()
    info = build_base_policy(settings, components, progress=not args.quiet,
                             checkpoint_folder=cache_dir() / "base_policy_build" / key)
    info.update({"key": key, "build_seconds": round(time.time() - start, 1), "threads": torch.get_num_threads(),
                 "overrides": list(args.overrides)})
    if not args.no_eval:
        info["evaluation"] = evaluate_base_policy(cfg, components, n=args.n_eval)
    save_base_policy(components.policy, components.tokenizer, info, out)
    print(json.dumps({"out": str(out), **{k: v for k, v in info.items() if k != "overrides"}}), flush=True)
    return 0


def shipped_folder(overrides: list[str]):
    """Where a build ships by default: build E's folder, or shipped/<preset>/ for a data preset of its own."""
    from agentcredit.testbed.base_policy import SHIPPED

    presets = [o.split("=", 1)[1] for o in overrides if o.startswith("data=")]
    preset = presets[-1] if presets else "tiny"
    return SHIPPED if preset in ("tiny", "testbed") else SHIPPED / preset


def evaluate_base_policy(cfg, components, n: int = 200, split: str = "val", temperature: float = 1.0, seed: int = 0) -> dict:
    """The figures info.json records: `evaluate.summarise` of one rollout per question, the answer prior and
    the oracle's searches (`testbed.report.synthetic_world_figures`) and TRACE's readiness."""
    from agentcredit.run.evaluate import rollout_questions, summarise
    from agentcredit.testbed.readiness import readiness
    from agentcredit.testbed.report import reference_scores, synthetic_world_figures

    start = time.time()
    questions = list(components.datamodule.split_questions(split))[:n]
    trajectories = rollout_questions(components, questions, temperature, seed=seed)
    summary = summarise(trajectories, questions)
    summary.update(synthetic_world_figures(cfg, components, trajectories, questions, oracle_queries=True))
    scores = reference_scores(components.policy, components.chat, trajectories, questions)
    summary["readiness"] = readiness(scores, [t.observations for t in trajectories], [q.answer for q in questions])
    summary.update({"split": split, "temperature": temperature, "seconds": round(time.time() - start, 1)})
    return summary

