"""Rollouts whose advantages are all 0 are left out of the update, and the update stays the same."""

from __future__ import annotations

import copy

import pytest
import torch

from agentcredit.credit.losses import policy_loss, rollouts_with_gradient


def test_rollouts_with_gradient_are_those_with_a_nonzero_advantage_unless_the_kl_term_is_on():
    advantages = [torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.5]), torch.tensor([-0.0, 0.0]),
                  torch.tensor([float("nan"), 0.0]), torch.tensor([-1e-9])]
    assert rollouts_with_gradient(advantages) == [1, 3, 4]  # a NaN is kept, so the non-finite check still sees it
    assert rollouts_with_gradient(advantages, kl_coef=0.1) == [0, 1, 2, 3, 4]
    assert rollouts_with_gradient([]) == []


@pytest.mark.parametrize("settings", [{}, {"ratio_level": "sequence", "clip_low": 3e-4, "clip_high": 4e-4},
                                      {"tis_cap": 2.0}, {"loss_agg": "seq-mean-token-mean"}])
def test_a_rollout_of_zero_advantages_adds_exactly_zero_to_the_gradient(settings):
    torch.manual_seed(0)
    weight = torch.randn(5, requires_grad=True)
    features = torch.randn(1, 6, 5)
    logprobs = torch.nn.functional.logsigmoid(features @ weight)  # (1, 6): depends on the weight
    old = logprobs.detach() + 0.3 * torch.randn(1, 6)  # ratios away from 1, some clipped
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0, 0.0, 1.0]])
    loss, _ = policy_loss(logprobs, old, torch.zeros(1, 6), mask, behaviour_logprobs=old - 0.1, **settings)
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert torch.equal(weight.grad, torch.zeros(5))


@pytest.fixture(scope="module")
def module_and_batch(tmp_path_factory):
    from agentcredit.run.compose import build_components, build_module
    from tests.tiny_runs import tiny_config

    cfg = tiny_config(tmp_path_factory.mktemp("skip"), "rollout.group_size=3")
    components = build_components(cfg, progress=False)
    module = build_module(cfg, components)
    questions = components.datamodule.splits["train"][:2]
    groups = module._worker(1.0, stream=0).rollout(questions, 3)
    trajectories = [t for group in groups for t in group]
    # Rollouts 1, 3 and 4 get no credit (a group whose rewards are all equal), the others a mixed one.
    signs = [1.0, 0.0, -0.5, 0.0, 0.0, 2.0]
    advantages = [torch.tensor(t.loss_mask, dtype=torch.float32) * s for t, s in zip(trajectories, signs)]
    return module, trajectories, advantages


def _update(module, trajectories, advantages, monkeypatch, *, skip: bool, padding_free, share: bool = False):
    from agentcredit.lit.module import AgentRLModule

    import agentcredit.lit.update as module_mod

    module = copy.deepcopy(module)
    module.settings.padding_free = padding_free
    module.settings.share_prefixes = share
    monkeypatch.setattr(module_mod, "MIN_SHARED_TOKENS", 0.0)  # these untrained rollouts share little: share anyway
    optimizer = module.configure_optimizers()
    monkeypatch.setattr(AgentRLModule, "_sharded", property(lambda self: False))
    monkeypatch.setattr(module, "optimizers", lambda *a, **k: optimizer, raising=False)
    monkeypatch.setattr(module, "manual_backward", lambda loss: loss.backward(), raising=False)
    ran: list[int] = []
    batcher = "prefix_families" if share else "micro_batches"
    batches = getattr(module, batcher)
    monkeypatch.setattr(module, batcher, lambda trajs: ran.append(len(trajs)) or batches(trajs), raising=False)
    if not skip:
        monkeypatch.setattr(module, "_rollouts_to_train", lambda adv: list(range(len(adv))), raising=False)
    grads: list[torch.Tensor] = []
    step = optimizer.step
    monkeypatch.setattr(optimizer, "step", lambda: grads.extend(p.grad.clone() for p in module.policy.parameters()) or step())
    module.policy.train()
    stats = module._optimise(trajectories, advantages)
    return stats, grads, [p.detach().clone() for p in module.policy.parameters()], ran


@pytest.mark.parametrize("padding_free,share", [(True, False), (False, False), ("auto", True)])
def test_skipping_zero_advantage_rollouts_leaves_the_update_as_it_was(module_and_batch, monkeypatch, padding_free, share):
    module, trajectories, advantages = module_and_batch
    before = [p.detach().clone() for p in module.policy.parameters()]
    full, full_grads, full_weights, full_ran = _update(module, trajectories, advantages, monkeypatch, skip=False,
                                                       padding_free=padding_free, share=share)
    skipped, skipped_grads, skipped_weights, skipped_ran = _update(module, trajectories, advantages, monkeypatch, skip=True,
                                                                   padding_free=padding_free, share=share)
    assert full_ran == [6] and skipped_ran == [3]  # the update ran on rollouts 0, 2 and 5 only
    policy_tokens = [sum(t.loss_mask) for t in trajectories]
    assert skipped["update/skipped_token_share"] == pytest.approx(sum(policy_tokens[i] for i in (1, 3, 4)) / sum(policy_tokens))
    assert full["update/skipped_token_share"] == 0.0
    # The forwards' tokens: every trained token without sharing; with it, each question's rollouts less
    # what each shares with the one before it in sorted order.
    from agentcredit.lit.shared_prefixes import prefix_plan

    lengths = [len(t.input_ids) for t in trajectories]
    run = sum(lengths)
    if share:
        run = 0
        for question in {t.question_id for t in trajectories}:
            family = [t for t in trajectories if t.question_id == question]
            run += sum(len(family[i].input_ids) - n
                       for i, _, n in prefix_plan([list(zip(t.input_ids, t.loss_mask)) for t in family]))
        assert run < sum(lengths)
    assert full["update/forward_token_share"] == pytest.approx(run / sum(lengths))
    assert skipped["loss"] == pytest.approx(full["loss"], rel=1e-5)
    assert skipped["grad_norm"] == pytest.approx(full["grad_norm"], rel=1e-5)
    moved = max(float((a - b).abs().max()) for a, b in zip(full_weights, before))
    assert moved > 1e-4  # the update did something
    # Skipped rows add exact zeros; what may change is the order of the sums (micro-batches of other
    # rows), which AdamW's first step (about lr * sign(g)) would magnify where a gradient is ~0: so
    # the gradients are compared.
    scale = max(float(g.abs().max()) for g in full_grads)
    for a, b in zip(full_grads, skipped_grads):
        assert torch.allclose(a, b, atol=1e-6 * scale, rtol=0)


def test_a_batch_without_credit_still_takes_the_optimisers_step(module_and_batch, monkeypatch):
    """All advantages 0: nothing runs, yet AdamW decays the weights as it would after zero gradients."""
    module, trajectories, advantages = module_and_batch
    zeros = [torch.zeros_like(a) for a in advantages]
    full, _, full_weights, _ = _update(module, trajectories, zeros, monkeypatch, skip=False, padding_free=True)
    skipped, _, skipped_weights, ran = _update(module, trajectories, zeros, monkeypatch, skip=True, padding_free=True)
    assert ran == [0] and skipped["update/skipped_token_share"] == 1.0
    assert skipped["loss"] == full["loss"] == 0.0 and skipped["grad_norm"] == full["grad_norm"] == 0.0
    before = [p.detach() for p in module.policy.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(skipped_weights, before))  # weight decay acted
    for a, b in zip(full_weights, skipped_weights):
        assert torch.equal(a, b)
