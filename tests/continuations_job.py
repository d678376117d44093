"""Worker script for tests/test_vllm_distributed.py's continuation test (Lightning re-runs it once per rank):

    python tests/continuations_job.py <out_dir> <overrides...>

Trains the shipped base policy (it makes tool calls, so rollouts have boundaries to continue from) with
trainer=ddp and rollout.engine=vllm, every group counted eligible, and records on each rank where
ProVer's or SPO-chain's continuations were sampled: by which engine (the process and rank that built
it) and through which sampler (the engine's, or the policy's own HF sampler). Each rank writes rank<r>.json.
"""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

import agentcredit.agent.chain_values as chain_values
import agentcredit.judge.verification as verification
from agentcredit.agent.engines.vllm_engine import VLLMEngine
from agentcredit.agent.rollout import RolloutWorker
from agentcredit.agent.sampling import TurnSampler
from agentcredit.agent.trajectory import pad_batch
from agentcredit.common.configs import compose_config
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.lit.module import AgentRLModule
from agentcredit.run.train import run

# The shipped base policy's own settings with only the RL sizes shrunk, so its key still matches.
SHIPPED_SHRINK = ["trainer.max_steps=1", "trainer.val_check_interval=1", "trainer.limit_val_batches=1", "data.n_val=2",
                  "data.n_test=2", "data.prompts_per_step=2", "rollout.group_size=2", "logger=csv",
                  "trainer.enable_progress_bar=false"]


def sampled_logprob_gap(policy, continuations, temperature: float) -> tuple[int, float]:
    """(tokens, largest |trainer - sampler| log-probability) over the tokens the continuations sampled (their
    copied prefix left out): an engine holding other weights than this rank's policy shows a gap."""
    batch = pad_batch(continuations, pad_id=0)
    with torch.no_grad():
        trainer = token_logprobs(policy, batch["input_ids"], batch["attention_mask"], temperature)
    mask = batch["loss_mask"] > 0
    for row, c in enumerate(continuations):
        mask[row, : c.boundaries[c.continued_from]] = False
    tokens = int(mask.sum())
    return tokens, float((trainer - batch["old_logprobs"])[mask].abs().max()) if tokens else 0.0


def main(out: str, overrides: list[str]) -> None:
    report = {"continuation_calls": 0, "engine_samplers": 0, "hf_samplers": 0, "continuation_engines": [],
              "engines_built": [], "sampled_tokens": 0, "logprob_gap": 0.0}
    inside = []  # non-empty while a continuation batch samples

    for module in (chain_values, verification):  # the untrained-for-RL policy's groups are rarely mixed
        module.is_eligible = lambda *args, **kwargs: True

    build, continue_from_many = VLLMEngine.__init__, RolloutWorker.continue_from_many
    engine_sampler, hf_sampler = VLLMEngine.turn_sampler, TurnSampler.__init__

    def recording_build(self, *args, **kwargs):
        build(self, *args, **kwargs)
        self.built_by = {"pid": os.getpid(), "rank": dist.get_rank()}
        report["engines_built"].append(self.built_by)

    def recording_continuations(self, *args, **kwargs):
        report["continuation_calls"] += 1
        report["continuation_engines"].append(getattr(self.engine, "built_by", None))
        inside.append(True)
        try:
            batches = continue_from_many(self, *args, **kwargs)
        finally:
            inside.pop()
        tokens, gap = sampled_logprob_gap(self.model, [c for batch in batches for c in batch], self.cfg.temperature)
        report["sampled_tokens"] += tokens
        report["logprob_gap"] = max(report["logprob_gap"], gap)
        return batches

    def recording_engine_sampler(self, **kwargs):
        report["engine_samplers"] += bool(inside)
        return engine_sampler(self, **kwargs)

    def recording_hf_sampler(self, *args, **kwargs):
        report["hf_samplers"] += bool(inside)
        hf_sampler(self, *args, **kwargs)

    def on_train_end(self):
        report.update(pid=os.getpid(), rank=self.global_rank, module_engine=getattr(self._engine, "built_by", None))
        Path(out, f"rank{self.global_rank}.json").write_text(json.dumps(report))

    VLLMEngine.__init__ = recording_build
    RolloutWorker.continue_from_many = recording_continuations
    VLLMEngine.turn_sampler = recording_engine_sampler
    TurnSampler.__init__ = recording_hf_sampler
    AgentRLModule.on_train_end = on_train_end
    run(compose_config(["trainer=ddp", "rollout.engine=vllm", *SHIPPED_SHRINK, *overrides, f"+output_dir={out}"]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
