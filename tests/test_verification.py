"""ProVer's verify stage: eligibility, the chosen rollout, judge corrections and failures, Δ, logs;
last, the verifier with the real RolloutWorker (replayed rollouts, restored environments, sampled continuations)."""

import pytest
import torch

from agentcredit.agent.chat import ChatFormat
from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.agent.rollout import RolloutConfig, RolloutWorker
from agentcredit.judge.verification import choose_expert, make_segment_verifier, proposal_problem
from agentcredit.agent.trajectory import generated_tokens
from agentcredit.env.reward import make_reward_fn
from agentcredit.credit.registry import get_credit
from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import build_retriever
from agentcredit.env.types import ToolCall
from agentcredit.judge import HeuristicJudge, JudgeError, Proposal, RandomJudge, build_judge_context
from agentcredit.lit.credit_inputs import CreditInputs, build_group
from agentcredit.models.loading import load_policy
from agentcredit.world.types import Document, Question
from judge_fixtures import (QUESTION, FakeWorker, error_traj, expert_traj, failed_traj, make_traj, open_result, page,
                            search)

PROVER_RUN = {"num_continuations": 8, "max_segment_turns": 4, "max_judge_corrections": 3,
              "eligible_low": 0.0, "eligible_high": 0.5, "success_threshold": 1.0}


class ScriptedJudge:
    """Returns scripted (start, end) proposals in order and records the correction reasons."""

    def __init__(self, *segments, error=None):
        self.segments = list(segments)
        self.error = error
        self.reasons: list[str] = []
        self.contexts = []

    def _next(self, context):
        self.contexts.append(context)
        if self.error is not None:
            raise self.error
        start, end = self.segments.pop(0) if len(self.segments) > 1 else self.segments[0]
        return Proposal(start, end, "scripted")

    def propose(self, context):
        return self._next(context)

    def correct(self, context, previous, reason):
        self.reasons.append(reason)
        return self._next(context)


def mixed_group():
    """G = 8, two successes (rate 0.25): the expert (T = 5) at index 2 and a longer success at index 5."""
    longer = expert_traj()
    longer.turn_texts.insert(0, search("Lena Marsh painter"))
    longer.observations.insert(0, "Search results:\n[0] Lena Marsh (https://w/lena-marsh)")
    longer.boundaries.append(longer.boundaries[-1] + 9)  # one more tool turn: T = 6
    longer.snapshots.append("s6")
    group = [failed_traj(), error_traj(), expert_traj(), failed_traj(0.0), failed_traj(), longer, error_traj(), failed_traj()]
    assert [t.num_tool_turns for t in group] == [3, 2, 5, 3, 3, 6, 2, 3]
    return group


def test_delta_and_logs_by_hand():
    pre = [0.0, 0.0, 1.1, 0.0, 0.0, 0.1, 0.0, 0.0]  # from s_2: mean 1.2 / 8 = 0.15
    post = [1.1, 1.1, 0.0, 1.1, 1.1, 0.1, 1.1, 0.0]  # from s_4: mean 5.6 / 8 = 0.7
    worker = FakeWorker({2: pre, 4: post}, new_tokens=6)
    group = mixed_group()
    segment, logs = make_segment_verifier(HeuristicJudge())(group, QUESTION, worker, PROVER_RUN)
    assert (segment.rollout, segment.start, segment.end) == (2, 2, 3)  # heuristic: novel search + novel page
    assert segment.delta == pytest.approx(0.55)
    assert worker.calls == [(2, 8), (4, 8)]  # s_ℓ = boundary ℓ, s_{r+1} = boundary r + 1
    # Policy tokens of the rollouts: failed 3·3 + 2 = 11, error 2·3 = 6, expert 5·3 + 2 = 17, longer 17 + 0.
    assert logs == pytest.approx({
        "eligible": 1.0, "verified": 1.0, "judge_failure": 0.0, "budget_exhausted": 0.0, "accepted": 1.0, "segment_len": 2.0,
        "delta": 0.55, "value_pre": 0.15, "value_post": 0.7, "judge_corrections": 0.0, "judge_tokens": 0.0,
        "extra_tokens": 16 * 6.0, "group_tokens": 11.0 * 4 + 6 * 2 + 17 * 2,
        "time/judge_s": logs["time/judge_s"], "time/verify_s": logs["time/verify_s"],
    })
    assert all(isinstance(v, float) for v in logs.values())


