"""Naive vs fast TRACE reference scoring (ℓ̄_0..ℓ̄_T) on one realistic-length trajectory.

    python benchmarks/bench_reference_scoring.py                      # tiny model, T = 8
    python benchmarks/bench_reference_scoring.py --model smollm2_135m --T 8

Prints one JSON line {"T", "max_abs_diff", "naive_s", "fast_s", "speedup", ...}; both timings come
from this run (one warm-up each, then the median of --repeats, naive and fast taking turns).
The trajectory is random token ids laid out as prompt + T × (action + observation); scoring cost
depends only on lengths, not on content.
With --trajectories N > 1, fast scores all N in one `score_batch` call and naive loops over them.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from agentcredit.models import ScoringItem, build_reference, load_policy, score_batch, score_naive

CONF = Path(__file__).resolve().parents[1] / "conf" / "model"


def synthetic_texts(n_words: int = 60000, seed: int = 0) -> list[str]:
    """Enough varied text for the tiny tokenizer to fill its vocabulary (ids are random anyway)."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(3000)]
    return [" ".join(rng.choices(words, k=30)) for _ in range(n_words // 30)]


def make_item(vocab: int, opener: list[int], args: argparse.Namespace, seed: int) -> ScoringItem:
    g = torch.Generator().manual_seed(seed)
    turn = args.action_len + args.obs_len
    length = args.prompt_len + args.T * turn + args.action_len  # + the final answer turn
    ids = torch.randint(0, vocab, (length,), generator=g)  # (L,)
    boundaries = [args.prompt_len + k * turn for k in range(args.T + 1)]
    answer = torch.randint(0, vocab, (args.answer_len,), generator=g).tolist()
    return ScoringItem(ids, boundaries, opener, answer)


def interleaved_medians(fns, repeats: int) -> list[float]:
    """Median wall time of each function; one warm-up each, then the functions take turns.

    Taking turns spreads any load from other processes over all functions alike, so the ratio
    stays meaningful on a shared machine even when the absolute times do not.
    """
    for fn in fns:
        fn()  # warm-up: allocator, kernels, lazy initialisation
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, bucket in zip(fns, times):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) for bucket in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", choices=["tiny", "smollm2_135m"])
    parser.add_argument("--T", type=int, default=8, help="tool turns; T+1 prefixes are scored")
    parser.add_argument("--prompt-len", type=int, default=150)
    parser.add_argument("--action-len", type=int, default=30)
    parser.add_argument("--obs-len", type=int, default=150)
    parser.add_argument("--answer-len", type=int, default=5)
    parser.add_argument("--trajectories", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default=None, choices=[None, "float32", "bfloat16"], help="default: the model config's")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    cfg = OmegaConf.load(CONF / f"{args.model}.yaml")
    policy, tokenizer = load_policy(cfg, tokenizer_texts=synthetic_texts)
    reference = build_reference(policy, cfg)
    reference.to(device=args.device, dtype=getattr(torch, args.dtype) if args.dtype else None)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    # The assistant header is what add_generation_prompt appends after a conversation.
    turn = [{"role": "user", "content": "q"}]
    render = lambda gen: tokenizer.apply_chat_template(turn, add_generation_prompt=gen, tokenize=False)
    header = render(True)[len(render(False)) :]
    opener = tokenizer.encode(header + "<answer>", add_special_tokens=False)
    items = [make_item(len(tokenizer), opener, args, seed) for seed in range(args.trajectories)]

    def naive() -> list[torch.Tensor]:
        out = [score_naive(reference, it.input_ids, it.boundaries, it.opener_ids, it.answer_ids) for it in items]
        sync()  # CUDA runs asynchronously: time the work, not its launch
        return out

    def fast() -> list[torch.Tensor]:
        out = score_batch(reference, items)
        sync()
        return out

    diff = max((a - b).abs().max().item() for a, b in zip(naive(), fast()))
    naive_s, fast_s = interleaved_medians([naive, fast], args.repeats)
    print(json.dumps({
        "T": args.T,
        "max_abs_diff": diff,
        "naive_s": round(naive_s, 4),
        "fast_s": round(fast_s, 4),
        "speedup": round(naive_s / fast_s, 2),
        "model": args.model,
        "tokens": int(items[0].input_ids.shape[0]),
        "trajectories": args.trajectories,
        "threads": args.threads,
        "device": args.device,
    }))


if __name__ == "__main__":
    main()
