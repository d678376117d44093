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

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from agentcredit.agent.cached_attention import prefill_attention
from agentcredit.agent.decode_kernel import decode_attention, decode_kernel_available

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
    row being prefilled.

    `extra` asks for more logits from inside prefill runs: a history that is a prefix of a prefilled one
    (a continuation from an earlier state of the same rollout) takes its next-token logits from the token
    that ends it in the longer run, which attends to that run's slot up to its own column."""

    ids: torch.Tensor  # (T,)
    positions: torch.Tensor  # (T,) each token's position in its own row
    written: torch.Tensor  # (W,) flat indices of the tokens whose keys and values are stored
    slots: torch.Tensor  # (W,) the cache slot of each
    columns: torch.Tensor  # (W,) the cache column of each
    decode_keys: list[int]  # per slot: the keys its token attends to (0 or 1 for a stand-in); [] when no row decodes
    decode_runs: list[tuple[int, int, int]]  # (lo, hi, width): slots lo..hi-1 read up to width keys
    prefill: list[tuple[int, int, int, int]]  # (slot, first flat index, tokens, tokens cached before)
    extra: list[tuple[int, int, int]] = field(default_factory=list)  # (slot, flat index, column): logits returned last


class LeanForward:
    """packed(batch, cache) -> logits of every decode slot, then of each prefill run's last token.

    One forward serves the rows that decode and the rows that come back from their tools: the
    projections and the MLP run once over all new tokens, unpadded; attention reads each decoding
    slot's keys up to its own length (the kernel of agent/decode_kernel.py; without it, each run of
    slots up to its longest row through a masked SDPA) and each prefilled row up to its own length,
    straight from the cache's buffers. The last layer runs only on the tokens whose logits are returned."""

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
        # Fewer, larger calls per layer for small models: q, k and v in one projection (k and v in the
        # last layer, whose queries are only the kept tokens), gate and up in another. A fused
        # projection's every output is the same dot product as the separate one's (the sampled tokens
        # and log-probabilities of a recorded rollout came out identical). The fused weights are copies
        # taken here: a LeanForward serves the sampler of one rollout batch, between two updates.
        fuse = sum(_FusedLayer.weight_bytes(layer) for layer in self.layers) <= FUSE_LIMIT_BYTES
        self.fused = [_FusedLayer(layer, self.num_heads, self.num_kv_heads, self.head_dim, fuse) for layer in self.layers]
        self._rope = _RopeTable(self.rotary)
        # Decoding slots attend through the cache-streaming kernel where it runs (float32 on a CPU): each
        # slot's keys read once, up to its own length. Elsewhere, runs of slots through SDPA with a mask.
        weight = self.embed.weight
        self.decode_kernel = (weight.device.type == "cpu" and weight.dtype == torch.float32
                              and decode_kernel_available() is None)

    def column_bytes(self) -> int:
        """Bytes one cache column of one slot takes: keys and values of every layer."""
        return 2 * len(self.layers) * self.num_kv_heads * self.head_dim * self.embed.weight.element_size()

    @torch.no_grad()
    def packed(self, batch: PackedBatch, cache) -> torch.Tensor:
        """(len(decode_keys) + len(batch.prefill) + len(batch.extra), V) logits in the model's dtype."""
        device = batch.ids.device
        x = F.embedding(batch.ids, self.embed.weight)  # (T, C)
        cos, sin = self._rope(x, batch.positions)  # (T, D) each
        cos, sin = cos[:, None], sin[:, None]  # (T, 1, D): broadcast over heads
        s = len(batch.decode_keys)
        keep = torch.tensor(list(range(s)) + [t0 + n - 1 for _, t0, n, _ in batch.prefill]
                            + [flat for _, flat, _ in batch.extra], device=device)
        decode_mask, decode_lengths = None, None
        full_runs = {(lo, hi): all(k == width for k in batch.decode_keys[lo:hi]) for lo, hi, width in batch.decode_runs}
        if s and self.decode_kernel:
            decode_lengths = torch.tensor(batch.decode_keys, dtype=torch.long)
        elif s:
            width = max(batch.decode_keys)
            decode_mask = (torch.arange(width, device=device)[None, :]
                           < torch.tensor(batch.decode_keys, device=device)[:, None])[:, None, None]  # (S, 1, 1, W)
        # Queries of each prefill run (first flat index, count): all its tokens, and in the last
        # layer only its last one (at s + i once the layer is cut to the kept tokens).
        run_queries = [(t0, n) for _, t0, n, _ in batch.prefill]
        last_queries = [(s + i, 1) for i in range(len(batch.prefill))]
        extra_first = s + len(batch.prefill)  # the extra queries' index once the last layer is cut to the kept tokens
        gqa = self.num_kv_heads != self.num_heads
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        last = len(self.layers) - 1
        for index, (layer, fused) in enumerate(zip(self.layers, self.fused)):
            attn = layer.self_attn
            h = fused.input_norm(x)  # (T, C)
            runs, q_cos, q_sin = run_queries, cos, sin
            if index == last:
                # The last layer's outputs feed only the returned logits; every token's keys and
                # values are stored, so the rest of the layer runs on those tokens only.
                # For a 2-layer model that is about half of a prefill's arithmetic.
                kv = fused.kv(h)
                k, v = fused.k_norm(kv[:, :kv_heads]), kv[:, kv_heads:]
                k = k * cos + rotate_half(k) * sin
                x, h, q_cos, q_sin = x[keep], h[keep], cos[keep], sin[keep]
                runs = last_queries
                q = fused.q_norm(F.linear(h, attn.q_proj.weight).view(-1, heads, dim))  # (T', H, D)
                q = q * q_cos + rotate_half(q) * q_sin
            else:
                q, k, v = fused.queries_keys_values(h, cos, sin)
            keys, values = cache.put(k[batch.written], v[batch.written], index, batch.slots, batch.columns)
            parts = []
            if decode_lengths is not None:
                parts.append(decode_attention(q[:s].contiguous(), keys[:s], values[:s], decode_lengths, self.scaling))
            for lo, hi, width in batch.decode_runs if decode_lengths is None else ():
                # A run whose slots all read `width` keys needs no mask (always so for a run of one slot).
                mask = None if full_runs[(lo, hi)] else decode_mask[lo:hi, :, :, :width]
                out = F.scaled_dot_product_attention(q[lo:hi, :, None], keys[lo:hi, :, :width], values[lo:hi, :, :width],
                                                     attn_mask=mask, scale=self.scaling, enable_gqa=gqa)
                parts.append(out[:, :, 0])  # (rows, H, D)
            for (slot, _, n, start), (first, m) in zip(batch.prefill, runs):
                out = prefill_attention(q[first:first + m].transpose(0, 1)[None], keys[slot:slot + 1, :, :start + n],
                                        values[slot:slot + 1, :, :start + n], start, n, self.scaling, gqa)
                parts.append(out[0].transpose(0, 1))  # (m, H, D)
            for i, (slot, _, column) in enumerate(batch.extra if index == last else ()):
                # the token at `column` of a prefill run, alone: it sees that slot's columns 0..column
                qi = extra_first + i
                out = prefill_attention(q[qi:qi + 1].transpose(0, 1)[None], keys[slot:slot + 1, :, :column + 1],
                                        values[slot:slot + 1, :, :column + 1], column, 1, self.scaling, gqa)
                parts.append(out[0].transpose(0, 1))  # (1, H, D)
            out = parts[0] if len(parts) == 1 else torch.cat(parts)
            x = fused.residual_mlp(x, out.reshape(out.shape[0], -1))
        if last < 0:  # a model without layers
            x = x[keep]
        return F.linear(_norm(self.norm)(x), self.model.lm_head.weight)


