"""The held-out test stage's seconds and outcomes, as one JSON line; with --against or --env-before, two sides.

    python benchmarks/bench_test_stage.py --n 64 experiment=compare_long                # one run, this tree
    python benchmarks/bench_test_stage.py --env-before AGENTCREDIT_DECODE_KERNEL=0 --n 256 experiment=compare_long
    python benchmarks/bench_test_stage.py --against 62bd954 --repeats 2 experiment=compare_long   # 1,036 questions

Each run builds, in a fresh process, what `python train.py <overrides>` builds and runs only the test stage that
train.py runs after training (`trainer.test`: the module's test_step over the datamodule's test loader, which writes
test_outcomes.jsonl), from the base policy; with `ckpt_path=...` among the overrides, from that checkpoint's weights
(trainer.test does not restore the training step, so sampling draws from step 0's streams: the outcomes are then
this benchmark's own, not those of the job's test). The figures:

- test_s, test_cpu_s: wall and CPU seconds (all threads) of trainer.test; the build before it is not counted;
- questions, accuracy (mean success), sampled_tokens (policy tokens over every test rollout), mean_reward;
- outcomes_sha256: a hash of test_outcomes.jsonl's results, every field of each question's line (id, success,
  samples, tokens, tool calls, hops, template) but any that is a time; same seed, same outcomes, same hash.
  A revision older than per-question outcomes writes no such file: null, and no accuracy;
- rollouts_sha256: a hash of every test rollout as the sampler returned it (question, a digest of all its tokens,
  sampled tokens, reward, why it ended), read in any revision.

Two sides: `--against REV` runs REV (before) beside this tree (after), each checked out into a temporary worktree
(this tree as at the start, uncommitted changes to tracked files included; untracked files are not); `--env-before
KEY=VALUE` sets a variable on the before side only (the after side runs without it), e.g.
AGENTCREDIT_DECODE_KERNEL=0 to switch a kernel off; alone, both sides run this checkout's sources as they are. Runs
alternate, before first, --repeats times each. `ratio` is before's median test_s over after's, `ratios` each repeat's
(`ratio_cpu` likewise); same_rollouts is true when every run of both sides gave the same rollouts hash;
same_outcomes when they gave the same outcomes hash (null when a side writes none), and questions_differing
counts the questions whose results were not the same in every run."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # revision_trees beside this file, however it is loaded
from revision_trees import revision_trees  # noqa: E402
OUTCOMES = "test_outcomes.jsonl"


# ---------------------------------------------------------------------------------------- outcomes
def is_time(key: str) -> bool:
    """A field that measures time, not a result (none is in the file now; kept out should one be added)."""
    return key.endswith("_s") or "second" in key or "time" in key


def result_line(record: dict) -> str:
    """A question's results as canonical JSON: the hash of the same results is the same whatever the key order."""
    return json.dumps({k: v for k, v in record.items() if not is_time(k)}, sort_keys=True, separators=(",", ":"))


def outcome_figures(records: list[dict]) -> dict:
    """questions, accuracy, sampled_tokens, outcomes_sha256 and each question's digest (`per_question`)."""
    lines = sorted((str(r["id"]), result_line(r)) for r in records)
    whole = hashlib.sha256("\n".join(line for _, line in lines).encode()).hexdigest()
    return {
        "questions": len(records),
        "accuracy": sum(float(r["success"]) for r in records) / max(len(records), 1),
        # `tokens` is a mean over the question's `samples` rollouts
        "sampled_tokens": round(sum(float(r["tokens"]) * int(r.get("samples", 1)) for r in records)),
        "outcomes_sha256": whole,
        "per_question": {qid: hashlib.sha256(line.encode()).hexdigest()[:16] for qid, line in lines},
    }


def rollout_line(trajectory) -> str:
    """One test rollout as canonical JSON: its question, a digest of its tokens (prompt, samples and observations,
    in order), its reward and why it ended. Read from the rollouts themselves, so revisions that write no
    test_outcomes.jsonl (before 2026-12-03's per-question outcomes) are compared too."""
    tokens = hashlib.sha256(",".join(map(str, trajectory.input_ids)).encode()).hexdigest()[:16]
    return json.dumps({"id": str(trajectory.question_id), "tokens": tokens, "sampled": int(sum(trajectory.loss_mask)),
                       "reward": float(trajectory.reward), "finish": trajectory.finish_reason},
                      sort_keys=True, separators=(",", ":"))


