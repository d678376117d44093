"""`torch.compile` (the CPU inductor) against eager, on the sampler's forwards and on the update's forward and
backward of one rollout batch, side by side in this process, as one JSON line.

    python benchmarks/bench_compile.py --threads 1 experiment=compare_long arm=grpo

Sampler: the rollouts of --questions questions x --group, eager, then with each decoder layer's work outside
attention compiled (`_FusedLayer.queries_keys_values`: norm, q/k/v projection, RoPE; `_FusedLayer.residual_mlp`:
output projection, residual, norm, MLP; attention stays the decode kernel and the prefill's SDPA), alternating
--repeats times, the same seed each time, so every repeat samples the same tokens unless a compiled float
decides a draw differently (`same_tokens`). Update: `token_logprobs` forward and backward on each of those
rollouts (one micro-batch each, its loss mask as the positions needed), eager against `torch.compile(dynamic=True)`,
alternating. `*_compile_s` is the first compiled pass less a later one: what a job pays once (recompiles for new
shapes included). Ratios are eager seconds over compiled seconds (medians; above 1: compiled is faster).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_rollout beside this file
from bench_rollout import time_parts  # noqa: E402


def timed(fn):
    """(result, wall seconds, CPU seconds) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def rollout_hash(trajectories) -> str:
    return hashlib.sha1(json.dumps([t.input_ids for t in trajectories]).encode()).hexdigest()[:16]


def max_logprob_gap(a, b) -> float | None:
    """Largest |Δ| between two runs' recorded log-probabilities, None when they sampled different tokens."""
    if rollout_hash(a) != rollout_hash(b):
        return None
    return max((abs(x - y) for s, t in zip(a, b) for x, y in zip(s.old_logprobs, t.old_logprobs)), default=0.0)


def compare_sampler(worker, questions, group: int, seed: int, repeats: int) -> dict:
    from agentcredit.agent import lean_forward

    fused = lean_forward._FusedLayer
    eager_methods = {name: getattr(fused, name) for name in ("queries_keys_values", "residual_mlp")}
    compiled_methods = {name: torch.compile(fn, dynamic=True) for name, fn in eager_methods.items()}
    parts: Counter = Counter()
    time_parts(parts)

    def run(methods):
        for name, fn in methods.items():
            setattr(fused, name, fn)
        worker.generator = torch.Generator().manual_seed(seed)
        parts.clear()
        try:
            groups, wall, cpu = timed(lambda: worker.rollout(questions, group_size=group))
        finally:
            for name, fn in eager_methods.items():
                setattr(fused, name, fn)
        return [t for g in groups for t in g], {"wall_s": wall, "cpu_s": cpu, "forward_s": parts["forward_s"]}

    _, first = run(compiled_methods)  # compiles, for every shape the rollout meets
    eager, compiled = [], []
    for _ in range(repeats):
        eager_trajectories, e = run(eager_methods)
        compiled_trajectories, c = run(compiled_methods)
        eager.append(e)
        compiled.append(c)
    median = {side: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
              for side, runs in (("eager", eager), ("compiled", compiled))}
    return {
        "sampler_tokens": sum(t.num_policy_tokens for t in eager_trajectories),
        "sampler_eager_forward_s": round(median["eager"]["forward_s"], 4),
        "sampler_compiled_forward_s": round(median["compiled"]["forward_s"], 4),
        "sampler_forward_ratio": round(median["eager"]["forward_s"] / median["compiled"]["forward_s"], 4),
        "sampler_forward_ratios": [round(e["forward_s"] / c["forward_s"], 4) for e, c in zip(eager, compiled)],
        "sampler_ratio_cpu": round(median["eager"]["cpu_s"] / median["compiled"]["cpu_s"], 4),
        "sampler_compile_s": round(first["wall_s"] - median["compiled"]["wall_s"], 1),
        "same_tokens": rollout_hash(eager_trajectories) == rollout_hash(compiled_trajectories),
        "sampler_max_logprob_gap": max_logprob_gap(eager_trajectories, compiled_trajectories),
    }, eager_trajectories


def compare_update(model, trajectories, temperature: float, repeats: int) -> dict:
    from agentcredit.lit.logprobs import token_logprobs

    batches = []
    for t in trajectories:
        ids = torch.tensor([t.input_ids])
        batches.append((ids, torch.ones_like(ids), torch.tensor([t.loss_mask])))
    compiled_logprobs = torch.compile(token_logprobs, dynamic=True)

    def run(fn):
        model.zero_grad(set_to_none=True)
        logprobs = []

        def passes():
            for ids, mask, positions in batches:
                out = fn(model, ids, mask, temperature, positions)
                out.sum().backward()
                logprobs.append(out.detach())
        _, wall, cpu = timed(passes)
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return {"wall_s": wall, "cpu_s": cpu}, torch.cat([x.flatten() for x in logprobs]), grads

    first, _, _ = run(compiled_logprobs)
    eager, compiled = [], []
    for _ in range(repeats):
        e, eager_logprobs, eager_grads = run(token_logprobs)
        c, compiled_logprobs_out, compiled_grads = run(compiled_logprobs)
        eager.append(e)
        compiled.append(c)
    model.zero_grad(set_to_none=True)
    e_wall, c_wall = (statistics.median(r["wall_s"] for r in runs) for runs in (eager, compiled))
    return {
        "update_tokens": sum(ids.shape[1] for ids, _, _ in batches),
        "update_eager_s": round(e_wall, 4),
        "update_compiled_s": round(c_wall, 4),
        "update_ratio": round(e_wall / c_wall, 4),
        "update_ratios": [round(e["wall_s"] / c["wall_s"], 4) for e, c in zip(eager, compiled)],
        "update_ratio_cpu": round(statistics.median(r["cpu_s"] for r in eager)
                                  / statistics.median(r["cpu_s"] for r in compiled), 4),
        "update_compile_s": round(first["wall_s"] - c_wall, 1),
        "update_max_logprob_gap": float((eager_logprobs - compiled_logprobs_out).abs().max()),
        "update_grad_gap": float((eager_grads - compiled_grads).abs().max() / eager_grads.abs().max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    torch.set_num_threads(args.threads)

    from agentcredit.agent.rollout import RolloutConfig, RolloutWorker
    from agentcredit.common.configs import compose_config
    from agentcredit.run.compose import build_components

    components = build_components(compose_config(list(args.overrides)))
    model = components.policy.eval()
    questions = list(components.datamodule.split_questions("val"))[: args.questions]
    rollout_cfg = RolloutConfig(**{**vars(components.rollout_cfg), "threads": args.threads})
    worker = RolloutWorker(model, components.chat, components.env_factory, components.reward_fn, rollout_cfg,
                           torch.Generator().manual_seed(args.seed))
    worker.rollout(questions[:1], group_size=2)  # warm-up: first-call allocations, the retriever's load
    sampler, trajectories = compare_sampler(worker, questions, args.group, args.seed, args.repeats)
    update = compare_update(model.train(), trajectories, rollout_cfg.temperature, args.repeats)
    print(json.dumps({"threads": args.threads, "rollouts": len(trajectories), "repeats": args.repeats,
                      **sampler, **update}), flush=True)


if __name__ == "__main__":
    main()
