"""The rollout's lean forward (agent/lean_forward.py) against the model's own forward."""

import pytest
import torch

from agentcredit.agent.lean_forward import LeanForward, PackedBatch, lean_forward_unsupported
from agentcredit.agent.forward_plan import decode_chunks
from agentcredit.agent.sampling import TurnSampler
from agentcredit.agent.slot_cache import SlotCache
from agentcredit.models.tiny import build_tiny_model
from agentcredit.models.tokenizer import build_tiny_tokenizer

TEXTS = ["Lena Marsh is a painter born in Korvel.", "Korvel is a port town whose mayor is Ada Fenn."] * 30


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer(TEXTS, vocab_size=300)


def _model(tokenizer, architecture, **kw):
    # 4 query heads over 2 key/value heads: the grouped-query path is exercised too.
    return build_tiny_model(tokenizer, architecture=architecture, hidden_size=64, num_layers=3, num_heads=4,
                            num_kv_heads=2, intermediate_size=128, seed=1, **kw).eval()


def _batch(decoding: dict[int, tuple[int, int]], prefill: list[tuple[int, list[int], int]], num_slots: int,
           runs=None) -> PackedBatch:
    """decoding: slot -> (token, cached tokens); prefill: (slot, tokens, cached tokens)."""
    ids, positions, written, slots, columns, keys = [], [], [], [], [], []
    if decoding:
        for slot in range(num_slots):
            token, cached = decoding.get(slot, (0, None))
            ids.append(token)
            positions.append(cached or 0)
            keys.append(1 if cached is None else cached + 1)
            if cached is not None:
                written.append(slot), slots.append(slot), columns.append(cached)
    runs_out = []
    for slot, tokens, cached in prefill:
        first = len(ids)
        ids += tokens
        positions += range(cached, cached + len(tokens))
        written += range(first, first + len(tokens))
        slots += [slot] * len(tokens)
        columns += range(cached, cached + len(tokens))
        runs_out.append((slot, first, len(tokens), cached))
    t = lambda v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    decode_runs = runs if runs is not None else ([(0, num_slots, max(keys))] if keys else [])
    return PackedBatch(t(ids), t(positions), t(written), t(slots), t(columns), keys, decode_runs, runs_out)


@pytest.mark.parametrize("architecture", ["llama", "qwen3"])
def test_packed_logits_equal_the_models(tokenizer, architecture):
    model = _model(tokenizer, architecture)
    assert lean_forward_unsupported(model) is None
    lean = LeanForward(model)
    gen = torch.Generator().manual_seed(0)
    rows = [torch.randint(0, model.config.vocab_size, (20,), generator=gen).tolist() for _ in range(3)]

    def reference(tokens):  # the model's next-token logits after `tokens`, from one full forward
        with torch.no_grad():
            return model(input_ids=torch.tensor([tokens])).logits[0, -1]

    cache = SlotCache(3)
    cache.reserve(32)
    # Prefill only: rows of 9, 6 and 4 tokens.
    got = lean.packed(_batch({}, [(0, rows[0][:9], 0), (1, rows[1][:6], 0), (2, rows[2][:4], 0)], 3), cache)
    want = torch.stack([reference(rows[0][:9]), reference(rows[1][:6]), reference(rows[2][:4])])
    assert torch.allclose(got, want, atol=1e-5)
    # Mixed: slots 0 and 2 decode one token each while slot 1 prefills 5 more.
    got = lean.packed(_batch({0: (rows[0][9], 9), 2: (rows[2][4], 4)}, [(1, rows[1][6:11], 6)], 3), cache)
    want = torch.stack([reference(rows[0][:10]), reference(rows[2][:5]), reference(rows[1][:11])])
    assert got.shape[0] == 4  # three decode slots, one prefill run
    assert torch.allclose(got[[0, 2, 3]], want, atol=1e-5)
    # Decode only, with a stand-in for slot 1 (its output is returned but means nothing).
    got = lean.packed(_batch({0: (rows[0][10], 10), 2: (rows[2][5], 5)}, [], 3), cache)
    assert torch.allclose(got[[0, 2]], torch.stack([reference(rows[0][:11]), reference(rows[2][:6])]), atol=1e-5)


def test_decode_read_in_runs_of_slots_equals_one_read(tokenizer):
    model = _model(tokenizer, "llama")
    lean = LeanForward(model)
    lengths = [3, 11, 4]
    outputs = []
    for runs in (None, [(0, 1, 4), (1, 2, 12), (2, 3, 5)]):
        cache = SlotCache(3)
        cache.reserve(16)
        lean.packed(_batch({}, [(slot, list(range(1, n + 1)), 0) for slot, n in enumerate(lengths)], 3), cache)
        decode = {slot: (5 + slot, n) for slot, n in enumerate(lengths)}
        outputs.append(lean.packed(_batch(decode, [], 3, runs=runs), cache))
    assert torch.allclose(outputs[0], outputs[1], atol=1e-6)