def capture_rollouts(lines: list[str]) -> None:
    """Append every rollout the sampler returns from now on to `lines` (rollout_line)."""
    from agentcredit.agent.rollout import RolloutWorker

    original = RolloutWorker.rollout

    def rollout(self, *args, **kwargs):
        groups = original(self, *args, **kwargs)
        lines.extend(rollout_line(t) for group in groups for t in group)
        return groups

    RolloutWorker.rollout = rollout


def questions_differing(runs: list[dict]) -> int:
    """Questions whose digest is not the same in every run (a question missing from a run differs)."""
    ids = set().union(*(r["per_question"] for r in runs))
    return sum(len({r["per_question"].get(qid) for r in runs}) > 1 for qid in ids)


# ---------------------------------------------------------------------------------------- one side
def load_kernels() -> None:
    """Build or load the decode-attention kernel now, where the revision has one (it loads at its first use)."""
    try:
        from agentcredit.agent.decode_kernel import decode_kernel_available
    except ImportError:  # a revision from before the kernel
        return
    decode_kernel_available()


def run_side(args, overrides: list[str]) -> dict:
    """The test stage in this process: its seconds and its outcomes' figures."""
    import torch

    torch.set_num_threads(args.threads)
    import lightning as L

    try:
        from agentcredit.checks.validation import prepare_config
        from agentcredit.common.configs import compose_config
        from agentcredit.run.compose import build_components, build_module, build_trainer
    except ImportError:  # a revision from before the root modules moved into run/, common/ and checks/
        from agentcredit.compose import build_components, build_module, build_trainer
        from agentcredit.configs import compose_config
        from agentcredit.validation import prepare_config

    with tempfile.TemporaryDirectory(prefix="bench_test_stage_") as out:
        n_test = [f"data.n_test={args.n}"] if args.n else []
        cfg = prepare_config(compose_config([*overrides, *n_test, "trainer.enable_progress_bar=false",
                                             f"++output_dir={out}"]))
        L.seed_everything(int(cfg.seed), workers=True, verbose=False)
        components = build_components(cfg, progress=False)
        module = build_module(cfg, components)
        trainer = build_trainer(cfg, components.policy)
        rollouts: list[str] = []
        capture_rollouts(rollouts)
        load_kernels()  # a build (or a rebuild) of a compiled kernel is not the stage's time
        wall, cpu = time.perf_counter(), time.process_time()
        trainer.test(module, datamodule=components.datamodule, ckpt_path=cfg.get("ckpt_path"), verbose=False)
        test_s, test_cpu_s = time.perf_counter() - wall, time.process_time() - cpu
        if not rollouts:
            raise SystemExit(f"bench_test_stage: the test stage rolled nothing out (data.n_test is {cfg.data.n_test})")
        path = Path(out) / OUTCOMES
        # Revisions from before per-question outcomes write no such file: their outcomes are the rollouts' alone.
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else None
    lines = [json.loads(line) for line in rollouts]
    figures = outcome_figures(records) if records is not None else {
        "questions": len({line["id"] for line in lines}), "outcomes_sha256": None, "per_question": {},
        "sampled_tokens": sum(line["sampled"] for line in lines)}
    figures["mean_reward"] = sum(line["reward"] for line in lines) / len(lines)
    return {"test_s": test_s, "test_cpu_s": test_cpu_s, **figures, "rollouts": len(rollouts),
            "rollouts_sha256": hashlib.sha256("\n".join(sorted(rollouts)).encode()).hexdigest(),
            "threads": torch.get_num_threads()}


# ---------------------------------------------------------------------------------------- two sides
def env_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--env-before takes KEY=VALUE, not {text!r}")
    return key, value


