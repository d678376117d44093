"""Where a training step's time goes, as one JSON line; with --against, this tree beside another revision.

    python benchmarks/bench_step.py                                   # make train's settings (GRPO, tiny testbed)
    python benchmarks/bench_step.py --threads 1 experiment=compare arm=trace
    python benchmarks/bench_step.py --against 62bd954 --threads 2     # before/after, interleaved in one run

Each run builds what `python train.py <overrides>` builds and trains `--warmup + --steps` steps through Lightning
(checkpoints and the CSV logger included, no validation, no final test). The first `--warmup` steps are left out of
the figures (first-call allocations, the retriever's load); each figure is the median over the timed steps. The split
of a step:

- rollout_s: the step's own rollouts, split into rollout_forward_s (the sampler's model forwards), rollout_tools_s
  (tool calls, observation encoding, the turn's bookkeeping in the worker) and rollout_python_s (the rest: sampling,
  stop checks, the decode loop's bookkeeping);
- credit_s: advantages, with whatever a method needs (reference scoring, continuations, judge); credit_forward_s is
  the part spent in continuations' sampler forwards;
- update_s: update_forward_s (log-probabilities), update_backward_s, update_optimiser_s (the rest: collation, the
  loss, gradient clipping, the optimiser step);
- other_s: the step's logging; period_s: a step's wall time in the training loop (checkpoint save, data loading).

padding_share is the share of the update's forward tokens that are padding; update_skipped_share the share of policy
tokens whose rollouts the update left out (all advantages 0, no KL term: they add nothing to the gradient);
update_forward_share the share of the trained rollouts' tokens its forwards ran on (below 1 where rollouts share
prefixes, train.share_prefixes); update_tokens the tokens its forwards ran on, padding not counted; tokens_per_s is
the step's sampled policy tokens over step_s. step_cpu_s is the step's CPU time (all threads): it moves far less with
other jobs' load than the wall time does (waiting for a core is not counted; caches and memory are still shared);
`ratio_cpu` is its ratio, as `ratio` is the wall time's. startup_s: command to first step; config_error_s (--against): seconds to a bad value's one-line error.

Distance to the machine's limit (models/flops.py, the built policy's shape): rollout_forward_gflops,
update_forward_gflops, update_backward_gflops are the matrix products of the sampler's forwards, of every update forward
and of the backward, each token over the keys it sees, no padding; *_gflop_s: median GFLOPs over median seconds;
matmul_gflop_s and matmul_model_shape_gflop_s: this process's fp32 rate on a 1024³ matmul and on the model's MLP shape
at the step's threads; update_share_of_matmul_rate: the update's GFLOP/s over matmul_gflop_s. step_floor_s: the step
with its forwards and backward at those rates and the sampler's cache reads at read_gb_s (the better of sum_gb_s and
gemv_gb_s), the rest as measured; step_floor_ratio = step_s / step_floor_s, the most that work on those forwards could
gain without changing the arithmetic (models/step_floor.py).

With --against REV the revision and this tree (as at the start, uncommitted changes included) are checked out into
temporary worktrees and run --repeats times each, alternating (REV first), each in its own process with the same
overrides and seed; `ratio` is REV's median step time over this tree's, `ratios` each repeat's. On a shared machine
only the ratio of runs interleaved in one invocation counts. The instrumentation wraps, from the outside, functions
that exist in both revisions."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # revision_trees beside this file, however it is loaded
from revision_trees import revision_trees  # noqa: E402
LAUNCH_ENV = "AGENTCREDIT_BENCH_LAUNCHED"  # wall-clock time the parent started the child (for startup_s)


# ---------------------------------------------------------------------------------------- one side
def instrument(steps: list[dict]) -> None:
    """Wrap the module's, the worker's and the sampler's methods so each step's parts add up in steps[-1]."""
    import torch

    import agentcredit.lit.module as module_mod
    from agentcredit.agent.rollout import RolloutWorker
    from agentcredit.agent.sampling import TurnSampler
    from agentcredit.lit.module import AgentRLModule

    phase = ["idle"]

    def wrap(owner, name, key, *, set_phase=None, count=None):
        original = getattr(owner, name, None)
        if original is None:
            return

        def wrapper(*args, **kwargs):
            previous = phase[0]
            if set_phase:
                phase[0] = set_phase
            if count and steps:  # before the timer: counting is no part of what it times
                add_work(f"{phase[0]}_forward", count(*args))
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                if steps:
                    part = key if set_phase else f"{phase[0]}_{key}"
                    steps[-1][part] += time.perf_counter() - start
                phase[0] = previous

        setattr(owner, name, wrapper)

    update_runs: list = []  # the update batch's runs, set where it is padded

    def add_work(part: str, runs) -> None:
        # Runs of n tokens after `start` cached ones, `head` of them onto the vocabulary: forward_flops' counts (token
        # j of n sees start + j keys). The backward runs through the forwards with a graph (not TIS's no-grad π_old).
        for name in (part, f"{part}_grad") if torch.is_grad_enabled() else (part,):
            steps[-1][f"{name}_calls"] += 1
            for start, n, head in runs:
                steps[-1][f"{name}_tokens"] += n
                steps[-1][f"{name}_contexts"] += n * start + n * (n + 1) // 2
                steps[-1][f"{name}_kv_keys"] += start + n  # a run reads its row's keys once (models/step_floor.py)
                steps[-1][f"{name}_head"] += head

    original_step = AgentRLModule.training_step

    def training_step(self, *args, **kwargs):
        now = time.perf_counter()
        if steps and "started" in steps[-1]:
            steps[-1]["period_s"] = now - steps[-1]["started"]
        steps.append(Counter(started=now, wall_started=time.time(), cpu_started=time.process_time()))
        phase[0] = "credit"  # what runs outside the rollout, the update and the logging (continuations, judge)
        try:
            return original_step(self, *args, **kwargs)
        finally:
            steps[-1]["step_s"] = time.perf_counter() - now
            steps[-1]["step_cpu_s"] = time.process_time() - steps[-1]["cpu_started"]

    AgentRLModule.training_step = training_step

    original_pad_batch = module_mod.pad_batch

    def pad_batch(*args, **kwargs):
        # Counted where the update pads a micro-batch: its forward may run without the mask.
        batch = original_pad_batch(*args, **kwargs)
        if steps and phase[0] == "update":
            steps[-1]["update_padded_tokens"] += batch["input_ids"].numel()
            steps[-1]["update_real_tokens"] += int(batch["attention_mask"].sum())
            # Whatever the padding, a real token sees the real ones up to itself; token_logprobs' head runs on the loss's.
            rows = zip(batch["attention_mask"].sum(-1).tolist(), batch["loss_mask"][:, 1:].sum(-1).tolist())
            update_runs[:] = [(0, n, head) for n, head in rows]
        return batch

    module_mod.pad_batch = pad_batch

    wrap(RolloutWorker, "rollout", "rollout_s", set_phase="rollout")
    wrap(AgentRLModule, "_optimise", "update_s", set_phase="update")
    optimise = AgentRLModule._optimise

    def recording_optimise(self, *args, **kwargs):
        stats = optimise(self, *args, **kwargs)
        if steps:  # revisions before the update skipped rollouts without credit log no share: 0
            steps[-1]["update_skipped_share"] = stats.get("update/skipped_token_share", 0.0)
            # Revisions before the update shared prefixes ran every trained token: 1
            steps[-1]["update_forward_share"] = stats.get("update/forward_token_share", 1.0)
        return stats

    AgentRLModule._optimise = recording_optimise
    shared_logprobs = getattr(AgentRLModule, "_shared_logprobs", None)
    if shared_logprobs is not None:
        def counted_shared_logprobs(self, chunk, batch, plan, temperature):
            # pad_batch padded this batch's tensors for the loss, but its forwards run each rollout unpadded
            # from where it parts from the one before: count those tokens instead (once per batch).
            if steps and phase[0] == "update" and steps[-1].get("counted_batch") != id(batch):
                steps[-1]["counted_batch"] = id(batch)
                ran = sum(len(chunk[i].input_ids) - n for i, _, n in plan)
                steps[-1]["update_padded_tokens"] += ran - batch["input_ids"].numel()
                steps[-1]["update_real_tokens"] += ran - int(batch["attention_mask"].sum())
            # Each rollout runs from n over its parent's n keys; its head from max(n, 1).
            ends = [(n, len(chunk[i].input_ids), batch["loss_mask"][i]) for i, _, n in plan]
            update_runs[:] = [(n, end - n, int(mask[max(n, 1):end].sum())) for n, end, mask in ends]
            return shared_logprobs(self, chunk, batch, plan, temperature)

        AgentRLModule._shared_logprobs = counted_shared_logprobs
    wrap(AgentRLModule, "_log_step", "log_s", set_phase="log")
    wrap(AgentRLModule, "_remember_samples", "remember_s", set_phase="log")
    # A decoding row feeds one token after its cache, a queued row its prefill; each samples at one position.
    wrap(TurnSampler, "_packed", "forward_s", count=lambda s, decoding, queued: [(r.length, 1, 1) for r in decoding]
         + [(r.length, len(r.queued), 1) for r in queued])
    wrap(TurnSampler, "_decode", "forward_s", count=lambda s, feed: [(m[0].length, 1, 1) for m in s.slots if m and m[0].decoding])
    wrap(TurnSampler, "_prefill", "forward_s", count=lambda s, rows: [(r.length, len(r.queued), 1) for r in rows])
    wrap(RolloutWorker, "_prefetch_tools", "tools_s")
    wrap(RolloutWorker, "_step", "tools_s")
    wrap(module_mod, "token_logprobs", "forward_s", count=lambda *_: update_runs)
    # the update's batching sits in lit/update.py since 2026-12-03; before, in lit/module.py
    update_mod = importlib.import_module("agentcredit.lit.update") if importlib.util.find_spec("agentcredit.lit.update") else module_mod
    wrap(update_mod, "shared_token_logprobs", "forward_s", count=lambda *_: update_runs)
    wrap(AgentRLModule, "manual_backward", "backward_s")
    original_finish = RolloutWorker._finish

    def finish(self, item, reason):
        original_finish(self, item, reason)
        if steps and phase[0] == "rollout":
            steps[-1]["sampled_tokens"] += item.traj.num_policy_tokens

    RolloutWorker._finish = finish


def split(parts: Counter, shape=None) -> dict:
    """One step's figures from its raw timers; with the policy's DecoderShape (models/flops.py), its GFLOPs."""
    rollout, update, step = parts["rollout_s"], parts["update_s"], parts["step_s"]
    out = {
        "step_s": step,
        "step_cpu_s": parts["step_cpu_s"],
        "period_s": parts.get("period_s", float("nan")),
        "rollout_s": rollout,
        "rollout_forward_s": parts["rollout_forward_s"],
        "rollout_tools_s": parts["rollout_tools_s"],
        "rollout_python_s": rollout - parts["rollout_forward_s"] - parts["rollout_tools_s"],
        "credit_s": step - rollout - update - parts["log_s"] - parts["remember_s"],
        "credit_forward_s": parts["credit_forward_s"],
        "update_s": update,
        "update_forward_s": parts["update_forward_s"],
        "update_backward_s": parts["update_backward_s"],
        "update_optimiser_s": update - parts["update_forward_s"] - parts["update_backward_s"],
        "other_s": parts["log_s"] + parts["remember_s"],
        "sampled_tokens": parts["sampled_tokens"],
        "tokens_per_s": parts["sampled_tokens"] / step if step else 0.0,
        "padding_share": 1 - parts["update_real_tokens"] / max(parts["update_padded_tokens"], 1),
        "update_tokens": parts["update_real_tokens"],
        "update_skipped_share": parts["update_skipped_share"],
        "update_forward_share": parts.get("update_forward_share", 1.0),
    }
    if shape is not None:
        from agentcredit.models.flops import step_gflops

        out.update({f"rollout_forward_{k}": parts[f"rollout_forward_{k}"] for k in ("tokens", "contexts", "kv_keys")})
        out.update(step_gflops(shape, parts))
    return out


def launch_time(text: str | None) -> float | None:
    """The parent's launch time from LAUNCH_ENV; None when absent or not a finite number (startup_s then
    counts from this process's start instead of failing the run)."""
    try:
        value = float(text or 0)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def run_side(args, overrides: list[str]) -> dict:
    """Train warmup + steps steps in this process; the figures of the timed steps."""
    launched = launch_time(os.environ.get(LAUNCH_ENV))
    started = time.time()
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

    steps: list[Counter] = []
    instrument(steps)
    total = args.warmup + args.steps
    with tempfile.TemporaryDirectory(prefix="bench_step_") as out:
        cfg = compose_config([*overrides, f"trainer.max_steps={total}", f"trainer.val_check_interval={total + 1}",
                              "++final_test=false", "trainer.enable_progress_bar=false", f"++output_dir={out}"])
        cfg = prepare_config(cfg)
        L.seed_everything(int(cfg.seed), workers=True, verbose=False)
        components = build_components(cfg, progress=False)
        module = build_module(cfg, components)
        trainer = build_trainer(cfg, components.policy)
        trainer.fit(module, datamodule=components.datamodule)
        ended = time.perf_counter()
    if len(steps) < total:
        raise SystemExit(f"bench_step: only {len(steps)} of {total} steps ran")
    steps[-1]["period_s"] = ended - steps[-1]["started"]
    has = lambda name: importlib.util.find_spec(f"agentcredit.models.{name}") is not None  # noqa: E731 (older revisions lack some)
    flops = importlib.import_module("agentcredit.models.flops") if has("flops") else None
    shape = flops and flops.decoder_shape(components.policy.config.to_dict())
    timed = [split(s, shape) for s in steps[args.warmup:]]
    figures = {key: statistics.median(s[key] for s in timed) for key in timed[0]}
    if shape:  # the machine's own rates at this process's threads; the model's product as the update (if any) ran it
        part = "update_forward" if any(s["update_forward_calls"] for s in steps[args.warmup:]) else "rollout_forward"
        calls, tokens = (sum(s[f"{part}_{k}"] for s in steps[args.warmup:]) for k in ("calls", "tokens"))
        figures.update(flops.matmul_rates(shape, max(round(tokens / max(calls, 1)), 1)))
        figures.update(flops.achieved_rates(figures, figures["matmul_gflop_s"]))
        if has("step_floor"):  # the floor at this machine's rates (since 2026-12-04)
            figures.update(importlib.import_module("agentcredit.models.step_floor").measured_floor(figures, shape))
    figures["steps"] = [round(s["step_s"], 3) for s in timed]
    figures["first_step_s"] = split(steps[0])["step_s"]
    figures["startup_s"] = steps[0]["wall_started"] - (launched or started)
    figures["threads"] = torch.get_num_threads()
    return figures


