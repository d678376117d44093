"""The update's shared-prefix forward: the plan by hand, and log-probabilities and gradients equal to a
forward per rollout, for both testbed architectures."""

import pytest
import torch

from agentcredit.lit.logprobs import token_logprobs
from agentcredit.lit.shared_prefixes import common_length, prefix_plan, shared_token_logprobs
from agentcredit.models.loading import load_policy

TEXTS = ["the quick brown fox jumps over the lazy dog"] * 20


def pairs(tokens, mask):
    return list(zip(tokens, mask))


def test_common_length_counts_leading_equal_items():
    assert common_length([1, 2, 3], [1, 2, 4]) == 2
    assert common_length([1, 2], [1, 2, 3]) == 2
    assert common_length([5], [1]) == 0
    assert common_length([], [1]) == 0


def test_plan_sorts_and_takes_the_rollout_before_as_parent():
    a = pairs([1, 2, 3, 4], [0, 0, 1, 1])
    b = pairs([1, 2, 3, 5, 6], [0, 0, 1, 1, 1])
    c = pairs([1, 2, 7], [0, 0, 1])
    d = pairs([9, 9], [0, 1])
    # Sorted: a (1,2,3,4) < b (1,2,3,5) < c (1,2,7) < d (9,...).
    assert prefix_plan([c, b, d, a]) == [(3, -1, 0), (1, 3, 3), (0, 1, 2), (2, -1, 0)]


def test_plan_needs_the_loss_masks_to_agree():
    # Same tokens, but token 2 is an observation in one and the policy's in the other: shared up to it only.
    a = pairs([1, 2, 3], [0, 0, 1])
    b = pairs([1, 2, 3], [0, 1, 1])
    assert prefix_plan([a, b]) == [(0, -1, 0), (1, 0, 1)]


def test_identical_rollouts_share_everything():
    a = pairs([1, 2, 3], [0, 1, 1])
    assert prefix_plan([a, list(a)]) == [(0, -1, 0), (1, 0, 3)]


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def policy(request):
    spec = {"kind": "tiny", "architecture": request.param, "hidden_size": 32, "num_layers": 2, "num_heads": 4,
            "num_kv_heads": 2, "intermediate_size": 64, "vocab_size": 300, "seed": 0}
    model, _ = load_policy(spec, tokenizer_texts=lambda: TEXTS)
    return model


def _rollouts(vocab: int):
    """Rollouts that share prefixes of several lengths, one identical to another, one a prefix of another,
    and one sharing nothing."""
    g = torch.Generator().manual_seed(0)
    trunk = torch.randint(5, vocab, (12,), generator=g).tolist()
    branch = torch.randint(5, vocab, (6,), generator=g).tolist()
    tokens = [trunk + branch + [7, 8, 9], trunk + branch + [7, 10], trunk + [11] + branch, trunk[:5] + branch,
              trunk + branch + [7, 10], trunk + branch, torch.randint(5, vocab, (9,), generator=g).tolist()]
    masks = [[0] * 4 + [int(i % 3 != 0) for i in range(len(t) - 4)] for t in tokens]
    return tokens, masks


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_and_gradients_equal_one_forward_per_rollout(policy, temperature):
    tokens, masks = _rollouts(policy.config.vocab_size)
    plan = prefix_plan([pairs(t, m) for t, m in zip(tokens, masks)])
    # Every kind of sharing occurs: nothing (the first and the unrelated rollout), the first 5 tokens,
    # the trunk, a whole parent (trunk + branch before its extension), up to a last different token,
    # and all of an identical rollout.
    assert sorted(shared for _, _, shared in plan) == [0, 0, 5, 12, 18, 19, 20]
    weights = [torch.randn(len(t), generator=torch.Generator().manual_seed(i)) for i, t in enumerate(tokens)]

    policy.zero_grad(set_to_none=True)
    alone = []
    for t, m, w in zip(tokens, masks, weights):
        ids, mask = torch.tensor([t]), torch.tensor([m])
        lp = token_logprobs(policy, ids, torch.ones_like(ids), temperature, positions=mask)[0]
        alone.append(lp)
        (lp * w).sum().backward()
    expected = {n: p.grad.clone() for n, p in policy.named_parameters()}

    policy.zero_grad(set_to_none=True)
    shared = shared_token_logprobs(policy, [torch.tensor(t) for t in tokens], [torch.tensor(m) for m in masks],
                                   plan, temperature)
    sum((lp * w).sum() for lp, w in zip(shared, weights)).backward()
    for a, b, m in zip(alone, shared, masks):
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-5)
        assert (b[torch.tensor(m) == 0] == 0).all()
    for name, p in policy.named_parameters():
        scale = expected[name].abs().max()
        assert torch.allclose(p.grad, expected[name], atol=1e-5 * float(scale) + 1e-8), name


