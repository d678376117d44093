"""model.dtype=float64: the tiny model trains and samples in float64 (make train's default: its closing line then
does not move with the order in which floats are summed, docs/testbed-status.md)."""

from __future__ import annotations

import pytest
import torch
from test_rollout import DOCS, QUESTION, TINY, make_worker
from tiny_runs import SIGNAL, train_tiny

from agentcredit.agent.chat import ChatFormat
from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import build_retriever
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.models.loading import load_policy

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def double_setup():
    from agentcredit.agent.protocol import render_tool_call
    from agentcredit.env.types import ToolCall

    corpus = Corpus(DOCS)
    retriever = build_retriever("bm25", corpus)
    texts = [d.text for d in DOCS] * 20 + [QUESTION.text, render_tool_call(ToolCall("browser.search", {"query": "x"}))] * 20
    policy, tokenizer = load_policy({**TINY, "dtype": "float64"}, tokenizer_texts=lambda: texts)
    return policy, tokenizer, ChatFormat.from_tokenizer(tokenizer), lambda: BrowserEnv(corpus, retriever)


def test_the_sampler_decodes_a_float64_policy_and_records_the_logprobs_a_full_forward_gives(double_setup):
    policy = double_setup[0]
    assert {p.dtype for p in policy.parameters()} == {torch.float64}
    groups = make_worker(double_setup, lean_forward=True).rollout([QUESTION], group_size=3)
    for traj in [t for g in groups for t in g]:
        ids = torch.tensor([traj.input_ids])
        full = token_logprobs(policy, ids, torch.ones_like(ids))[0]
        mask = torch.tensor(traj.loss_mask, dtype=torch.bool)
        assert mask.any()
        # log-probabilities are taken in float32 from the float64 logits, as from any dtype (lit/logprobs.py)
        assert torch.allclose(full[mask], torch.tensor(traj.old_logprobs)[mask], atol=1e-6)


def test_a_float64_run_trains_and_checkpoints_float64_weights(tmp_path, signal_credit):
    train_tiny(tmp_path, *SIGNAL, "model.dtype=float64", "trainer.max_steps=2", "checkpoint.every_n_steps=1")
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    weights = [v for k, v in state.items() if k.startswith("policy.") and v.is_floating_point()]
    assert weights and all(v.dtype == torch.float64 for v in weights)
