"""An inference-only forward for Llama- and Qwen3-architecture decoders, used by the rollout sampler.

A rollout makes hundreds of forwards of a few new tokens each. For a small model the Hugging Face
forward's fixed cost (module calls, output capturing, mask and cache plumbing) is most of such a
call: about 2.5 ms of a one-token forward of the 0.7M-parameter testbed model on 2 CPU threads.
This forward does the same arithmetic with the model's own weights, norms and rotary module,
straight through the layers, on a packed batch: the decoding rows' tokens and the prefilled
rows' tokens together, unpadded, so one forward per sampling step serves both. It runs only for
configurations whose arithmetic it reproduces (`lean_forward_unsupported` says why not
otherwise, and the sampler then calls the model itself); tests check its logits against the
model's for both architectures.

Training never uses it: losses and reference scoring call the model.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """RoPE's half rotation, as transformers' Llama and Qwen3 write it (defined here, not imported, so that
    importing the sampler does not import transformers' model code: a config error prints sooner)."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


@dataclass
class PackedBatch:
    """The new tokens of one forward, flat and unpadded.

    The first len(decode_keys) tokens are one per cache slot 0..S-1 (none when no row decodes):
    the token a decoding row feeds, or a stand-in for a slot with nothing to feed (its output is
    dropped and its keys are not stored). Then come the tokens of each prefill run, one run per
    row being prefilled."""

    ids: torch.Tensor  # (T,)
    positions: torch.Tensor  # (T,) each token's position in its own row
    written: torch.Tensor  # (W,) flat indices of the tokens whose keys and values are stored
    slots: torch.Tensor  # (W,) the cache slot of each
    columns: torch.Tensor  # (W,) the cache column of each
    decode_keys: list[int]  # per slot: the keys its token attends to (1 for a stand-in); [] when no row decodes
    decode_runs: list[tuple[int, int, int]]  # (lo, hi, width): slots lo..hi-1 read up to width keys
    prefill: list[tuple[int, int, int, int]]  # (slot, first flat index, tokens, tokens cached before)


class LeanForward:
    """packed(batch, cache) -> logits of every decode slot, then of each prefill run's last token.

    One forward serves the rows that decode and the rows that come back from their tools: the
    projections and the MLP run once over all new tokens, unpadded; attention reads each run of
    decode slots up to its longest row and each prefilled row up to its own length, straight from
    the cache's buffers. The last layer runs only on the tokens whose logits are returned."""

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
    def packed(self, batch: PackedBatch, cache) -> torch.Tensor:
        """(len(decode_keys) + len(batch.prefill), V) logits in the model's dtype."""
        device = batch.ids.device
        x = self.embed(batch.ids)[None]  # (1, T, C)
        cos, sin = self.rotary(x, batch.positions[None])  # (1, T, D) each
        cos, sin = cos[0][:, None], sin[0][:, None]  # (T, 1, D): broadcast over heads
        s = len(batch.decode_keys)
        keep = torch.tensor(list(range(s)) + [t0 + n - 1 for _, t0, n, _ in batch.prefill], device=device)
        decode_mask = None
        if s:
            width = max(batch.decode_keys)
            decode_mask = (torch.arange(width, device=device)[None, :]
                           < torch.tensor(batch.decode_keys, device=device)[:, None])[:, None, None]  # (S, 1, 1, W)
        # Per prefill run: query j (column start + j) sees columns 0..start + j.
        prefill_masks = [(torch.arange(start + n, device=device)[None, :]
                          <= start + torch.arange(n, device=device)[:, None])[None, None]
                         for _, _, n, start in batch.prefill]
        # Queries of each prefill run (first flat index, count): all its tokens, and in the last
        # layer only its last one (at s + i once the layer is cut to the kept tokens).
        run_queries = [(t0, n) for _, t0, n, _ in batch.prefill]
        last_queries = [(s + i, 1) for i in range(len(batch.prefill))]
        gqa = self.num_kv_heads != self.num_heads
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)[0]  # (T, C)
            k = F.linear(h, attn.k_proj.weight).view(-1, self.num_kv_heads, self.head_dim)
            v = F.linear(h, attn.v_proj.weight).view(-1, self.num_kv_heads, self.head_dim)
            if hasattr(attn, "k_norm"):  # Qwen3 normalises each head's queries and keys before RoPE
                k = attn.k_norm(k)
            k = k * cos + rotate_half(k) * sin
            keys, values = cache.put(k[batch.written], v[batch.written], index, batch.slots, batch.columns)
            runs, q_cos, q_sin = run_queries, cos, sin
            if index == last:
                # The last layer's outputs feed only the returned logits; every token's keys and
                # values are stored above, so the rest of the layer runs on those tokens only.
                # For a 2-layer model that is about half of a prefill's arithmetic.
                x, h, q_cos, q_sin = x[:, keep], h[keep], cos[keep], sin[keep]
                runs = last_queries
            q = F.linear(h, attn.q_proj.weight).view(-1, self.num_heads, self.head_dim)  # (T', H, D)
            if hasattr(attn, "q_norm"):
                q = attn.q_norm(q)
            q = q * q_cos + rotate_half(q) * q_sin
            parts = []
            for lo, hi, width in batch.decode_runs:
                out = F.scaled_dot_product_attention(q[lo:hi, :, None], keys[lo:hi, :, :width], values[lo:hi, :, :width],
                                                     attn_mask=decode_mask[lo:hi, :, :, :width], scale=self.scaling,
                                                     enable_gqa=gqa)
                parts.append(out[:, :, 0])  # (rows, H, D)
            for (slot, _, n, start), (first, m), mask in zip(batch.prefill, runs, prefill_masks):
                out = F.scaled_dot_product_attention(q[first:first + m].transpose(0, 1)[None],
                                                     keys[slot:slot + 1, :, :start + n], values[slot:slot + 1, :, :start + n],
                                                     attn_mask=mask[:, :, n - m:], scale=self.scaling, enable_gqa=gqa)
                parts.append(out[0].transpose(0, 1))  # (m, H, D)
            out = parts[0] if len(parts) == 1 else torch.cat(parts)
            x = x + F.linear(out.reshape(1, out.shape[0], -1), attn.o_proj.weight)
            mlp = layer.mlp
            h = layer.post_attention_layernorm(x)
            x = x + F.linear(F.silu(F.linear(h, mlp.gate_proj.weight)) * F.linear(h, mlp.up_proj.weight),
                             mlp.down_proj.weight)
        if last < 0:  # a model without layers
            x = x[:, keep]
        return F.linear(self.norm(x), self.model.lm_head.weight)[0]
