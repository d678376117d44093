"""benchmarks/bench_decode_attention.py: its three attentions agree, its read figures follow from its lengths."""

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_decode_attention", ROOT / "benchmarks" / "bench_decode_attention.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_three_decode_attentions_agree_on_ragged_lengths():
    torch.manual_seed(0)
    keys, values = torch.randn(5, 2, 40, 8), torch.randn(5, 2, 40, 8)
    q = torch.randn(5, 2, 8)
    lengths = [40, 3, 17, 1, 40]
    expected = torch.stack([torch.stack([torch.softmax(keys[i, h, :n] @ q[i, h] * 8 ** -0.5, 0) @ values[i, h, :n]
                                         for h in range(2)]) for i, n in enumerate(lengths)])
    for fn in (bench.sampler_attention, bench.per_slot_attention, bench.bmm_attention):
        assert torch.allclose(fn(q, keys, values, lengths, 8 ** -0.5), expected, atol=1e-5)


def test_measure_reports_bytes_read_and_rates():
    out = bench.measure(slots=3, kv_heads=2, head_dim=4, min_keys=5, max_keys=9, repeats=1, seed=1, rates=False)
    lengths = torch.randint(5, 10, (3,), generator=_seeded_after_tensors(3, 2, 9, 4, seed=1)).tolist()
    assert out["read_bytes"] == 2 * sum(lengths) * 2 * 4 * 4  # keys and values, 2 heads of 4 float32 each
    assert out["max_abs_diff"] < 1e-5
    assert out["sampler_gb_s"] == pytest.approx(out["read_bytes"] / (out["sampler_ms"] / 1e3) / 1e9, rel=0.01)


def _seeded_after_tensors(slots, kv_heads, capacity, dim, seed):
    """The generator as measure() leaves it after drawing its keys, values and queries."""
    generator = torch.Generator().manual_seed(seed)
    torch.randn(slots, kv_heads, capacity, dim, generator=generator)
    torch.randn(slots, kv_heads, capacity, dim, generator=generator)
    torch.randn(slots, kv_heads, dim, generator=generator)
    return generator


def test_measure_refuses_an_empty_range():
    with pytest.raises(ValueError, match="min-keys"):
        bench.measure(slots=1, kv_heads=1, head_dim=4, min_keys=9, max_keys=5, repeats=1, seed=0)
