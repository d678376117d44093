"""Rollout throughput against plain `model.generate` on the same batch and lengths, as one JSON line.

    python benchmarks/bench_rollout.py                       # tiny testbed (base policy)
    python benchmarks/bench_rollout.py --model smollm2_135m --questions 2 --group 4
    python benchmarks/bench_rollout.py --engine vllm         # rollout.engine=vllm, side by side with the HF engine

The rollout figure counts policy-sampled tokens over the wall time of the whole multi-turn loop
(tool calls, observation encoding and the per-turn prefill included). The plain figure runs
`model.generate` without tools on the same batch (every trajectory's prompt, left-padded) with
each row's own length: the batch runs as many steps as its longest trajectory sampled (EOS
suppressed), which is what `generate` does when rows stop at different points, and its useful
tokens are the ones the rollouts sampled. `ratio_mean_length` compares against a run where
every row generates the mean length instead (no straggler: a harder baseline). Every figure is
measured in this run: `--repeats` times (default 3) the rollout and then the plain runs, with
the same seed each time; every figure comes from the repeat with the median ratio (`ratios` lists
all of them), which keeps the load of a shared machine from deciding the figure.

The rollout's wall time is also split into model forwards (`forward_s`, `forwards`; with the
lean forward one forward per step serves both the decoding rows and the observation prefill of
the rows back from their tools, `prefill_tokens` of them), tool work (`tools_s`: query
embedding, environment steps, observation encoding) and the rest (`other_s`: sampling, stop
checks, bookkeeping).

With `--engine vllm` the rollouts sample through the colocated vLLM engine (agent/engines/) and
every repeat also runs the HF engine on the same questions and seed: `tokens_per_s` and `ratio`
are the vLLM engine's, `hf_tokens_per_s` the HF engine's, `ratio_vs_hf` their quotient (tokens
per second: the two engines draw different random numbers, so they sample different trajectories),
`engine_start_s` the engine's start (vLLM import included). The forward/tools split is then
the HF engine's; the vLLM engine's forwards run inside vLLM.
"""

import argparse
import json
import time
from collections import Counter

import torch

from agentcredit.run.compose import build_components
from agentcredit.common.configs import compose_config
from agentcredit.agent.engines import build_engine
from agentcredit.agent.rollout import RolloutConfig, RolloutWorker
from agentcredit.agent.sampling import TurnSampler


