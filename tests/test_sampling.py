"""Inverse-CDF sampling (agent/sampling.py) against hand-computed draws."""

import pytest
import torch

from agentcredit.agent import sampling
from agentcredit.agent.next_token import sample_categorical, sample_top_p


def _with_uniforms(monkeypatch, values):
    """Make the sampler's torch.rand return `values` (one per row) instead of random numbers."""
    def fake_rand(n, _one, **kwargs):
        assert n == len(values)
        return torch.tensor(values, dtype=kwargs.get("dtype", torch.float32))[:, None]
    monkeypatch.setattr(sampling.torch, "rand", fake_rand)


def test_draws_invert_the_cumulative_distribution(monkeypatch):
    # probs 0.2, 0, 0.5, 0.3 -> cumulative 0.2, 0.2, 0.7, 1.0; a draw is the first index whose
    # cumulative value exceeds u. Token 1 has no mass and is never chosen, even at u = 0.2.
    uniforms = [0.0, 0.19, 0.2, 0.69, 0.7, 0.99]
    _with_uniforms(monkeypatch, uniforms)
    probs = torch.tensor([[0.2, 0.0, 0.5, 0.3]]).repeat(len(uniforms), 1)
    assert sample_categorical(probs, None).tolist() == [0, 0, 2, 2, 3, 3]


def test_unnormalised_rows_are_scaled_by_their_own_total(monkeypatch):
    # Row 0: 2, 0, 6, 2 (total 10), u = 0.65 * 10 = 6.5 -> cumulative 2, 2, 8, 10 -> index 2.
    # Row 1: 1, 1, 0, 0 (total 2), u = 0.5 * 2 = 1.0 -> cumulative 1, 2, 2, 2 -> index 1.
    _with_uniforms(monkeypatch, [0.65, 0.5])
    probs = torch.tensor([[2.0, 0.0, 6.0, 2.0], [1.0, 1.0, 0.0, 0.0]])
    assert sample_categorical(probs, None).tolist() == [2, 1]


def test_a_draw_at_the_total_picks_the_last_token_with_mass_not_a_zero_one(monkeypatch):
    # rand * total can round up to the total; the trailing zero-mass tokens (as top-p leaves them)
    # must still be out of reach: the draw is the last token with mass, index 1.
    _with_uniforms(monkeypatch, [1.0])
    assert sample_categorical(torch.tensor([[0.5, 0.5, 0.0, 0.0]]), None).tolist() == [1]


def test_frequencies_follow_the_probabilities():
    generator = torch.Generator().manual_seed(0)
    probs = torch.tensor([[0.1, 0.6, 0.3]]).repeat(20000, 1)
    counts = torch.bincount(sample_categorical(probs, generator), minlength=3).float() / 20000
    assert counts.tolist() == pytest.approx([0.1, 0.6, 0.3], abs=0.015)


def test_top_p_keeps_the_smallest_prefix_reaching_p(monkeypatch):
    # top_p 0.7 keeps the two largest probabilities, 0.5 and 0.3 (their sum 0.8 reaches 0.7).
    # Row 0 holds 0.2, 0.5, 0.3: sorted 0.5 (token 1), 0.3 (token 2), 0.2 (dropped); u = 0.99 * 0.8
    # = 0.792 -> the second sorted token, token 2. Row 1: u = 0 -> the first sorted token, token 1.
    _with_uniforms(monkeypatch, [0.99, 0.0])
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3], [0.2, 0.5, 0.3]]))
    assert sample_top_p(logits, 0.7, None).tolist() == [2, 1]


# ----------------------------------------------------------------------------- prefill groups
from itertools import combinations  # noqa: E402

from agentcredit.agent.forward_plan import prefill_groups  # noqa: E402

NO_KEY_COST = 1e12  # key_scale so large that attention width adds nothing to a group's cost


def test_a_short_row_is_not_padded_to_a_long_page():
    # Together: 96 + 2 * 400 = 896 padded-token units; apart: (96 + 10) + (96 + 400) = 602.
    assert prefill_groups([10, 400], [0, 0], call_tokens=96, key_scale=NO_KEY_COST) == [[1], [0]]


