"""The tiny testbed decoder: a Llama- or Qwen3-architecture causal LM built from a config, no download.

`conf/model/tiny.yaml` sets the sizes (under a million to a few million parameters, tied embeddings),
small enough to train on 2 CPU cores. Llama is the default because SmolLM2 is a Llama,
so the tiny model exercises the same attention, RoPE and cache code as the real model it stands for.
"""

from __future__ import annotations

import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen3Config,
    Qwen3ForCausalLM,
)

_ARCHITECTURES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}


def build_tiny_model(
    tokenizer: PreTrainedTokenizerBase,
    *,
    architecture: str = "llama",
    hidden_size: int = 256,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 4,
    intermediate_size: int = 768,
    max_position_embeddings: int = 8192,
    rope_theta: float = 10000.0,
    tie_embeddings: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str = "sdpa",
) -> PreTrainedModel:
    """A randomly initialised decoder whose vocabulary is exactly `len(tokenizer)`.

    The initialisation depends only on `seed` (the global RNG is left untouched), so two calls
    with the same arguments give identical weights.
    """
    if architecture not in _ARCHITECTURES:
        raise ValueError(f"model.architecture={architecture!r} is not supported; use one of {sorted(_ARCHITECTURES)}")
    if hidden_size % num_heads or num_heads % num_kv_heads:
        raise ValueError(
            f"tiny model: hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads}) "
            f"and num_heads by num_kv_heads ({num_kv_heads})"
        )
    config_cls, model_cls = _ARCHITECTURES[architecture]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_position_embeddings,
        rope_theta=rope_theta,
        tie_word_embeddings=tie_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config._attn_implementation = attn_implementation
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model = model.to(dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model