# ---------------------------------------------------------------------------------------- two sides
def child(tree: Path, args, overrides: list[str]) -> dict:
    """This script's one-side run against the sources of `tree`, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": str(args.threads),
           LAUNCH_ENV: repr(time.time())}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--threads", str(args.threads),
               "--steps", str(args.steps), "--warmup", str(args.warmup), *overrides]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"bench_step: the run in {tree} failed:\n{done.stderr[-3000:]}")
    return child_figures(lines[-1], tree)


def child_figures(line: str, tree: Path) -> dict:
    """A child's JSON line, checked against its schema: the medians and ratios taken over it need every
    figure a finite number. One line (SystemExit) otherwise."""
    from agentcredit.records import RecordError, parse_json
    from agentcredit.records.reading import validate
    from agentcredit.records.run import BenchFigures

    try:
        figures = parse_json(line)
        validate(BenchFigures, figures, f"the run in {tree}")
        return figures
    except (ValueError, RecordError) as error:
        raise SystemExit(f"bench_step: the run in {tree} printed figures that cannot be read: {error}") from None


def config_error_seconds(tree: Path, threads: int) -> float:
    """Seconds `python train.py` takes to print a bad value's one-line error."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "train.py", "rollout.group_size=1"], cwd=tree, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if "config error" not in done.stderr:
        raise SystemExit(f"bench_step: expected a config error in {tree}, got:\n{done.stderr[-2000:]}")
    return seconds