def test_models_that_draw_dropout_masks_run_every_rollout_whole():
    # Rollouts run apart draw their own masks on a common prefix; one shared forward would draw one.
    from agentcredit.lit.update import _has_active_dropout

    assert not _has_active_dropout(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.0)))
    assert _has_active_dropout(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.05)))
    model = torch.nn.Linear(2, 2)
    model.config = type("Config", (), {"attention_dropout": 0.1})()
    assert _has_active_dropout(model)


def test_batches_that_share_too_little_run_whole_in_micro_batches(monkeypatch):
    import agentcredit.lit.update as module_mod
    from agentcredit.agent.trajectory import Trajectory
    from agentcredit.lit.module import AgentRLModule, TrainSettings

    def rollout(question, tokens):
        return Trajectory(question_id=question, input_ids=tokens, loss_mask=[0, 0] + [1] * (len(tokens) - 2),
                          turn_ids=[0] * len(tokens), boundaries=[2], snapshots=[None], old_logprobs=[0.0] * len(tokens))

    # Question a: 6 + 6 tokens sharing 4 (1/3 of 12); question b: 5 + 5 sharing 5 (all of one, 1/2 of 10).
    trajectories = [rollout("a", [1, 2, 3, 4, 5, 6]), rollout("b", [7, 8, 9, 9, 9]), rollout("a", [1, 2, 3, 4, 7, 7]),
                    rollout("b", [7, 8, 9, 9, 9])]
    module = AgentRLModule.__new__(AgentRLModule)
    torch.nn.Module.__init__(module)
    module.settings = TrainSettings(micro_batch_size=8, padding_free=True)
    monkeypatch.setattr(AgentRLModule, "_shares_prefixes", property(lambda self: True))
    monkeypatch.setattr(AgentRLModule, "_world_size", property(lambda self: 1))
    monkeypatch.setattr(module_mod, "MIN_SHARED_TOKENS", 0.4)
    batches = module.update_batches(trajectories)
    assert batches[0] == ([1, 3], [(0, -1, 0), (1, 0, 5)])  # question b on its shared prefix (plan: within the batch)
    assert [(sorted(b), plan) for b, plan in batches[1:]] == [([0, 2], None)]  # question a: whole, one length
    monkeypatch.setattr(module_mod, "MIN_SHARED_TOKENS", 1 / 3)
    assert [plan is not None for _, plan in module.update_batches(trajectories)] == [True, True]


def test_a_rollout_that_would_share_less_than_the_fraction_runs_whole():
    a = pairs([1, 2, 3, 4], [0, 0, 1, 1])
    b = pairs([1, 2, 5, 6, 7], [0, 0, 1, 1, 1])  # shares 2 of 5 with a
    c = pairs([1, 2, 5, 6, 8], [0, 0, 1, 1, 1])  # shares 4 of 5 with b
    assert prefix_plan([a, b, c], min_fraction=0.5) == [(0, -1, 0), (1, -1, 0), (2, 1, 4)]
    assert prefix_plan([a, b, c], min_fraction=0.4) == [(0, -1, 0), (1, 0, 2), (2, 1, 4)]
