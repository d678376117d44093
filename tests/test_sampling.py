"""Inverse-CDF sampling (agent/sampling.py) against hand-computed draws."""

import pytest
import torch

from agentcredit.agent import sampling
from agentcredit.agent.sampling import sample_categorical, sample_top_p


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
