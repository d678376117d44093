"""The prefill attention's unmasked cases against a masked call and against the softmax written out."""

import math

import pytest
import torch
import torch.nn.functional as F

from agentcredit.agent.cached_attention import prefill_attention
from agentcredit.agent.slot_cache import SlotCache


def written_out(q, keys, values, start, n, scale):
    """Query i of the last m new tokens over columns 0..start + n - m + i, as softmax(q·k·scale)·v per head."""
    heads, kv_heads, m = q.shape[1], keys.shape[1], q.shape[2]
    out = torch.empty_like(q, dtype=torch.float64)
    for h in range(heads):
        kh = h // (heads // kv_heads)
        for i in range(m):
            seen = start + n - m + i + 1
            scores = (keys[0, kh, :seen].double() @ q[0, h, i].double()) * scale
            out[0, h, i] = torch.softmax(scores, 0) @ values[0, kh, :seen].double()
    return out


@pytest.mark.parametrize("start,n,last_only", [(0, 7, False), (0, 1, False), (0, 9, True), (13, 5, True), (13, 5, False),
                                               (40, 1, True)])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2)])
def test_prefill_attention_equals_the_masked_softmax(start, n, last_only, heads, kv_heads):
    torch.manual_seed(start * 31 + n)
    dim, scale = 8, 8 ** -0.5
    keys, values = torch.randn(1, kv_heads, start + n, dim), torch.randn(1, kv_heads, start + n, dim)
    m = 1 if last_only else n
    q = torch.randn(1, heads, m, dim)
    got = prefill_attention(q, keys, values, start, n, scale, kv_heads != heads)
    assert got.shape == (1, heads, m, dim)
    assert torch.allclose(got.double(), written_out(q, keys, values, start, n, scale), atol=1e-5)
    mask = torch.arange(start + n)[None, :] <= (start + n - m) + torch.arange(m)[:, None]
    masked = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask[None, None], scale=scale,
                                            enable_gqa=kv_heads != heads)
    assert (got - masked).abs().max() < 1e-6


def test_prefill_attention_of_one_cached_key_and_one_token_by_hand():
    # One cached key and one new token, scores 1·2·0.5 = 1 and 1·0·0.5 = 0: weights e/(e+1) and 1/(e+1).
    q = torch.tensor([[[[2.0]]]])
    keys = torch.tensor([[[[1.0], [0.0]]]])
    values = torch.tensor([[[[10.0], [20.0]]]])
    got = prefill_attention(q, keys, values, start=1, n=1, scale=0.5, gqa=False)
    e = math.e
    assert got.item() == pytest.approx(10 * e / (e + 1) + 20 / (e + 1), abs=1e-5)


def test_a_copied_cache_zeroes_every_column_it_did_not_copy():
    cache = SlotCache(3)
    k = torch.randn(3, 2, 4)  # one token in each of three slots: (tokens, H_kv, D)
    cache.reserve(8)
    width = cache.capacity
    cache.put(k, k + 1, 0, torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0]))
    cache.keys[0][:, :, 5:] = float("nan")  # stale columns past every length
    cache.keep(torch.tensor([2, 0]), used=1, num_slots=3)
    keys = cache.keys[0]
    assert keys.shape == (3, 2, width, 4)
    assert torch.equal(keys[0, :, 0], k[2]) and torch.equal(keys[1, :, 0], k[0])
    assert torch.equal(keys[:2, :, 1:], torch.zeros(2, 2, width - 1, 4)) and torch.equal(keys[2], torch.zeros(2, width, 4))
