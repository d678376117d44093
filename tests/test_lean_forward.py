"""The rollout's lean forward (agent/lean_forward.py) against the model's own forward."""

import pytest
import torch

from agentcredit.agent.lean_forward import LeanForward, lean_forward_unsupported
from agentcredit.agent.sampling import SlotCache, TurnSampler, _mask, decode_chunks
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


def _two_forwards(model, forward):
    """A prefill of rows with different cache offsets, then a decode step: logits of both, and the cache."""
    cache = SlotCache(2)
    gen = torch.Generator().manual_seed(0)
    logits = []
    for starts, n, keep in (([0, 0], 9, None), ([9, 9], 5, torch.tensor([2, 4])), ([14, 14], 1, None)):
        starts = torch.tensor(starts)
        ids = torch.randint(0, model.config.vocab_size, (2, n), generator=gen)
        width = cache.plan(None, starts, n)
        logits.append(forward(ids, starts[:, None] + torch.arange(n), _mask(starts, n, width, None), cache, keep))
    return logits, cache


@pytest.mark.parametrize("architecture", ["llama", "qwen3"])
def test_lean_logits_and_cache_equal_the_models(tokenizer, architecture):
    model = _model(tokenizer, architecture)
    assert lean_forward_unsupported(model) is None

    def reference(ids, positions, mask, cache, keep):
        with torch.no_grad():
            kwargs = {} if keep is None else {"logits_to_keep": keep}
            return model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, cache=cache,
                         **kwargs).logits

    want, want_cache = _two_forwards(model, reference)
    got, got_cache = _two_forwards(model, LeanForward(model))
    for a, b in zip(want, got):
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-5)
    for a, b in zip(want_cache.keys + want_cache.values, got_cache.keys + got_cache.values):
        assert torch.allclose(a, b, atol=1e-6)


def test_attention_read_in_runs_of_rows_equals_one_read(tokenizer):
    model = _model(tokenizer, "llama")
    lean = LeanForward(model)
    lengths = [3, 11, 4]
    outputs = []
    for chunks in (None, [(0, 1, 4), (1, 2, 12), (2, 3, 5)]):
        cache = SlotCache(3)
        for row, n in enumerate(lengths):  # each row's own prefill, as the sampler does
            slots, starts = torch.tensor([row]), torch.tensor([0])
            width = cache.plan(slots, starts, n)
            lean(torch.arange(1, n + 1)[None], torch.arange(n)[None], _mask(starts, n, width, None), cache)
        starts = torch.tensor(lengths)
        width = cache.plan(None, starts, 1)
        ids = torch.tensor([[5], [6], [7]])
        reads = None if chunks is None else [(lo, hi, lo, w) for lo, hi, w in chunks]
        outputs.append(lean(ids, starts[:, None], _mask(starts, 1, width, None), cache, reads=reads))
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
