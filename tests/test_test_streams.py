"""The held-out test rolls out several batches in one call, each batch on its own sampling stream, with the
outcomes of one call per batch (issue 42, item 2): stream_uniforms draws, the worker's per-question
generators, and the whole test stage at data.test_batches_per_call=1 against 3."""

from __future__ import annotations

import pytest
import torch

from agentcredit.agent.rollout import RolloutWorker
from agentcredit.agent.next_token import stream_uniforms
from agentcredit.world.types import Question
from test_rollout import make_worker, setup  # noqa: F401  (the module's tiny policy, chat and browser)
from tiny_runs import tiny_config


def test_rows_of_one_generator_draw_what_a_batch_of_only_them_draws():
    a, b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    u = stream_uniforms([a, b, a, b, b], "cpu")  # (5, 1)
    alone_a = torch.rand(2, 1, generator=torch.Generator().manual_seed(1))
    alone_b = torch.rand(3, 1, generator=torch.Generator().manual_seed(2))
    assert torch.equal(u[[0, 2]], alone_a) and torch.equal(u[[1, 3, 4]], alone_b)
    # one generator for every row is exactly one torch.rand(B, 1): the training path draws as it did
    c = torch.Generator().manual_seed(3)
    assert torch.equal(stream_uniforms([c] * 3, "cpu"), torch.rand(3, 1, generator=torch.Generator().manual_seed(3)))


QUESTIONS = [Question(f"q{i}", text, "Blue Harbor Trust", "BRIDGE_ENTITY") for i, text in enumerate([
    "Which charity did the mayor of the painter's birth town found?", "Who is the mayor of Korvel?",
    "Where was Lena Marsh born?", "What did Ada Fenn found in 2004?", "Which town is a port town?"])]


def _record(groups) -> list[tuple]:
    return [(t.question_id, t.input_ids, t.old_logprobs, t.reward, t.finish_reason) for g in groups for t in g]


def assert_same_outcomes(together: list[tuple], alone: list[tuple]) -> None:
    """The same tokens, rewards and finish reasons; the recorded log-probabilities within float noise: a
    forward over other rows multiplies matrices of another shape, which rounds the last bits differently
    (measured: at most 1e-6 apart)."""
    assert [(q, ids, r, f) for q, ids, _, r, f in together] == [(q, ids, r, f) for q, ids, _, r, f in alone]
    for (*_, lp_together, _r, _f), (*_, lp_alone, _r2, _f2) in zip(together, alone):
        assert torch.allclose(torch.tensor(lp_together), torch.tensor(lp_alone), atol=1e-5, rtol=0)


@pytest.mark.parametrize("group_size", [1, 2])  # 2: rows with one history share a slot until they part
def test_batches_in_one_call_sample_what_each_samples_alone(setup, group_size):  # noqa: F811
    batches, seeds = [QUESTIONS[:2], QUESTIONS[2:4], QUESTIONS[4:]], [11, 12, 13]
    alone = []
    for batch, seed in zip(batches, seeds):
        worker = make_worker(setup)
        worker.generator = torch.Generator().manual_seed(seed)
        alone += _record(worker.rollout(batch, group_size))
    streams = [torch.Generator().manual_seed(seed) for seed in seeds]
    together = make_worker(setup).rollout(QUESTIONS, group_size, [s for s, b in zip(streams, batches) for _ in b])
    assert_same_outcomes(_record(together), alone)
    assert len({len(r[1]) for r in alone}) > 1  # rows of several lengths: rows left the batch at different steps


def test_generators_must_be_one_per_question(setup):  # noqa: F811
    with pytest.raises(ValueError, match="2 generators for 5 questions"):
        make_worker(setup).rollout(QUESTIONS, 1, [torch.Generator()] * 2)


def _test_stage(tmp_path, monkeypatch, per_call: int) -> list[tuple]:
    """Every rollout of trainer.test at data.test_batches_per_call=per_call, in order."""
    seen = []
    real = RolloutWorker.rollout

    def recording(self, *args, **kwargs):
        groups = real(self, *args, **kwargs)
        seen.extend(_record(groups))
        return groups

    with monkeypatch.context() as patch:  # undone at return: a second stage must not record into this one's list
        patch.setattr(RolloutWorker, "rollout", recording)
        return _run_test_stage(tmp_path, per_call, seen)


def _run_test_stage(tmp_path, per_call: int, seen: list) -> list[tuple]:
    import lightning as L

    from agentcredit.run.compose import build_components, build_module, build_trainer
    from agentcredit.checks.validation import prepare_config

    cfg = prepare_config(tiny_config(tmp_path / str(per_call), "data.n_test=7", "data.test_batch_size=2",
                                     f"data.test_batches_per_call={per_call}", "rollout.max_turn_tokens=24"))
    L.seed_everything(0, workers=True, verbose=False)
    components = build_components(cfg)
    module = build_module(cfg, components)
    metrics = build_trainer(cfg, components.policy).test(module, datamodule=components.datamodule, verbose=False)[0]
    assert metrics["test/n"] == 7
    return seen


def test_the_test_stage_gives_the_same_outcomes_at_any_batches_per_call(tmp_path, monkeypatch):
    one_at_a_time = _test_stage(tmp_path, monkeypatch, 1)  # 4 calls: 2 + 2 + 2 + 1 questions
    together = _test_stage(tmp_path, monkeypatch, 3)  # 2 calls: 6 + 1 questions, 4 streams as before
    assert len(one_at_a_time) == 7
    assert_same_outcomes(together, one_at_a_time)
