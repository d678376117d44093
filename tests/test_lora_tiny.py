"""LoRA on the default tiny model, end to end (issue 20, item 8): the base policy goes into the plain
model, LoRA wraps it, TRACE's reference shares those base weights, and a LoRA checkpoint resumes."""

from __future__ import annotations

import pytest
import torch

from agentcredit.run.compose import build_components
from agentcredit.run.compose import build_module
from agentcredit.checks.validation import prepare_config
from tiny_runs import SIGNAL, SMALL_WARM_START, tiny_config, train_tiny

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LORA = ["model.lora.enabled=true", "credit=trace", "trainer.max_steps=2", *SMALL_WARM_START, "logger=csv"]


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory, small_base_cache):
    out = tmp_path_factory.mktemp("lora")
    train_tiny(out, *LORA)
    return out


def test_lora_policy_holds_the_base_policy_and_the_reference_shares_it(tmp_path, small_base_cache, lora_run):
    cfg = prepare_config(tiny_config(tmp_path, *LORA))
    components = build_components(cfg)
    policy = components.policy
    assert type(policy).__name__ == "PeftModelForCausalLM"
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    (weights,) = (small_base_cache / "base_policy").glob("*/policy.pt")
    base = torch.load(weights, map_location="cpu", weights_only=True)
    inner = policy.get_base_model().state_dict()
    plain = {k.replace(".base_layer", ""): v for k, v in inner.items() if "lora_" not in k}
    assert set(plain) == set(base)
    assert all(torch.equal(plain[k], base[k]) for k in base)  # the warm-started base, not random weights
    module = build_module(cfg, components)
    assert module.reference.shares_policy_weights  # model.reference.share_base_with_lora: true
    own = prepare_config(tiny_config(tmp_path, *LORA, "model.reference.share_base_with_lora=false"))
    reference = build_module(own, build_components(own)).reference
    assert not reference.shares_policy_weights
    ref_state = reference.module.state_dict()
    assert all(torch.equal(ref_state[k], base[k]) for k in base)  # its own copy of the same base weights


def test_lora_run_writes_adapter_checkpoints_and_resumes_from_them(lora_run, tmp_path, small_base_cache, signal_credit):
    last = torch.load(lora_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert last["global_step"] == 2 and any("lora_A" in k for k in last["state_dict"])
    resumed = tmp_path / "resumed"
    train_tiny(resumed, *LORA, "trainer.max_steps=3", f"ckpt_path={lora_run / 'checkpoints' / 'last.ckpt'}")
    after = torch.load(resumed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert after["global_step"] == 3
    assert set(after["state_dict"]) == set(last["state_dict"])


def test_lora_adapters_move_and_resume_exactly(tmp_path, small_base_cache, signal_credit):
    run = [*LORA, *SIGNAL, "credit.name=signal", "trainer.max_steps=2"]
    train_tiny(tmp_path / "a", *run)
    a = torch.load(tmp_path / "a" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    lora_b = {k: v for k, v in a.items() if "lora_B" in k}
    assert any(v.abs().sum() > 0 for v in lora_b.values())  # B starts at 0: the adapters trained
    train_tiny(tmp_path / "b", *run, "trainer.max_steps=3", f"ckpt_path={tmp_path / 'a' / 'checkpoints' / 'last.ckpt'}")
    b = torch.load(tmp_path / "b" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    frozen = [k for k in a if "lora_" not in k and k.startswith("policy.")]
    assert frozen and all(torch.equal(a[k], b[k]) for k in frozen)  # the base stays frozen through the resume
