"""trainer=fsdp (FSDP2, lit/fsdp2.py) on 2 CPU processes (gloo): the same update as one process, parameters
held as DTensor shards, and a training run whose checkpoint loads into a plain (unsharded) policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tiny_runs import ROOT, SIGNAL, cli, ensure_signal_credit, read_metrics, tiny_config

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def flat(weights: list[list[float]]) -> list[float]:
    return [x for p in weights for x in p]


def test_fsdp2_update_on_two_processes_equals_one_process(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             str(ROOT / "tests" / "fsdp_job.py"), str(tmp_path)], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    single = ranks[0]["single"]
    for rank in ranks:
        # Sharded: every parameter a DTensor, each process holding half of the elements.
        assert rank["dtensor"] and rank["local_numel"] * 2 == rank["full_numel"]
        assert rank["loss"] == pytest.approx(single["loss"], rel=1e-5)
        # The norm over all shards, equal on both processes (it sets the clipping factor, 0.1 / norm < 1 here).
        assert rank["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-5) and single["grad_norm"] > 0.1
        assert flat(rank["weights"]) == pytest.approx(flat(single["weights"]), abs=1e-5)
        # After 1 (rank 0) and 2 (rank 1) forwards on gathered weights: no deadlock, the unsharded model's logits.
        assert rank["probe_logits"] == pytest.approx(single["probe_logits"], abs=1e-5)


def test_fsdp_trains_on_two_cpu_processes_and_its_checkpoint_loads_into_a_plain_policy(tmp_path):
    from agentcredit.run.compose import build_components
    from agentcredit.run.evaluate import load_policy_weights
    from agentcredit.checks.validation import prepare_config
    from ddp_job import weights_checksum

    # kl_coef > 0: the frozen reference (replicated on both processes, not sharded) scores every update.
    overrides = ["trainer=fsdp", *SIGNAL, "credit.kl_coef=0.1", "train.micro_batch_size=2", "logger=csv"]
    result = cli("tests/ddp_job.py", str(tmp_path), *overrides, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["sharded"] and ranks[1]["sharded"]
    assert not set(ranks[0]["questions"]) & set(ranks[1]["questions"])
    assert ranks[0]["before"] == ranks[1]["before"] and ranks[0]["after"] != ranks[0]["before"]
    assert ranks[0]["after"] == ranks[1]["after"]  # whole weights gathered from the same shards
    steps = [row for row in read_metrics(tmp_path) if row["train/loss"]]
    assert [int(r["step"]) for r in steps] == [0, 1] and all(float(r["train/kl_ref"]) >= 0 for r in steps)

    ensure_signal_credit()
    # The checkpoint is one whole file, as with one process: evaluate.py's loader reads it into a plain policy.
    cfg = prepare_config(tiny_config(tmp_path / "eval", *[o for o in overrides if o != "trainer=fsdp"]))
    policy = build_components(cfg).policy
    load_policy_weights(policy, str(tmp_path / "checkpoints" / "last.ckpt"))
    assert weights_checksum(type("Module", (), {"policy": policy})()) == pytest.approx(ranks[0]["after"], rel=1e-6)


def test_clip_gradients_on_plain_tensors_scales_to_the_max_norm():
    import torch

    from agentcredit.lit.fsdp2 import clip_gradients

    a, b, frozen = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True), torch.zeros(1)
    a.grad, b.grad = torch.tensor([3.0]), torch.tensor([4.0])
    norm = clip_gradients([a, b, frozen], max_norm=1.0)  # sqrt(3^2 + 4^2) = 5; frozen has no gradient
    assert float(norm) == pytest.approx(5.0)
    assert a.grad.tolist() == pytest.approx([0.6], rel=1e-5) and b.grad.tolist() == pytest.approx([0.8], rel=1e-5)


@pytest.mark.slow
def test_fsdp_resume_equals_the_uninterrupted_run_and_its_checkpoint_resumes_on_one_process(tmp_path):
    """~70 s: 4 steps on 2 processes; 2 + 2 from step2.ckpt on 2 processes; 2 + 2 on one process; and a
    resume into another model refused in one line."""
    import torch

    from tiny_runs import train_tiny

    run = ["trainer=fsdp", *SIGNAL, "train.micro_batch_size=2", "logger=csv", "trainer.max_steps=4",
           "trainer.val_check_interval=2", "checkpoint.every_n_steps=2"]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    for out, extra in ((whole, []), (resumed, [f"ckpt_path={whole / 'checkpoints' / 'step2.ckpt'}"])):
        out.mkdir()
        result = cli("tests/ddp_job.py", str(out), *run, *extra, cwd=out)
        assert result.returncode == 0, result.stderr[-3000:]

    def policy(ckpt):
        state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
        return {k: v for k, v in state.items() if k.startswith("policy.")}

    a, b = policy(whole / "checkpoints" / "last.ckpt"), policy(resumed / "checkpoints" / "last.ckpt")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    at_step2 = policy(whole / "checkpoints" / "step2.ckpt")
    assert any(not torch.equal(a[k], at_step2[k]) for k in a)  # steps 3 and 4 moved the weights
    other = tmp_path / "other"  # another model: one line from the strategy's loader, before any weight is filled
    other.mkdir()
    result = cli("tests/ddp_job.py", str(other), *run, "model.hidden_size=32", f"ckpt_path={whole / 'checkpoints' / 'step2.ckpt'}",
                 cwd=other)
    assert result.returncode != 0
    assert "step2.ckpt cannot be loaded into this run: policy.model.embed_tokens.weight has shape" in result.stderr
    ensure_signal_credit()
    single = tmp_path / "single"
    train_tiny(single, *[o for o in run if o != "trainer=fsdp"], f"ckpt_path={whole / 'checkpoints' / 'step2.ckpt'}")
    steps = [int(r["step"]) for r in read_metrics(single) if r["train/loss"]]
    assert steps == [2, 3]  # another world size reads the whole checkpoint, optimiser state included
