"""An inference-only forward for Llama- and Qwen3-architecture decoders, used by the rollout sampler.

A rollout makes hundreds of forwards of a few new tokens each. For a small model the Hugging Face
forward's fixed cost (module calls, output capturing, mask and cache plumbing) is most of such a
call: 3 ms of the 3.5 ms a one-token forward of the 0.7M-parameter testbed model takes on 2 CPU
threads. This forward does the same arithmetic with the model's own weights and its own rotary
module, straight through the layers. It runs only for configurations whose arithmetic it
reproduces (`lean_forward_unsupported` says why not otherwise, and the sampler then calls the
model itself); a test checks its logits against the model's for both architectures.

Training never uses it: losses and reference scoring call the model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_ARCHITECTURES = ("LlamaForCausalLM", "Qwen3ForCausalLM")


def lean_forward_unsupported(model) -> str | None:
    """Why `LeanForward` cannot stand in for `model`'s forward, or None when it can."""
    name = type(model).__name__
    if name not in _ARCHITECTURES:
        return f"{name} is not one of {', '.join(_ARCHITECTURES)} (LoRA-wrapped models included)"
    cfg = model.config
    checks = {
        "attention_bias": not getattr(cfg, "attention_bias", False),
        "mlp_bias": not getattr(cfg, "mlp_bias", False),
        "hidden_act silu": getattr(cfg, "hidden_act", "silu") == "silu",
        "pretraining_tp 1": getattr(cfg, "pretraining_tp", 1) == 1,
        "no sliding window": not getattr(cfg, "use_sliding_window", False),
        "full attention layers": all(t == "full_attention" for t in (getattr(cfg, "layer_types", None) or [])),
        "no hooks": not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()),
        # Sharded or wrapped layers (FSDP, DeepSpeed) gather their weights in their own forward,
        # which this one would skip: only plain, unwrapped layers with whole weights qualify.
        "unwrapped decoder layers": all(type(layer).__name__.endswith("DecoderLayer") for layer in model.model.layers),
        "whole, unsharded weights": all(type(p.data) is torch.Tensor and p.numel() > 0 for p in model.parameters()),
        "eval mode or no attention dropout": not model.training or not getattr(cfg, "attention_dropout", 0.0),
    }
    failed = [k for k, ok in checks.items() if not ok]
    return f"{name} config needs {', '.join(failed)}" if failed else None


def _rms_norm(x: torch.Tensor, norm) -> torch.Tensor:
    """The model's RMSNorm: computed in float32, scaled by the weight in the input dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * h.to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LeanForward:
    """forward(ids, position_ids, mask, cache, keep, reads) -> logits, for a supported model (see module doc).

    ids and position_ids are (B, N); mask is the (B, 1, N, W) boolean mask (True = attend) over the
    keys `cache.update` returns, or with `reads` over each row's slot (see _attend); keep is None
    (logits at every position) or the positions whose logits are wanted. Returns (B, N or
    len(keep), V) logits in the model's dtype."""

    def __init__(self, model):
        reason = lean_forward_unsupported(model)
        if reason is not None:
            raise ValueError(f"lean forward unsupported: {reason}")
        self.model = model
        inner = model.model
        self.embed, self.layers, self.norm, self.rotary = inner.embed_tokens, inner.layers, inner.norm, inner.rotary_emb
        cfg = model.config
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.scaling = self.head_dim ** -0.5

    @torch.no_grad()
    def __call__(self, ids: torch.Tensor, position_ids: torch.Tensor, mask: torch.Tensor, cache,
                 keep: torch.Tensor | None = None, reads: list[tuple[int, int, int, int]] | None = None) -> torch.Tensor:
        b, n = ids.shape
        x = self.embed(ids)  # (B, N, C)
        cos, sin = self.rotary(x, position_ids)  # (B, N, D) each
        cos, sin = cos[:, None], sin[:, None]
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = _rms_norm(x, layer.input_layernorm)
            k = F.linear(h, attn.k_proj.weight).view(b, n, self.num_kv_heads, self.head_dim)
            v = F.linear(h, attn.v_proj.weight).view(b, n, self.num_kv_heads, self.head_dim)
            if hasattr(attn, "k_norm"):  # Qwen3 normalises each head's queries and keys before RoPE
                k = _rms_norm(k, attn.k_norm)
            k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, H_kv, N, D)
            k = k * cos + _rotate_half(k) * sin
            keys, values = cache.update(k, v, index) if reads is None else cache.write(k, v, index)
            if index == last and keep is not None:
                # The last layer's outputs feed only the kept logits; every position's keys and
                # values are cached above, so the rest of the layer runs on the kept positions only.
                # For a 2-layer model that is about half of a prefill's arithmetic.
                x, h, mask = x[:, keep], h[:, keep], mask[:, :, keep]
                q_cos, q_sin = cos[:, :, keep], sin[:, :, keep]
            else:
                q_cos, q_sin = cos, sin
            q = F.linear(h, attn.q_proj.weight).view(b, h.shape[1], self.num_heads, self.head_dim)
            if hasattr(attn, "q_norm"):
                q = _rms_norm(q, attn.q_norm)
            q = q.transpose(1, 2)
            out = self._attend(q * q_cos + _rotate_half(q) * q_sin, keys, values, mask, reads)
            x = x + F.linear(out.transpose(1, 2).reshape(b, h.shape[1], -1), attn.o_proj.weight)
            mlp = layer.mlp
            h = _rms_norm(x, layer.post_attention_layernorm)
            x = x + F.linear(F.silu(F.linear(h, mlp.gate_proj.weight)) * F.linear(h, mlp.up_proj.weight),
                             mlp.down_proj.weight)
        if keep is not None and last < 0:  # a model without layers
            x = x[:, keep]
        return F.linear(_rms_norm(x, self.norm), self.model.lm_head.weight)

    def _attend(self, q, keys, values, mask, reads):
        """SDPA of every row over the keys cache.update returned, or, with `reads`, of rows
        [lo, hi) over slots [slot, slot + hi - lo) of the whole buffers cache.write returned, up to
        `width` keys (the mask hides every key past a row's own length, so nothing changes)."""
        gqa = self.num_kv_heads != self.num_heads
        if reads is None:
            return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scaling, enable_gqa=gqa)
        parts = [
            F.scaled_dot_product_attention(q[lo:hi], keys[slot : slot + hi - lo, :, :width],
                                           values[slot : slot + hi - lo, :, :width],
                                           attn_mask=mask[lo:hi, :, :, :width], scale=self.scaling, enable_gqa=gqa)
            for lo, hi, slot, width in reads
        ]
        return parts[0] if len(parts) == 1 else torch.cat(parts)
