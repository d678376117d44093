"""How fast a tiny-model config learns to copy out of its context, as one JSON line.

    python scripts/research/probe_copying.py                          # conf/model/tiny.yaml sizes
    python scripts/research/probe_copying.py --tasks content --steps 400 -- model.num_layers=3

What it measures: how many steps of the warm start's optimiser and update
(`warmstart.sft_optimizer`, `sft_step`) a model config needs to copy out of its context, on the two
synthetic tasks of `testbed/copy_task.py`, each from fresh weights: `offset` (the copy sits a fixed
distance back, as the question's entity does for the first query) and `content` (the distance
varies, so the earlier occurrence must be found by content, as a name on a page must be for a
query or an answer). Accuracy is per token on a held-out batch; `chance_loss` is ln(pool).
"""

import argparse
import json
import math
import sys
import time

import torch

from agentcredit.testbed.warmstart import WarmStartConfig, sft_optimizer, sft_step
from agentcredit.common.configs import compose_config
from agentcredit.testbed.copy_task import FIRST_ID, PAD_ID, copy_accuracy, copy_batch
from agentcredit.models.tiny import build_tiny_model


class _VocabOnly:
    """build_tiny_model reads only the vocabulary size and two special ids from a tokenizer."""

    eos_token_id = 1
    pad_token_id = PAD_ID

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def probe(task: str, model_cfg, args) -> dict:
    model = build_tiny_model(
        _VocabOnly(model_cfg.vocab_size), architecture=model_cfg.architecture, hidden_size=model_cfg.hidden_size,
        num_layers=model_cfg.num_layers, num_heads=model_cfg.num_heads, num_kv_heads=model_cfg.num_kv_heads,
        intermediate_size=model_cfg.intermediate_size, rope_theta=model_cfg.rope_theta,
        tie_embeddings=model_cfg.tie_embeddings, seed=model_cfg.seed,
    )
    shape = (args.pool, args.span_min, args.span_max, args.noise)
    evaluation = copy_batch(task, args.eval_rows, *shape, torch.Generator().manual_seed(10_000 + args.seed))
    generator = torch.Generator().manual_seed(args.seed)
    optimizer, schedule = sft_optimizer(model, WarmStartConfig(steps=args.steps, lr=args.lr))
    model.train()
    curve, tokens, start = [], 0, time.time()
    for step in range(1, args.steps + 1):
        batch = copy_batch(task, args.batch_size, *shape, generator)
        sft_step(model, batch, optimizer, schedule, obs_loss_weight=0.0)
        tokens += int(batch["attention_mask"].sum())
        if step % args.eval_every == 0 or step == args.steps:
            eval_loss, accuracy = copy_accuracy(model, evaluation)
            curve.append({"step": step, "loss": round(eval_loss, 3), "token_accuracy": round(accuracy, 3)})
    return {"final_token_accuracy": curve[-1]["token_accuracy"], "final_loss": curve[-1]["loss"],
            "curve": curve, "tokens": tokens, "seconds": round(time.time() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="offset,content")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    # The warm start's learning rate when the probe figures in docs/testbed.md were measured (it is 1e-2 now).
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--pool", type=int, default=2000, help="distinct token ids drawn (the tiny tokenizer has about 2,200)")
    parser.add_argument("--span-min", type=int, default=6)
    parser.add_argument("--span-max", type=int, default=19)
    parser.add_argument("--noise", type=int, default=11)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-rows", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps torch's default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="model.* overrides of conf/model/tiny.yaml")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model_cfg = compose_config(["model=tiny", *args.overrides]).model
    if args.pool + FIRST_ID > model_cfg.vocab_size:
        parser.error(f"--pool {args.pool} needs a vocabulary of at least {args.pool + FIRST_ID} (model.vocab_size={model_cfg.vocab_size})")
    tasks = [t for t in args.tasks.split(",") if t]
    if not tasks or set(tasks) - {"offset", "content"}:
        parser.error(f"--tasks {args.tasks!r}: use offset, content or both (comma-separated)")
    if not 2 <= args.span_min <= args.span_max or args.steps < 1 or args.eval_every < 1:
        parser.error("need 2 <= --span-min <= --span-max, --steps >= 1 and --eval-every >= 1")
    try:
        curves = {task: probe(task, model_cfg, args) for task in tasks}
    except ValueError as error:  # a model override the tiny builder rejects
        parser.error(str(error))
    result = {
        "model": {k: model_cfg[k] for k in ("architecture", "hidden_size", "num_layers", "num_heads", "intermediate_size")},
        "steps": args.steps, "batch_size": args.batch_size, "pool": args.pool, "chance_loss": round(math.log(args.pool), 3),
        "tasks": curves,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
