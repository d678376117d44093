"""A decoder's FLOPs (agentcredit.models.flops) against hand arithmetic, and against torch's own count of
the products a real Llama and Qwen3 run."""

import pytest
import torch

from agentcredit.models.flops import (
    DecoderShape,
    achieved_rates,
    backward_flops,
    context_sum,
    decoder_shape,
    forward_flops,
    layer_matmul_parameters,
    step_gflops,
)

# L=2 layers, h=8 hidden, i=16 intermediate, H=2 heads, K=1 KV head, d=4 head_dim, V=10 vocab.
SHAPE = DecoderShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10)


def test_forward_and_backward_flops_of_a_made_up_shape_by_hand():
    # W = 2·h·d·(H + K) + 3·h·i = 2·8·4·3 + 3·8·16 = 192 + 384 = 576
    assert layer_matmul_parameters(SHAPE) == 576
    # 3 tokens from an empty cache see 1, 2, 3 keys: 6; 3 tokens after 5 cached ones see 6, 7, 8: 21
    assert context_sum(0, 3) == 6 and context_sum(5, 3) == 21 and context_sum(7, 0) == 0
    # F = 2·L·W·N + 4·L·H·d·C + 2·h·V·N_head, per term 2·2·576 = 2304, 4·2·2·4 = 64 and 2·8·10 = 160:
    # a 3-token prefill, every position projected: 2304·3 + 64·6 + 160·3 = 6912 + 384 + 480 = 7776
    assert forward_flops(SHAPE, 3, 6, 3) == 7776
    # one decoded token after 5 cached ones (6 keys), one position projected: 2304 + 64·6 + 160 = 2848
    assert forward_flops(SHAPE, 1, context_sum(5, 1), 1) == 2848
    assert backward_flops(7776) == 15552  # B = 2·F


def test_a_step_in_gflops_and_its_rates_by_hand():
    counts = {"rollout_forward_tokens": 3, "rollout_forward_contexts": 6, "rollout_forward_head": 3,
              # the update ran the same 3-token batch twice (TIS's π_old, then with a graph), 2 loss positions each
              "update_forward_tokens": 6, "update_forward_contexts": 12, "update_forward_head": 4,
              "update_forward_grad_tokens": 3, "update_forward_grad_contexts": 6, "update_forward_grad_head": 2}
    out = step_gflops(SHAPE, counts)
    assert out["rollout_forward_gflops"] == pytest.approx(7776e-9)  # the prefill above
    # 2304·6 + 64·12 + 160·4 = 13824 + 768 + 640 = 15232
    assert out["update_forward_gflops"] == pytest.approx(15232e-9)
    # the forward with a graph: 2304·3 + 64·6 + 160·2 = 6912 + 384 + 320 = 7616; B = 2·7616 = 15232
    assert out["update_backward_gflops"] == pytest.approx(15232e-9)
    assert step_gflops(SHAPE, {})["update_backward_gflops"] == 0.0  # a step without counts did no work

    figures = {"rollout_forward_gflops": 6.0, "rollout_forward_s": 3.0, "update_forward_gflops": 2.0,
               "update_forward_s": 0.5, "update_backward_gflops": 4.0, "update_backward_s": 1.5}
    rates = achieved_rates(figures, matmul_rate=10.0)
    assert rates["rollout_forward_gflop_s"] == 2.0 and rates["update_forward_gflop_s"] == 4.0
    assert rates["update_backward_gflop_s"] == pytest.approx(8 / 3)
    assert rates["update_share_of_matmul_rate"] == pytest.approx(0.3)  # (2 + 4) / (0.5 + 1.5) = 3, over 10
    assert achieved_rates({**figures, "rollout_forward_s": 0.0}, 10.0)["rollout_forward_gflop_s"] == 0.0


def test_decoder_shape_reads_a_config_and_refuses_what_it_cannot_read():
    llama = {"num_hidden_layers": 2, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
             "num_key_value_heads": 1, "vocab_size": 10}
    assert decoder_shape(llama) == SHAPE  # head_dim = 8 / 2
    assert decoder_shape({**llama, "head_dim": None}) == SHAPE
    assert decoder_shape({"text_config": llama, "vocab_size": 99}) == SHAPE
    assert decoder_shape({**llama, "head_dim": 16}).head_dim == 16  # Qwen3 sets its own
    assert decoder_shape({**llama, "num_key_value_heads": None}).kv_heads == 2  # no GQA: one per head
    assert decoder_shape({k: v for k, v in llama.items() if k != "intermediate_size"}) is None
    assert decoder_shape({**llama, "vocab_size": 0}) is None and decoder_shape({"n_layer": 2}) is None


@pytest.mark.parametrize("architecture", ["llama", "qwen3"])
def test_the_formula_is_torchs_count_of_a_real_model(architecture):
    """Eager attention multiplies the whole (N, N) score square and masks it afterwards, so torch counts
    C = N² there; a decoded token after p cached ones computes exactly p + 1 scores (context_sum)."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    config_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}[architecture]
    config = config_cls(vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=6, tie_word_embeddings=True)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = model_cls(config)
    shape = decoder_shape(model.config.to_dict())
    assert shape.head_dim == 6 and shape.kv_heads == 2
    linear = sum(m.weight.numel() for m in model.model.layers[0].modules() if isinstance(m, torch.nn.Linear))
    assert linear == layer_matmul_parameters(shape)

    ids = torch.randint(0, 50, (1, 5))
    with FlopCounterMode(display=False) as forward:
        out = model(input_ids=ids, use_cache=True)
    assert forward.get_total_flops() == forward_flops(shape, 5, 5 * 5, 5)
    with FlopCounterMode(display=False) as backward:
        out.logits.sum().backward()
    assert backward.get_total_flops() == backward_flops(forward.get_total_flops())
    with torch.no_grad(), FlopCounterMode(display=False) as decode:
        model(input_ids=ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
    assert decode.get_total_flops() == forward_flops(shape, 1, context_sum(5, 1), 1)
