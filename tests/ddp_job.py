"""Worker script for tests/test_ddp.py (Lightning re-runs it once per rank):

    python tests/ddp_job.py <out_dir> <overrides...>

Trains with trainer=ddp (or the `trainer=` among the overrides, e.g. trainer=fsdp) and the `signal` credit
method (non-zero gradients from an untrained policy); each rank writes rank<r>.json: the questions it trained
on, its whole weights before and after training, and whether its parameters were sharded (DTensor)."""

import json
import sys
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor

from agentcredit.lit.module import AgentRLModule
from agentcredit.run.train import run
from tiny_runs import ensure_signal_credit, tiny_config


def whole(p: torch.Tensor) -> torch.Tensor:
    return p.full_tensor() if isinstance(p, DTensor) else p  # FSDP2 shard -> the whole parameter (a collective)


def weights_checksum(module) -> list[float]:
    flat = torch.cat([whole(p).detach().flatten() for p in module.policy.parameters()]).double()  # (N,)
    return [float(flat.sum()), float(flat.abs().sum()), float((flat * torch.arange(flat.numel())).sum())]


def main(out: str, overrides: list[str]) -> None:
    ensure_signal_credit()
    seen: list[str] = []
    report: dict = {}
    train_step = AgentRLModule.training_step

    def recording_step(self, questions, batch_idx):
        seen.extend(q.id for q in questions)
        return train_step(self, questions, batch_idx)

    def on_train_start(self):
        report["before"] = weights_checksum(self)
        report["sharded"] = all(isinstance(p, DTensor) for p in self.policy.parameters())

    def on_train_end(self):
        report.update(questions=seen, after=weights_checksum(self))
        Path(out, f"rank{self.global_rank}.json").write_text(json.dumps(report))

    AgentRLModule.training_step = recording_step
    AgentRLModule.on_train_start = on_train_start
    AgentRLModule.on_train_end = on_train_end
    trainer = [o for o in overrides if o.startswith("trainer=")] or ["trainer=ddp"]
    run(tiny_config(Path(out), *trainer, *[o for o in overrides if not o.startswith("trainer=")]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
