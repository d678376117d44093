"""The step floor (agentcredit.models.step_floor) against hand arithmetic."""

import math

import pytest

from agentcredit.models.flops import DecoderShape
from agentcredit.models.step_floor import attention_flops, kv_read_bytes, read_rates, step_floor

# L=2 layers, H=4 heads, K=2 KV heads, d=8 head_dim (the other sizes do not enter these terms).
SHAPE = DecoderShape(layers=2, hidden=32, intermediate=64, heads=4, kv_heads=2, head_dim=8, vocab=10)


def test_attention_flops_and_cache_bytes_by_hand():
    # 4·L·H·d·C = 4·2·4·8·100 = 25,600
    assert attention_flops(SHAPE, 100) == 25_600
    # 2·L·K·d·bytes per key position: 2·2·2·8·4 = 256 bytes; 1,000 positions: 256,000; bf16 halves it
    assert kv_read_bytes(SHAPE, 1_000) == 256_000
    assert kv_read_bytes(SHAPE, 1_000, dtype_bytes=2) == 128_000


def _figures(contexts: int, kv_keys: int) -> dict:
    return {"step_s": 10.0, "rollout_forward_s": 6.0, "update_forward_s": 1.0, "update_backward_s": 2.0,
            "rollout_forward_gflops": 20.0, "update_forward_gflops": 10.0, "update_backward_gflops": 20.0,
            "rollout_forward_contexts": contexts, "rollout_forward_kv_keys": kv_keys}


def test_a_memory_bound_step_by_hand():
    # attention 4·2·4·8·C = 256·C FLOPs: C = 39,062,500 gives 10 GFLOP; cache reads 256 B per position:
    # 78,125,000 positions give 20 GB.
    out = step_floor(_figures(39_062_500, 78_125_000), SHAPE, matmul_gflop_s=50.0, read_gb_s=10.0)
    assert out["rollout_attention_gflops"] == pytest.approx(10.0)
    assert out["rollout_kv_read_gb"] == pytest.approx(20.0)
    # projections (20 - 10) / 50 = 0.2 s; attention max(10 / 50, 20 / 10) = 2 s (memory bound): 2.2 s
    assert out["floor_rollout_forward_s"] == pytest.approx(2.2)
    # update (10 + 20) / 50 = 0.6 s
    assert out["floor_update_s"] == pytest.approx(0.6)
    # the rest as measured: 10 - (6 + 1 + 2) = 1 s; floor 1 + 2.2 + 0.6 = 3.8 s; ratio 10 / 3.8
    assert out["step_floor_s"] == pytest.approx(3.8)
    assert out["step_floor_ratio"] == pytest.approx(10 / 3.8)


def test_a_compute_bound_attention_by_hand():
    # the same attention FLOPs read from few positions (long prefills): max(10 / 50, 0.256 / 10) = 0.2 s
    out = step_floor(_figures(39_062_500, 1_000_000), SHAPE, matmul_gflop_s=50.0, read_gb_s=10.0)
    assert out["floor_rollout_forward_s"] == pytest.approx(0.2 + 0.2)
    assert out["step_floor_s"] == pytest.approx(1.0 + 0.4 + 0.6)


def test_rates_must_be_positive():
    with pytest.raises(ValueError, match="rates must be positive"):
        step_floor(_figures(1, 1), SHAPE, matmul_gflop_s=0.0, read_gb_s=10.0)


def test_read_rates_are_measured_numbers():
    rates = read_rates(repeats=1)
    assert set(rates) == {"sum_gb_s", "gemv_gb_s"}
    assert all(math.isfinite(v) and v > 0 for v in rates.values())