def test_delta_on_success_rates_counts_format_only_endings_as_failures():
    # The same continuations as above, counted as 1[R >= 1.0]: pre 1 of 8 = 0.125, post 5 of 8 = 0.625, Δ = 0.5
    # (on rewards the two 0.1 endings added 0.1/8 to each side and Δ was 0.55)
    pre = [0.0, 0.0, 1.1, 0.0, 0.0, 0.1, 0.0, 0.0]
    post = [1.1, 1.1, 0.0, 1.1, 1.1, 0.1, 1.1, 0.0]
    run = PROVER_RUN | {"boundary_value": "success"}
    segment, logs = make_segment_verifier(HeuristicJudge())(mixed_group(), QUESTION, FakeWorker({2: pre, 4: post}), run)
    assert segment.delta == pytest.approx(0.5)
    assert (logs["value_pre"], logs["value_post"], logs["delta"]) == pytest.approx((0.125, 0.625, 0.5))
    # Only format-only endings after the segment: no success gained, so nothing to credit, where rewards gave +0.1
    flat = FakeWorker({2: [0.0] * 8, 4: [0.1] * 8})
    segment, logs = make_segment_verifier(HeuristicJudge())(mixed_group(), QUESTION, flat, run)
    assert segment.delta == 0.0 and logs["accepted"] == 0.0
    segment, _ = make_segment_verifier(HeuristicJudge())(mixed_group(), QUESTION, FakeWorker({2: [0.0] * 8, 4: [0.1] * 8}),
                                                         PROVER_RUN)
    assert segment.delta == pytest.approx(0.1)  # the default, boundary_value=reward


def test_continuations_are_never_trained_on():
    worker = FakeWorker({2: [0.0] * 8, 4: [1.1] * 8})
    group = mixed_group()
    verifier = make_segment_verifier(HeuristicJudge())
    method = get_credit("prover")
    credit_group, logs = build_group(method, PROVER_RUN, group, QUESTION, CreditInputs(segment_verifier=verifier), worker)
    assert len(worker.returned) == 16
    assert credit_group.rewards.shape == (8,) and credit_group.turn_ids.shape[0] == 8  # the G rollouts only
    assert not any(isinstance(v, list) for v in logs.values())  # nothing per-continuation reaches the batch
    adv = method.advantages(credit_group, lam=1.0, outcome_scale="none")  # (G, L)
    outcome = credit_group.rewards - credit_group.rewards.mean()  # (G,)
    turn_ids = credit_group.turn_ids[2]
    in_segment = (turn_ids >= 2) & (turn_ids <= 3)
    assert in_segment.sum() == 6  # 3 policy tokens in each of turns 2 and 3
    assert torch.allclose(adv[2][in_segment], outcome[2] + 1.1)  # λ·Δ with Δ = 1.1 − 0
    other = credit_group.loss_mask[2].bool() & ~in_segment
    assert torch.allclose(adv[2][other], outcome[2].expand(int(other.sum())))


def test_negative_delta_is_returned_but_not_accepted():
    worker = FakeWorker({2: [1.1] * 8, 4: [1.1] * 4 + [0.0] * 4})
    segment, logs = make_segment_verifier(HeuristicJudge())(mixed_group(), QUESTION, worker, PROVER_RUN)
    assert segment.delta == pytest.approx(-0.55) and logs["accepted"] == 0.0 and logs["verified"] == 1.0


@pytest.mark.parametrize("rewards", [[0.0] * 8, [1.1] * 4 + [0.0] * 4, [1.1] * 8])
def test_groups_outside_the_eligible_band_are_left_alone(rewards):
    group = [make_traj([(search("x"), "Search results:")], "<answer>a</answer>", r) for r in rewards]
    judge, worker = ScriptedJudge((0, 0)), FakeWorker({})
    segment, logs = make_segment_verifier(judge)(group, QUESTION, worker, PROVER_RUN)
    assert segment is None and judge.contexts == [] and worker.calls == []
    assert logs == {"eligible": 0.0, "extra_tokens": 0.0, "group_tokens": 8 * 5.0}


