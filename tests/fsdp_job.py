"""Worker script for tests/test_fsdp.py, one process per rank (gloo on CPU):

    python -m torch.distributed.run --nproc_per_node=2 tests/fsdp_job.py <out_dir>

The tiny Llama sharded with lit/fsdp2.shard_policy takes one update on a fixed batch of 4 sequences
(rank r holds sequences 2r and 2r+1, all of one length, so each rank's token-mean is half the
batch's); rank 0 repeats it unsharded on the whole batch. Each rank writes rank<r>.json: its loss,
the gradient norm (before clipping), the updated weights, whether the parameters were DTensor shards,
and the logits of a forward on whole weights after unequal numbers of forwards on the two ranks."""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from agentcredit.credit.losses import policy_loss
from agentcredit.lit.fsdp2 import FullWeights, clip_gradients, shard_policy
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.models.tiny import build_tiny_model

VOCAB, LENGTH = 300, 12


def tiny_policy() -> torch.nn.Module:
    tokenizer = type("Vocab", (), {"__len__": lambda self: VOCAB, "eos_token_id": 1, "pad_token_id": 0})()
    return build_tiny_model(tokenizer, hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=2,
                            intermediate_size=64, seed=0)


def batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, VOCAB, (4, LENGTH), generator=g)  # (4, L)
    mask = torch.ones(4, LENGTH)
    mask[:, :3] = 0  # the prompt: no loss
    return {"input_ids": ids, "attention_mask": torch.ones(4, LENGTH, dtype=torch.long), "loss_mask": mask,
            "old_logprobs": -5.0 + 0.1 * torch.randn(4, LENGTH, generator=g),
            "advantages": torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None] * mask}


def update(policy: torch.nn.Module, rows: slice) -> dict:
    """One step of the module's update on rows of the batch: loss, clipped gradients, AdamW."""
    b = {k: v[rows] for k, v in batch().items()}
    optimizer = torch.optim.AdamW(policy.parameters(), lr=0.01)
    logprobs = token_logprobs(policy, b["input_ids"], b["attention_mask"])
    loss, _ = policy_loss(logprobs, b["old_logprobs"], b["advantages"], b["loss_mask"])
    loss.backward()
    grad_norm = clip_gradients(policy.parameters(), max_norm=0.1)  # below the norm (~0.39), so clipping acts
    optimizer.step()
    return {"loss": float(loss.detach()), "grad_norm": float(grad_norm)}


def full_weights(policy: torch.nn.Module) -> list[list[float]]:
    return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().flatten().tolist() for p in policy.parameters()]


def main(out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    policy = tiny_policy()
    shard_policy(policy, init_device_mesh("cpu", (world,)))
    params = list(policy.parameters())
    report = {"dtensor": all(isinstance(p, DTensor) for p in params),
              "local_numel": sum(p.to_local().numel() for p in params), "full_numel": sum(p.numel() for p in params)}
    stats = update(policy, slice(2 * rank, 2 * rank + 2))
    mean_loss = torch.tensor(stats["loss"])
    dist.all_reduce(mean_loss)
    report.update(loss=float(mean_loss) / world, grad_norm=stats["grad_norm"], weights=full_weights(policy))

    # Sampling on whole weights: rank r runs r + 1 forwards with no collective in between.
    probe = batch()["input_ids"][:1]
    with torch.no_grad(), FullWeights(policy):
        for _ in range(rank + 1):
            logits = policy(input_ids=probe).logits
    report["probe_logits"] = logits.flatten().tolist()
    if rank == 0:
        single = tiny_policy()
        report["single"] = {**update(single, slice(0, 4)), "weights": full_weights(single)}
        with torch.no_grad():
            report["single"]["probe_logits"] = single(input_ids=probe).logits.flatten().tolist()
    Path(out, f"rank{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(sys.argv[1])