def test_unsupported_models_say_why_and_the_sampler_calls_the_model(tokenizer):
    from peft import LoraConfig, get_peft_model

    biased = _model(tokenizer, "llama")
    biased.config.attention_bias = True
    assert "attention_bias" in lean_forward_unsupported(biased)
    training = _model(tokenizer, "qwen3").train()
    assert lean_forward_unsupported(training) is None  # no dropout: training mode changes nothing
    training.config.attention_dropout = 0.1
    assert "attention dropout" in lean_forward_unsupported(training)
    wrapped = get_peft_model(_model(tokenizer, "llama"), LoraConfig(r=2, target_modules=["q_proj"]))
    assert "not one of" in lean_forward_unsupported(wrapped)
    wrapped_layer = _model(tokenizer, "llama")
    wrapped_layer.model.layers[0] = torch.nn.Sequential(wrapped_layer.model.layers[0])  # as a sharding wrapper would
    assert "unwrapped decoder layers" in lean_forward_unsupported(wrapped_layer)
    freed = _model(tokenizer, "llama")
    freed.model.layers[1].mlp.up_proj.weight.data = torch.empty(0)  # as a shard freed outside its forward
    assert "unsharded weights" in lean_forward_unsupported(freed)
    with pytest.raises(ValueError, match="lean forward unsupported"):
        LeanForward(biased)
    sampler = TurnSampler(wrapped, temperature=1.0, top_p=1.0, pad_id=0, stop=None)
    assert sampler.lean is None
    assert TurnSampler(_model(tokenizer, "llama"), temperature=1.0, top_p=1.0, pad_id=0, stop=None).lean is not None
    off = TurnSampler(_model(tokenizer, "llama"), temperature=1.0, top_p=1.0, pad_id=0, stop=None, use_lean_forward=False)
    assert off.lean is None


def test_decode_chunks_read_each_run_up_to_its_longest_row():
    # Keys per slot 10, 12, 1000, 990 at 256 per extra call:
    # one run 256 + 4 * 1000 = 4256; two runs (256 + 2 * 12) + (256 + 2 * 1000) = 2536;
    # three runs 266 + 268 + 2256 = 2790. Two runs win.
    assert decode_chunks([10, 12, 1000, 990], call_keys=256) == [(0, 2, 12), (2, 4, 1000)]
    # At 5000 per call one run (9000) beats two (12024).
    assert decode_chunks([10, 12, 1000, 990], call_keys=5000) == [(0, 4, 1000)]
    assert decode_chunks([]) == []


@pytest.mark.parametrize("architecture", ["llama", "qwen3"])
def test_norms_rope_table_and_fused_projections_equal_the_modules_bit_for_bit(tokenizer, architecture):
    """The lean forward's pieces reproduce the modules' arithmetic exactly, not just closely: the
    sampler's tokens and log-probabilities must not move when it takes the lean path."""
    from agentcredit.agent.lean_forward import _FusedLayer, _norm, _RopeTable

    model = _model(tokenizer, architecture)
    layer = model.model.layers[0]
    for module in (layer.input_layernorm, getattr(layer.self_attn, "q_norm", layer.post_attention_layernorm)):
        module.weight.data.uniform_(0.5, 1.5)  # not all ones, so the weight's product is checked
        x = torch.randn(7, module.weight.shape[0])
        assert torch.equal(_norm(module)(x), module(x))
    other = torch.nn.LayerNorm(4)
    assert _norm(other) is other  # an unknown norm class is called as it is

    table = _RopeTable(model.model.rotary_emb)
    x = torch.zeros(1, 5, model.config.hidden_size)
    positions = torch.tensor([0, 3, 700, 2, 513])  # past the first table's 512 rows: it grows
    cos, sin = table(x[0], positions)
    assert table.cos.shape[0] >= 701
    for i, p in enumerate(positions.tolist()):
        want_cos, want_sin = model.model.rotary_emb(x[:, :1], torch.tensor([[p]]))
        assert torch.equal(cos[i], want_cos[0, 0]) and torch.equal(sin[i], want_sin[0, 0])

    cfg = model.config
    shape = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads)
    fused, separate = _FusedLayer(layer, *shape, fuse=True), _FusedLayer(layer, *shape, fuse=False)
    assert fused.qkv_weight is not None and separate.qkv_weight is None
    h = torch.randn(6, cfg.hidden_size)
    attn, mlp = layer.self_attn, layer.mlp
    want = torch.cat([attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)], -1).view(6, -1, shape[2])
    assert torch.equal(separate.qkv(h), want) and torch.allclose(fused.qkv(h), want, atol=1e-6)
    assert torch.equal(separate.kv(h), want[:, shape[0]:]) and torch.allclose(fused.kv(h), want[:, shape[0]:], atol=1e-6)
    for got in (fused.gate_up(h), separate.gate_up(h)):
        assert torch.allclose(got[0], mlp.gate_proj(h), atol=1e-6) and torch.allclose(got[1], mlp.up_proj(h), atol=1e-6)


def test_large_models_keep_separate_projections(tokenizer, monkeypatch):
    from agentcredit.agent import lean_forward

    model = _model(tokenizer, "llama")
    assert all(f.qkv_weight is not None for f in LeanForward(model).fused)
    monkeypatch.setattr(lean_forward, "FUSE_LIMIT_BYTES", 1000)  # as if the weights were larger than the limit
    lean = LeanForward(model)
    assert all(f.qkv_weight is None and f.gate_up_weight is None for f in lean.fused)
    cache = SlotCache(1)
    cache.reserve(8)
    tokens = [3, 5, 7, 9]
    got = lean.packed(_batch({}, [(0, tokens, 0)], 1), cache)
    with torch.no_grad():
        want = model(input_ids=torch.tensor([tokens])).logits[0, -1]
    assert torch.allclose(got[0], want, atol=1e-5)