def rounded(figures: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}


def against(args, overrides: list[str]) -> dict:
    with revision_trees(args.against, prefix="bench_step_rev_") as (trees, names):
        sides: dict[str, list[dict]] = {"before": [], "after": []}
        errors: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                sides[name].append(child(tree, args, overrides))
                if args.config_error:
                    errors[name].append(config_error_seconds(tree, args.threads))
    revision, here_name = names["before"], names["after"]
    result = {"overrides": overrides, "threads": args.threads, "steps": args.steps, "warmup": args.warmup,
              "repeats": args.repeats, "before_revision": revision, "after_revision": here_name}
    for name, runs in sides.items():
        figures = {key: statistics.median(r[key] for r in runs) for key in runs[0] if not isinstance(runs[0][key], list)}
        figures["step_s_per_repeat"] = [round(r["step_s"], 3) for r in runs]
        if errors[name]:
            figures["config_error_s"] = statistics.median(errors[name])
        result[name] = rounded(figures)
    result["ratio"] = round(result["before"]["step_s"] / result["after"]["step_s"], 3)
    result["ratios"] = [round(b["step_s"] / a["step_s"], 3) for b, a in zip(sides["before"], sides["after"])]
    result["ratio_cpu"] = round(result["before"]["step_cpu_s"] / result["after"]["step_cpu_s"], 3)
    result["ratios_cpu"] = [round(b["step_cpu_s"] / a["step_cpu_s"], 3) for b, a in zip(sides["before"], sides["after"])]
    result["ratio_per_token"] = round(result["after"]["tokens_per_s"] / max(result["before"]["tokens_per_s"], 1e-9), 3)
    for part in ("rollout_s", "credit_s", "update_s", "startup_s"):
        result[f"ratio_{part[:-2]}"] = round(result["before"][part] / max(result["after"][part], 1e-9), 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per run")
    parser.add_argument("--warmup", type=int, default=1, help="steps before the timed ones, left out of the figures")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (OMP_NUM_THREADS for --against runs)")
    parser.add_argument("--against", default=None, help="a git revision to run side by side with this tree")
    parser.add_argument("--repeats", type=int, default=3, help="with --against: runs of each side, alternating")
    parser.add_argument("--no-config-error", dest="config_error", action="store_false",
                        help="with --against: skip timing the config error")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for train.py")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1 or args.threads < 1:
        parser.error("--steps, --repeats and --threads must be at least 1 and --warmup at least 0")
    if args.against:
        print(json.dumps(against(args, args.overrides)), flush=True)
    else:
        figures = run_side(args, args.overrides)
        print(json.dumps(rounded(figures) if not args.child else figures), flush=True)


if __name__ == "__main__":
    main()