def child(tree: Path, env_set: dict[str, str], env_unset: set[str], args, overrides: list[str]) -> dict:
    """This script's one-side run against the sources of `tree`, in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in env_unset}
    env.update({**env_set, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": str(args.threads)})
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--threads", str(args.threads),
               *(["--n", str(args.n)] if args.n else []), *overrides]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"bench_test_stage: the run in {tree} failed:\n{done.stderr[-3000:]}")
    figures = json.loads(lines[-1])
    if not all(math.isfinite(figures[k]) and figures[k] > 0 for k in ("test_s", "test_cpu_s")):
        raise SystemExit(f"bench_test_stage: the run in {tree} printed seconds that cannot be compared: {lines[-1][:300]}")
    return figures


def side_figures(runs: list[dict]) -> dict:
    """A side's medians (per_question left out), its seconds per repeat and its hashes."""
    numbers = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    figures = {k: round(statistics.median(r[k] for r in runs), 4) for k in numbers}
    # counts stay whole numbers (a median of two is a float)
    figures.update({k: int(figures[k]) for k in numbers if all(isinstance(r[k], int) for r in runs) and figures[k] % 1 == 0})
    figures["test_s_per_repeat"] = [round(r["test_s"], 3) for r in runs]
    figures["outcomes_sha256"] = sorted({r["outcomes_sha256"] for r in runs if r["outcomes_sha256"]})
    figures["rollouts_sha256"] = sorted({r["rollouts_sha256"] for r in runs})
    return figures


def compared(args, overrides: list[str], trees: dict[str, Path], names: dict[str, str]) -> dict:
    """Both sides run --repeats times, alternating (before first): their medians, ratios and outcomes."""
    env_before = dict([args.env_before]) if args.env_before else {}
    settings = {"before": (env_before, set()), "after": ({}, set(env_before))}
    sides: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            sides[name].append(child(tree, *settings[name], args, overrides))
    result = {"overrides": overrides, "threads": args.threads, "n": args.n, "repeats": args.repeats}
    for name, runs in sides.items():
        result[name] = {"source": names[name], "env": settings[name][0], **side_figures(runs)}
    before, after = sides["before"], sides["after"]
    result["ratio"] = round(result["before"]["test_s"] / result["after"]["test_s"], 3)
    result["ratios"] = [round(b["test_s"] / a["test_s"], 3) for b, a in zip(before, after)]
    result["ratio_cpu"] = round(result["before"]["test_cpu_s"] / result["after"]["test_cpu_s"], 3)
    every = before + after
    # The same rollouts, token for token, on both sides; and, where both sides write per-question outcomes, the
    # same outcome lines (a revision without them has none to compare: null).
    result["same_rollouts"] = len({r["rollouts_sha256"] for r in every}) == 1
    with_outcomes = all(r["outcomes_sha256"] for r in every)
    result["same_outcomes"] = len({r["outcomes_sha256"] for r in every}) == 1 if with_outcomes else None
    if with_outcomes and not result["same_outcomes"]:
        result["questions_differing"] = questions_differing(every)
    return result


def against(args, overrides: list[str]) -> dict:
    """REV and this tree (frozen as at the start) in temporary worktrees, side by side."""
    with revision_trees(args.against, prefix="bench_test_stage_rev_") as (trees, names):
        return compared(args, overrides, trees, names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="test questions (data.n_test; default: the config's)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (and OMP_NUM_THREADS of the runs)")
    parser.add_argument("--against", default=None, help="a git revision to run before this tree")
    parser.add_argument("--env-before", type=env_setting, default=None, metavar="KEY=VALUE",
                        help="an environment variable set on the before side only")
    parser.add_argument("--repeats", type=int, default=1, help="with two sides: runs of each, alternating")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for train.py")
    args = parser.parse_args()
    if args.repeats < 1 or args.threads < 1 or (args.n is not None and args.n < 1):
        parser.error("--repeats, --threads and --n must be at least 1")
    if args.child:
        print(json.dumps(run_side(args, args.overrides)), flush=True)
    elif args.against:
        print(json.dumps(against(args, args.overrides)), flush=True)
    elif args.env_before:
        trees = {"before": ROOT, "after": ROOT}
        print(json.dumps(compared(args, args.overrides, trees, {"before": "this checkout", "after": "this checkout"})),
              flush=True)
    else:
        figures = child(ROOT, {}, set(), args, args.overrides)
        figures.pop("per_question")
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}), flush=True)


if __name__ == "__main__":
    main()