def test_rows_of_similar_length_share_one_forward():
    # Together: 96 + 2 * 110 = 316; apart: (96 + 100) + (96 + 110) = 402.
    assert prefill_groups([100, 110], [0, 0], call_tokens=96, key_scale=NO_KEY_COST) == [[0, 1]]


def test_a_long_cache_is_kept_apart_when_its_keys_cost_more_than_a_call():
    # Equal lengths 50, caches of 0 and 2000 keys, key_scale 1000:
    # together: 96 + 2 * 50 * (1 + 2050 / 1000) = 401;
    # apart: 96 + 50 * (1 + 50 / 1000) = 148.5 and 96 + 50 * (1 + 2050 / 1000) = 248.5, 397 in all.
    assert prefill_groups([50, 50], [2000, 0], call_tokens=96, key_scale=1000) == [[0], [1]]
    # A dearer call tips it back: call_tokens 110 gives 415 together against 417 apart.
    assert prefill_groups([50, 50], [2000, 0], call_tokens=110, key_scale=1000) == [[1, 0]]


def test_no_rows_no_forwards():
    assert prefill_groups([], []) == []


def _modelled_cost(groups, lengths, starts, call_tokens, key_scale):
    total = 0.0
    for g in groups:
        longest = max(lengths[i] for i in g)
        total += call_tokens + len(g) * longest * (1 + (max(starts[i] for i in g) + longest) / key_scale)
    return total


def test_groups_cover_every_row_once_and_are_the_cheapest_cut_of_the_sorted_rows():
    gen = torch.Generator().manual_seed(3)
    for _ in range(40):
        n = int(torch.randint(1, 7, (1,), generator=gen))
        lengths = torch.randint(1, 500, (n,), generator=gen).tolist()
        starts = torch.randint(0, 3000, (n,), generator=gen).tolist()
        groups = prefill_groups(lengths, starts, call_tokens=96, key_scale=2000)
        assert sorted(i for g in groups for i in g) == list(range(n))
        # Brute force over every way to cut the rows, sorted by (length, start), into consecutive runs.
        order = sorted(range(n), key=lambda i: (lengths[i], starts[i]))
        best = min(
            _modelled_cost([order[a:b] for a, b in zip((0, *cuts), (*cuts, n))], lengths, starts, 96, 2000)
            for k in range(n) for cuts in combinations(range(1, n), k)
        )
        assert _modelled_cost(groups, lengths, starts, 96, 2000) == pytest.approx(best)


def test_runs_are_capped_in_length():
    from agentcredit.agent.forward_plan import cheapest_runs

    # Five equal items at a high call cost would form one run; capped at 2 they form 2 + 2 + 1
    # (any cut into runs of at most 2 costs 3 calls + 5 rows; the scan keeps the first it finds).
    runs = cheapest_runs([1] * 5, 100.0, [0.0] * 5, [1.0] * 5, max_run=2)
    assert [j - i for i, j in runs] in ([1, 2, 2], [2, 1, 2], [2, 2, 1])
    assert cheapest_runs([1] * 5, 100.0, [0.0] * 5, [1.0] * 5) == [(0, 5)]


def test_nan_or_inf_logits_stop_sampling_in_one_line_instead_of_an_index_past_the_vocabulary(capsys):
    from agentcredit.agent.next_token import NonFiniteLogits
    from agentcredit.run.train import exit_on_one_line_error

    logits = torch.tensor([[0.0, 1.0, 2.0], [float("nan"), 0.0, 0.0], [float("inf"), 0.0, 0.0]])
    with pytest.raises(NonFiniteLogits, match=r"^the policy's next-token probabilities are NaN or inf in 2 of 3 rows: ") as err:
        sample_top_p(logits, 0.9, torch.Generator().manual_seed(0))
    with pytest.raises(SystemExit) as stop:  # the command's one line: kind, message, status 1
        exit_on_one_line_error(err.value)
    assert stop.value.code == 1
    line = capsys.readouterr().err
    assert line.startswith("sampling stopped: the policy's next-token") and line.count("\n") == 1
    assert sample_categorical(torch.softmax(logits[:1], -1), torch.Generator().manual_seed(0)).tolist() in ([0], [1], [2])
