"""The step's loss is a token-mean over every process's tokens, not each process's own (lit/update.py)."""

import pytest
import torch
import torch.multiprocessing as mp

from agentcredit.lit.update import UpdateTally, step_denominators


def _tally(tokens, rollouts, loss_tokens=None, loss_rollouts=None, token_mean=True):
    return UpdateTally(total_tokens=tokens, trained_tokens=tokens, trained_rollouts=rollouts, rollouts=rollouts,
                       token_mean=token_mean, loss_tokens=loss_tokens, loss_rollouts=loss_rollouts)


def test_one_process_keeps_its_own_counts():
    assert step_denominators(37, 8, world_size=1) == (37, 8)
    tally = _tally(40, 8)
    assert tally.loss_share(torch.ones(1, 30), 6) == 30 / 40  # as before: the process's own total
    assert _tally(40, 8, token_mean=False).loss_share(torch.ones(1, 30), 6) == 6 / 8


def test_two_processes_weighted_as_one_token_mean_by_hand():
    # Process A holds 30 policy tokens of per-token loss 1.0, process B 10 tokens of loss 3.0. The step's
    # token-mean is (30·1 + 10·3) / 40 = 1.5. Every process's tokens / world = 20, so A's batch is weighted
    # 30/20 = 1.5 and B's 10/20 = 0.5; DDP averages the two: (1.5·1 + 0.5·3) / 2 = 1.5. With each process's own
    # total (weights 1 and 1) DDP would give (1 + 3) / 2 = 2.0, each of B's tokens counting three times A's.
    a, b = _tally(30, 4, loss_tokens=20.0, loss_rollouts=4.0), _tally(10, 4, loss_tokens=20.0, loss_rollouts=4.0)
    share_a, share_b = a.loss_share(torch.ones(1, 30), 4), b.loss_share(torch.ones(1, 10), 4)
    assert (share_a, share_b) == (1.5, 0.5)
    assert (share_a * 1.0 + share_b * 3.0) / 2 == 1.5
    # The logged loss stays each process's own mean: A's batch is all of A's tokens.
    a.add_batch(torch.tensor(1.0), share_a, {}, (0.0, 0.0), torch.ones(1, 30), 4, 30)
    assert a.sums["loss"] == 1.0


def test_the_gradient_equals_the_whole_step_token_mean():
    # One weight w; per-token loss w·x. Whole step: mean of x over all 40 tokens is the gradient.
    x_a, x_b = torch.arange(30, dtype=torch.float64), torch.full((10,), 7.0, dtype=torch.float64)
    whole = torch.cat([x_a, x_b]).mean()
    grads = []
    for x, tally in ((x_a, _tally(30, 4, 20.0, 4.0)), (x_b, _tally(10, 4, 20.0, 4.0))):
        w = torch.zeros((), dtype=torch.float64, requires_grad=True)
        loss = (w * x).mean()  # policy_loss's token-mean over this batch
        (loss * tally.loss_share(torch.ones(1, x.numel()), 4)).backward()
        grads.append(w.grad)
    assert float(sum(grads) / 2) == pytest.approx(float(whole))  # DDP's average of the two processes


def _denominators_on_rank(rank: int, store: str, out) -> None:
    # A file store, not a TCP port: a port found free can be taken by a parallel test before gloo binds it.
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        out[rank] = step_denominators([30, 10][rank], [4, 6][rank], world_size=2)
    finally:
        torch.distributed.destroy_process_group()


def test_two_gloo_processes_agree_on_the_step_totals(tmp_path):
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_denominators_on_rank, args=(str(tmp_path / "store"), out), nprocs=2, join=True)
        assert dict(out) == {0: (20.0, 5.0), 1: (20.0, 5.0)}  # (30 + 10) / 2 tokens, (4 + 6) / 2 rollouts


def test_a_rollout_mean_over_two_batches_leaves_out_a_rollout_without_policy_tokens_by_hand():
    """loss_agg=seq-mean-token-mean: batch 1 holds a rollout of 2 policy tokens (per-token loss 1.0) and one with
    none (its context was full before its first turn), batch 2 one of 3 tokens (loss 4.0). The step's mean over the
    rollouts that hold a policy token is (1.0 + 4.0) / 2 = 2.5. Counting the empty one (3 rollouts) would weigh
    batch 1 by 2/3 while aggregate averages it over its one non-empty row: 2/3 · 1 + 1/3 · 4 = 2.0."""
    from agentcredit.agent.trajectory import Trajectory
    from agentcredit.credit.losses import aggregate
    from agentcredit.lit.update import sequences_with_policy_tokens

    def rollout(mask):
        return Trajectory("q", [1] * len(mask), mask, [0] * len(mask), [0], [None], [0.0] * len(mask))

    batch1, batch2 = [rollout([0, 1, 1]), rollout([0, 0, 0])], [rollout([1, 1, 1])]
    assert sequences_with_policy_tokens(batch1 + batch2) == 2 and sequences_with_policy_tokens(batch1) == 1
    tally = _tally(5, sequences_with_policy_tokens(batch1 + batch2), token_mean=False)
    total = 0.0
    for chunk, per_token_loss in ((batch1, 1.0), (batch2, 4.0)):
        mask = torch.tensor([t.loss_mask for t in chunk], dtype=torch.float32)
        loss = aggregate(torch.full(mask.shape, per_token_loss), mask, "seq-mean-token-mean")
        total += float(loss) * tally.loss_share(mask, sequences_with_policy_tokens(chunk))
    assert total == pytest.approx(2.5)