def test_eligibility_band_comes_from_the_run_knobs():
    group = [expert_traj()] * 4 + [failed_traj()] * 4  # rate 0.5: outside (0, 0.5), inside (0, 0.6)
    worker = FakeWorker({3: [0.0] * 3, 4: [0.0] * 3})
    knobs = {**PROVER_RUN, "eligible_high": 0.6, "num_continuations": 3, "max_segment_turns": 1}
    judge = ScriptedJudge((3, 3))
    segment, logs = make_segment_verifier(judge)(group, QUESTION, worker, knobs)
    assert logs["eligible"] == 1.0 and worker.calls == [(3, 3), (4, 3)] and segment.delta == 0.0
    assert judge.contexts[0].max_segment_turns == 1


def test_choose_expert_prefers_the_shortest_success_with_a_tool_turn():
    assert choose_expert([0.0, 1.1, 1.1, 1.1], [1, 5, 3, 3], 1.0) == 2
    assert choose_expert([1.1, 1.1, 0.0], [0, 4, 1], 1.0) == 1  # a success without tool turns has no segment
    assert choose_expert([1.1, 0.0, 0.0], [0, 2, 2], 1.0) is None


def test_successes_without_tool_turns_skip_the_judge():
    group = [make_traj([], "<answer>Blue Harbor Trust</answer>", 1.1)] + [failed_traj()] * 3
    judge = ScriptedJudge((0, 0))
    segment, logs = make_segment_verifier(judge)(group, QUESTION, FakeWorker({}), PROVER_RUN)
    assert segment is None and judge.contexts == []
    assert (logs["eligible"], logs["verified"], logs["judge_failure"]) == (1.0, 0.0, 0.0)


def test_invalid_proposals_are_corrected_with_the_validation_reason():
    worker = FakeWorker({1: [0.0] * 8, 2: [1.1] * 8})
    judge = ScriptedJudge((3, 5), (0, 4), (1, 1))  # terminal end, then 5 turns, then valid
    segment, logs = make_segment_verifier(judge)(mixed_group(), QUESTION, worker, PROVER_RUN)
    assert (segment.start, segment.end) == (1, 1) and logs["judge_corrections"] == 2.0
    assert "final (terminal) turn" in judge.reasons[0] and "at most 4" in judge.reasons[1]


def test_too_many_invalid_proposals_end_in_judge_failure(caplog):
    judge, worker = ScriptedJudge((4, 5)), FakeWorker({})
    segment, logs = make_segment_verifier(judge)(mixed_group(), QUESTION, worker, {**PROVER_RUN, "max_judge_corrections": 2})
    assert segment is None and len(judge.contexts) == 3 and worker.calls == []
    assert (logs["judge_failure"], logs["judge_corrections"], logs["extra_tokens"]) == (1.0, 2.0, 0.0)
    assert "keeps GRPO credit" in caplog.text and "invalid after 2 corrections" in caplog.text


@pytest.mark.parametrize("error", [RuntimeError("endpoint down"), JudgeError("timeout"), TimeoutError(), KeyError("x")])
def test_any_judge_exception_becomes_judge_failure(error):
    segment, logs = make_segment_verifier(ScriptedJudge(error=error))(mixed_group(), QUESTION, FakeWorker({}), PROVER_RUN)
    assert segment is None and logs["judge_failure"] == 1.0 and "accepted" not in logs


def test_random_paper_draws_that_are_invalid_are_discarded_without_correction():
    outcomes = []
    judge = RandomJudge(seed=0, mode="paper")
    for _ in range(30):
        worker = FakeWorker({b: [0.0] * 8 for b in range(6)})
        segment, logs = make_segment_verifier(judge)(mixed_group(), QUESTION, worker, PROVER_RUN)
        outcomes.append((segment is None, logs["judge_failure"], logs["judge_corrections"]))
    assert {o for o in outcomes if o[0]} == {(True, 1.0, 1.0)}  # one refused correction, then failure
    assert any(not o[0] for o in outcomes)


def test_failed_actions_cannot_be_credited():
    expert = make_traj([(search("x"), "Search results:\n[0] A (https://w/a)"), (open_result(7), "Error: id 7 is out of range"),
                        (open_result(0), page("A"))], "<answer>A</answer>", 1.1)
    context = build_judge_context([expert, error_traj()], QUESTION.text, 0, 4, 1.0)
    assert "turn 1 is a malformed or failed action" in proposal_problem(Proposal(0, 2), context.expert, 4)
    assert proposal_problem(Proposal(2, 2), context.expert, 4) is None
    assert proposal_problem(Proposal(0, 2), context.expert, 4, require_valid_actions=False) is None
    assert proposal_problem(Proposal(None, None, problem="not JSON"), context.expert, 4) == "not JSON"