def _norm(module):
    """The RMSNorm `module` as a plain function: its own arithmetic, op for op, without the module
    call (a decode step calls seven norms); any other norm class is called as it is."""
    if type(module).__name__ not in ("LlamaRMSNorm", "Qwen3RMSNorm"):
        return module
    weight, eps = module.weight, module.variance_epsilon

    def norm(x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)

    return norm


FUSE_LIMIT_BYTES = 64 * 2**20
"""Fused projection weights are copies; above this size in all (SmolLM2-135M's would be ~300 MB) the
layers keep their separate projections, whose call overhead is small beside their arithmetic anyway."""


class _FusedLayer:
    """One decoder layer's projections as (T, heads, D) blocks and its norms as functions.

    With `fuse`, q, k and v run as one projection and gate and up as another, from concatenated copies
    of the weights; every output is the same dot product as the separate projection's."""

    def __init__(self, layer, heads: int, kv_heads: int, dim: int, fuse: bool):
        attn, mlp = layer.self_attn, layer.mlp
        self.heads, self.kv_heads, self.dim = heads, kv_heads, dim
        self.separate_qkv = (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)
        self.separate_gate_up = (mlp.gate_proj.weight, mlp.up_proj.weight)
        self.o_weight, self.down_weight = attn.o_proj.weight, mlp.down_proj.weight
        self.qkv_weight = torch.cat(self.separate_qkv).detach() if fuse else None
        self.gate_up_weight = torch.cat(self.separate_gate_up).detach() if fuse else None
        self.input_norm = _norm(layer.input_layernorm)
        self.post_norm = _norm(layer.post_attention_layernorm)
        self.per_head_norms = hasattr(attn, "q_norm")
        identity = lambda t: t  # noqa: E731
        self.q_norm = _norm(attn.q_norm) if self.per_head_norms else identity
        self.k_norm = _norm(attn.k_norm) if self.per_head_norms else identity

    @staticmethod
    def weight_bytes(layer) -> int:
        attn, mlp = layer.self_attn, layer.mlp
        weights = (attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj)
        return sum(m.weight.numel() * m.weight.element_size() for m in weights)

    def qkv(self, h: torch.Tensor) -> torch.Tensor:
        """(T, heads + 2 kv_heads, D): queries, keys, values."""
        out = (F.linear(h, self.qkv_weight) if self.qkv_weight is not None
               else torch.cat([F.linear(h, w) for w in self.separate_qkv], dim=-1))
        return out.view(-1, self.heads + 2 * self.kv_heads, self.dim)

    def queries_keys_values(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """The normed hidden states `h` (T, C) -> queries (T, heads, D) and keys (T, kv_heads, D), rotated
        by RoPE's `cos`/`sin` (T, 1, D), and values (T, kv_heads, D)."""
        qkv = self.qkv(h)
        heads, kv_heads = self.heads, self.kv_heads
        v = qkv[:, heads + kv_heads:]
        if self.per_head_norms:  # Qwen3 normalises each head's queries and keys before RoPE
            qk = torch.cat([self.q_norm(qkv[:, :heads]), self.k_norm(qkv[:, heads:heads + kv_heads])], dim=1)
        else:
            qk = qkv[:, :heads + kv_heads]
        qk = qk * cos + rotate_half(qk) * sin  # queries and keys rotated in one go
        return qk[:, :heads], qk[:, heads:], v

    def residual_mlp(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The rest of the layer after attention: `x` (T, C) plus the output projection of `attended`
        (T, heads·D), then that sum plus the MLP of its norm."""
        x = x + F.linear(attended, self.o_weight)
        gate, up = self.gate_up(self.post_norm(x))
        return x + F.linear(F.silu(gate) * up, self.down_weight)

    def kv(self, h: torch.Tensor) -> torch.Tensor:
        """(T, 2 kv_heads, D): keys, values (the fused weight's last rows: a view, not a copy)."""
        out = (F.linear(h, self.qkv_weight[self.heads * self.dim:]) if self.qkv_weight is not None
               else torch.cat([F.linear(h, w) for w in self.separate_qkv[1:]], dim=-1))
        return out.view(-1, 2 * self.kv_heads, self.dim)

    def gate_up(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.gate_up_weight is None:
            return F.linear(h, self.separate_gate_up[0]), F.linear(h, self.separate_gate_up[1])
        out = F.linear(h, self.gate_up_weight)
        half = out.shape[-1] // 2
        return out[..., :half], out[..., half:]


class _RopeTable:
    """The rotary module's cos/sin for positions 0..n-1, computed once and indexed per step.

    The module computes each position's angles and their cos/sin element by element, so a row of
    the table equals what a call for that position alone returns. Rope types that rescale with the
    sequence length (anything but "default") are called per step as before."""

    def __init__(self, rotary):
        self.rotary = rotary
        self.static = getattr(rotary, "rope_type", "default") == "default"
        self.cos: torch.Tensor | None = None
        self.sin: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.static:
            cos, sin = self.rotary(x[None], positions[None])
            return cos[0], sin[0]
        needed = int(positions.max()) + 1
        if self.cos is None or self.cos.shape[0] < needed:
            size = max(needed, 512, 0 if self.cos is None else 2 * self.cos.shape[0])
            cos, sin = self.rotary(x[None], torch.arange(size, device=positions.device)[None])
            self.cos, self.sin = cos[0], sin[0]
        return self.cos[positions], self.sin[positions]