def time_parts(totals: Counter) -> None:
    """Add the wall time of the rollout's parts to `totals` as they run: model forwards (and how
    many, and the observation and template tokens they prefill) and tool work (query embedding,
    environment steps, observation encoding). The rest is sampling, stop checks and bookkeeping."""
    def timed(cls, name, part, counts=()):
        original = getattr(cls, name)

        def wrapper(self, *args, **kwargs):
            for key, count in counts:  # before the call: a prefill empties its rows' queues
                totals[key] += count(*args)
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                totals[part + "_s"] += time.perf_counter() - start
        setattr(cls, name, wrapper)

    def queued_tokens(rows):
        return sum(len(r.queued) for r in rows)

    timed(TurnSampler, "_decode", "forward", [("forwards", lambda feed: 1)])
    timed(TurnSampler, "_prefill", "forward", [("forwards", lambda rows: 1), ("prefill_tokens", queued_tokens)])
    timed(TurnSampler, "_packed", "forward", [("forwards", lambda decoding, queued: 1),
                                              ("prefill_tokens", lambda decoding, queued: queued_tokens(queued))])
    timed(RolloutWorker, "_prefetch_tools", "tools")
    timed(RolloutWorker, "_step", "tools")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the policy and the HF engine's sampling)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rollout and plain runs, interleaved; figures come from the median-ratio repeat")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    torch.set_num_threads(args.threads)
    cfg = compose_config([f"model={args.model}", *args.overrides])
    components = build_components(cfg)
    model = components.policy.to(args.device).eval()
    questions = list(components.datamodule.split_questions("val"))[: args.questions]
    # The rollout samples on --threads threads, as plain generate does (rollout.threads would otherwise cap it).
    rollout_cfg = RolloutConfig(**{**vars(components.rollout_cfg), "group_size": max(args.group, 2), "threads": args.threads})
    make_worker = lambda engine: RolloutWorker(  # noqa: E731
        model, components.chat, components.env_factory, components.reward_fn, rollout_cfg,
        torch.Generator(device=args.device).manual_seed(args.seed), engine=engine)
    engine, engine_start_s = None, 0.0
    if args.engine == "vllm":
        start = time.perf_counter()
        engine = build_engine(RolloutConfig(**{**vars(rollout_cfg), "engine": "vllm"}), model, components.tokenizer,
                              seed=args.seed)
        engine_start_s = time.perf_counter() - start
    worker, hf_worker = make_worker(engine), make_worker(None)
    worker.rollout(questions[:1], group_size=2)  # warm-up: first-call allocations, retriever load
    if engine is not None:
        hf_worker.rollout(questions[:1], group_size=2)

    parts: Counter = Counter()
    time_parts(parts)
    embedder = getattr(getattr(components.env_factory(), "retriever", None), "embedder", None)
    def timed_rollout(w):
        # Same seed every repeat: the same trajectories, so every repeat times the same work, and
        # no repeat finds its search queries already embedded by an earlier one.
        w.generator = torch.Generator(device=args.device).manual_seed(args.seed)
        if embedder is not None:
            embedder.clear_query_cache()
        parts.clear()
        start = time.perf_counter()
        groups = w.rollout(questions, group_size=args.group)
        return [t for g in groups for t in g], time.perf_counter() - start

    runs = []
    for _ in range(args.repeats):
        trajectories, rollout_s = timed_rollout(worker)
        run = {}
        if engine is not None:  # the HF engine on the same questions and seed, in the same repeat
            # Its forward/tools split is the one reported (`parts` now holds it): vLLM's forwards run
            # inside vLLM, where the split cannot see them.
            hf_trajectories, run["hf_rollout_s"] = timed_rollout(hf_worker)
            run["hf_tokens"] = sum(t.num_policy_tokens for t in hf_trajectories)
        plain_s, plain_mean_s = plain_generate_seconds(model, components, trajectories, rollout_cfg, args.seed)
        runs.append({"rollout_s": rollout_s, "plain_s": plain_s, "plain_mean_length_s": plain_mean_s, **parts, **run})

    generated = sum(t.num_policy_tokens for t in trajectories)
    longest = max(t.num_policy_tokens for t in trajectories)
    mean_tokens = max(1, round(generated / len(trajectories)))
    for run in runs:  # equal tokens on both sides: the speed ratio is the time ratio
        run["ratio"] = run["plain_s"] / run["rollout_s"]
        run["ratio_mean_length"] = run["plain_mean_length_s"] * generated / (mean_tokens * len(trajectories)) / run["rollout_s"]
    # Every figure comes from one repeat, the one with the median ratio (the lower one of two middles).
    median = sorted(runs, key=lambda run: run["ratio"])[(len(runs) - 1) // 2]
    extra = {}
    if engine is not None:
        hf_tokens_per_s = median["hf_tokens"] / median["hf_rollout_s"]
        extra = {"hf_tokens_per_s": round(hf_tokens_per_s, 1),
                 "ratio_vs_hf": round(generated / median["rollout_s"] / hf_tokens_per_s, 3),
                 "ratios_vs_hf": [round(generated / r["rollout_s"] / (r["hf_tokens"] / r["hf_rollout_s"]), 3) for r in runs],
                 "hf_rollout_s": round(median["hf_rollout_s"], 2), "engine_start_s": round(engine_start_s, 1)}
        engine.close()
    print(json.dumps({
        "model": args.model,
        "engine": args.engine,
        "rollouts": len(trajectories),
        "generated_tokens": generated,
        "tokens_per_s": round(generated / median["rollout_s"], 1),
        "plain_generate_tokens_per_s": round(generated / median["plain_s"], 1),
        "ratio": round(median["ratio"], 3),
        "ratios": [round(run["ratio"], 3) for run in runs],
        "ratio_mean_length": round(median["ratio_mean_length"], 3),
        "longest_trajectory_tokens": longest,
        "mean_trajectory_tokens": mean_tokens,
        "mean_tool_calls": round(sum(t.num_tool_turns for t in trajectories) / len(trajectories), 2),
        "repeats": args.repeats,
        "rollout_s": round(median["rollout_s"], 2),
        "plain_s": round(median["plain_s"], 2),
        "plain_mean_length_s": round(median["plain_mean_length_s"], 2),
        # Where that rollout's time went (the rest: sampling, stop checks, bookkeeping).
        "forward_s": round(median["forward_s"], 3),
        "forwards": median["forwards"],
        "prefill_tokens": median["prefill_tokens"],
        "tools_s": round(median["tools_s"], 3),
        "other_s": round(median.get("hf_rollout_s", median["rollout_s"]) - median["forward_s"] - median["tools_s"], 3),
        **extra,
    }), flush=True)


def plain_generate_seconds(model, components, trajectories, rollout_cfg, seed: int) -> tuple[float, float]:
    """Wall time of `model.generate` on the trajectories' prompts (left-padded, one batch), for the
    longest trajectory's length and for the mean length."""
    tok = components.tokenizer
    prompts = [t.input_ids[: t.boundaries[0]] + list(components.chat.assistant_header) for t in trajectories]
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    device = next(model.parameters()).device
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in prompts])[:, None]).long().to(device)

    def seconds(new_tokens: int) -> float:
        torch.manual_seed(seed)
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                           do_sample=True, temperature=rollout_cfg.temperature, top_p=rollout_cfg.top_p, pad_token_id=pad)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    # Same lengths: the batch runs until its longest row is done, and the useful tokens are each
    # row's own count (a row that stopped early only pads, as in `generate` with per-row EOS).
    generated = sum(t.num_policy_tokens for t in trajectories)
    longest = max(t.num_policy_tokens for t in trajectories)
    return seconds(longest), seconds(max(1, round(generated / len(trajectories))))


if __name__ == "__main__":
    main()