def test_generated_tokens_excludes_the_restored_prefix():
    worker = FakeWorker({3: [0.0]}, new_tokens=5)
    (continuation,) = worker.continue_from(expert_traj(), 3, QUESTION, 1)
    assert continuation.num_policy_tokens == 3 * 3 + 5 and generated_tokens(continuation) == 5


# ---------------------------------------------------------------- with the real RolloutWorker

WORLD_DOCS = [
    Document("d0", "Lena Marsh", "https://w/lena-marsh", ("Lena Marsh is a painter.", "She was born in Korvel.")),
    Document("d1", "Korvel", "https://w/korvel", ("Korvel is a port town.", "Its mayor is Ada Fenn.")),
    Document("d2", "Ada Fenn", "https://w/ada-fenn", ("Ada Fenn is a mayor.", "She founded Blue Harbor Trust.")),
]
WORLD_QUESTION = Question("q0", "Which charity did the mayor of Korvel found?", "Blue Harbor Trust", "BRIDGE_ENTITY")
TINY = {"kind": "tiny", "hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 64,
        "vocab_size": 500, "seed": 0}


def call(name, **arguments):
    return render_tool_call(ToolCall(name, arguments))


@pytest.fixture(scope="module")
def worker():
    corpus = Corpus(WORLD_DOCS)
    retriever = build_retriever("bm25", corpus)
    texts = [d.text for d in WORLD_DOCS] * 20 + [WORLD_QUESTION.text, call("browser.search", query="x")] * 20
    policy, tokenizer = load_policy(TINY, tokenizer_texts=lambda: texts)
    cfg = RolloutConfig(max_tool_turns=6, max_turn_tokens=12, max_context_tokens=2048)
    return RolloutWorker(policy.eval(), ChatFormat.from_tokenizer(tokenizer), lambda: BrowserEnv(corpus, retriever),
                         make_reward_fn({}), cfg, torch.Generator().manual_seed(0))


def test_verifier_restores_real_states_and_counts_continuation_tokens(worker):
    expert = worker.replay(WORLD_QUESTION, [call("browser.search", query="Korvel mayor"), call("browser.open", id=0),
                                      call("browser.search", query="Ada Fenn"), call("browser.open", id=0),
                                      render_answer("Blue Harbor Trust")])
    failed = worker.replay(WORLD_QUESTION, [call("browser.search", query="Korvel mayor"), call("browser.open", id=0),
                                      render_answer("Korvel Trust")])
    assert expert.reward == pytest.approx(1.1) and failed.reward == pytest.approx(0.1)
    group = [failed, expert, failed, failed]
    pre_calls = []
    original = worker.continue_from_many

    def recording_continue_from_many(trajectory, boundaries, question, n):
        outs = original(trajectory, boundaries, question, n)
        pre_calls.extend(zip(boundaries, outs))
        return outs

    worker.continue_from_many = recording_continue_from_many
    try:
        segment, logs = make_segment_verifier(HeuristicJudge())(group, WORLD_QUESTION, worker, {"num_continuations": 2})
    finally:
        del worker.continue_from_many
    # Both rollouts open Korvel; only the expert searched "Ada Fenn" and opened her page: turns 2..3.
    assert (segment.rollout, segment.start, segment.end) == (1, 2, 3)
    assert [b for b, _ in pre_calls] == [2, 4]
    continuations = [c for _, out in pre_calls for c in out]
    assert all(c.input_ids[: expert.boundaries[c.continued_from]] == expert.input_ids[: expert.boundaries[c.continued_from]]
               for c in continuations)
    assert logs["extra_tokens"] == sum(generated_tokens(c) for c in continuations) > 0
    rewards = [[c.reward for c in out] for _, out in pre_calls]
    assert logs["delta"] == pytest.approx(sum(rewards[1]) / 2 - sum(rewards[0]) / 2)
    assert logs["group_tokens"] == sum(t.num_policy_tokens for t in group)
