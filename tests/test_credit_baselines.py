"""ProVer's baselines as registered credit methods, against hand-computed numbers: SPO-chain's three
segment advantages, GiGPO's anchor-state step advantages, budget-matched GRPO's extra rollouts, and
GSPO as GRPO's advantages with a sequence-level ratio chosen by a loss setting."""

import pytest
import torch

from agentcredit.credit import CreditGroup, get_credit, split_credit_config, validate_credit_config
from agentcredit.credit.budget import matched_extra_rollouts
from agentcredit.credit.config import loss_settings
from agentcredit.credit.gigpo import anchor_step_advantages, step_returns
from agentcredit.credit.group import ChainValues
from agentcredit.credit.spo import chain_advantages, chain_boundaries, chain_segment_sizes
from agentcredit.credit.tokens import ANSWER_TURN as A
from agentcredit.credit.tokens import NON_POLICY as P
from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import BM25Retriever
from agentcredit.env.types import ToolCall
from agentcredit.world.types import Document

# --- SPO-chain ------------------------------------------------------------------------------------


@pytest.mark.parametrize("actions, sizes", [(1, [1]), (2, [1, 1]), (3, [1, 1, 1]), (4, [2, 1, 1]), (5, [2, 2, 1]),
                                            (7, [3, 2, 2])])
def test_chain_segments_are_near_equal_thirds(actions, sizes):
    assert chain_segment_sizes(actions) == sizes


@pytest.mark.parametrize("tool_turns, cuts", [(0, []), (1, [1]), (2, [1, 2]), (3, [2, 3]), (4, [2, 4]), (6, [3, 5])])
def test_chain_boundaries_are_states_inside_the_rollout(tool_turns, cuts):
    assert chain_boundaries(tool_turns) == cuts


def test_chain_advantages_three_segments():
    # V_0 = 0.325, V_1 = 0.5, V_2 = 0.875, R = 1.1: A = [0.175, 0.375, 0.225], summing to R − V_0 = 0.775
    got = chain_advantages(0.325, [0.5, 0.875], 1.1)
    assert got.tolist() == pytest.approx([0.175, 0.375, 0.225], abs=1e-12)
    assert float(got.sum()) == pytest.approx(1.1 - 0.325)


# Rollout 0: four tool turns (0..3) and an answer: 5 actions, segments {0,1} {2,3} {answer}, cuts [2, 4].
# Rollouts 1-3 answer at once.
SPO_TURNS = torch.tensor([[P, 0, 0, P, 1, P, 2, 2, P, 3, P, A],
                          [P, A, A, P, P, P, P, P, P, P, P, P],
                          [P, A, P, P, P, P, P, P, P, P, P, P],
                          [P, A, A, A, P, P, P, P, P, P, P, P]])
SPO_MASK = (SPO_TURNS != P).long()


def test_spo_chain_method_on_a_group_with_one_success():
    rewards = torch.tensor([1.1, 0.1, 0.1, 0.0])  # V_0 = mean = 0.325
    chain = ChainValues(rollout=0, boundaries=(2, 4), values=(0.5, 0.875))
    group = CreditGroup(rewards=rewards, turn_ids=SPO_TURNS, loss_mask=SPO_MASK,
                        num_turns=torch.tensor([4, 0, 0, 0]), chains=(chain,))
    got = get_credit("spo-chain").advantages(group)
    a1, a2, a3 = 0.175, 0.375, 0.225
    assert got[0].tolist() == pytest.approx([0, a1, a1, 0, a1, 0, a2, a2, 0, a2, 0, a3], abs=1e-6)
    # Other rollouts keep GRPO's mean-centred credit R − V_0: −0.225, −0.225, −0.325
    assert got[1].tolist() == pytest.approx([0, -0.225, -0.225] + [0] * 9, abs=1e-6)
    assert got[3].tolist() == pytest.approx([0, -0.325, -0.325, -0.325] + [0] * 8, abs=1e-6)
    diag = get_credit("spo-chain").diagnostics(group)
    assert diag["segment_advantages"][0] == pytest.approx([a1, a2, a3]) and diag["segment_advantages"][1] is None
    # Without measurements (not eligible) it is plain mean-centred GRPO.
    plain = CreditGroup(rewards=rewards, turn_ids=SPO_TURNS, loss_mask=SPO_MASK, num_turns=torch.tensor([4, 0, 0, 0]))
    assert get_credit("spo-chain").advantages(plain)[0, 1] == pytest.approx(1.1 - 0.325)


def test_spo_chain_method_with_std_scaled_outcomes():
    # outcome_scale=std scales only the unmeasured rollouts' GRPO credit: σ of [1.1, 0.1, 0.1, 0] is
    # sqrt(0.8075/4) = 0.4493050, so rollout 1 gets −0.225/σ = −0.5007734 and rollout 3 −0.325/σ = −0.7233393;
    # the measured rollout's segment advantages are value differences and stay 0.175, 0.375, 0.225
    chain = ChainValues(rollout=0, boundaries=(2, 4), values=(0.5, 0.875))
    group = CreditGroup(rewards=torch.tensor([1.1, 0.1, 0.1, 0.0]), turn_ids=SPO_TURNS, loss_mask=SPO_MASK,
                        num_turns=torch.tensor([4, 0, 0, 0]), chains=(chain,))
    got = get_credit("spo-chain").advantages(group, outcome_scale="std")
    a1, a2, a3 = 0.175, 0.375, 0.225
    assert got[0].tolist() == pytest.approx([0, a1, a1, 0, a1, 0, a2, a2, 0, a2, 0, a3], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, -0.5007734, -0.5007734] + [0] * 9, abs=1e-6)
    assert got[3].tolist() == pytest.approx([0, -0.7233393, -0.7233393, -0.7233393] + [0] * 8, abs=1e-6)


def test_chain_values_are_validated():
    with pytest.raises(ValueError, match="boundaries"):
        CreditGroup(rewards=torch.tensor([1.1, 0.1, 0.1, 0.0]), turn_ids=SPO_TURNS, loss_mask=SPO_MASK,
                    num_turns=torch.tensor([4, 0, 0, 0]), chains=(ChainValues(0, (2, 5), (0.5, 0.9)),))


# --- GiGPO ----------------------------------------------------------------------------------------
# Three rollouts, γ = 0.5, states a b c d:
#   rollout 0 (R=1): S_0..S_2 = a b c, answers     returns γ^(2−k)·1 = 0.25 0.5 1.0
#   rollout 1 (R=0): S_0..S_2 = a b d, answers     returns 0 0 0
#   rollout 2 (R=1): S_0..S_1 = a c,   answers     returns 0.5 1.0
# anchor a: {0.25, 0, 0.5}: mean 0.25, σ = sqrt(0.125/3) = 0.2041241 → 0, −1.2247449, +1.2247449
# anchor b: {0.5, 0}: mean 0.25, σ 0.25 → +1, −1
# anchor c: {1.0 (rollout 0, turn 2), 1.0 (rollout 2, turn 1)}: reached by different paths, equal returns → 0, 0
# anchor d: one action → 0
a, b, c, d = 11, 22, 33, 44
KEYS = [torch.tensor([a, b, c]), torch.tensor([a, b, d]), torch.tensor([a, c])]
GI_TURNS = torch.tensor([[P, 0, P, 1, P, A], [P, 0, P, 1, P, A], [P, 0, P, A, P, P]])
GI_MASK = (GI_TURNS != P).long()
GI_REWARDS = torch.tensor([1.0, 0.0, 1.0])


def test_anchor_state_step_advantages_by_hand():
    returns = [step_returns(1.0, 2, 0.5), step_returns(0.0, 2, 0.5), step_returns(1.0, 1, 0.5)]
    assert returns[0].tolist() == [0.25, 0.5, 1.0] and returns[2].tolist() == [0.5, 1.0]
    acted = [torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool), torch.ones(2, dtype=torch.bool)]
    step, sizes = anchor_step_advantages(returns, KEYS, acted, "std")
    assert step[0].tolist() == pytest.approx([0.0, 1.0, 0.0], abs=1e-6)
    assert step[1].tolist() == pytest.approx([-1.2247449, -1.0, 0.0], abs=1e-6)
    assert step[2].tolist() == pytest.approx([1.2247449, 0.0], abs=1e-6)
    assert [s.tolist() for s in sizes] == [[3, 2, 2], [3, 2, 1], [3, 2]]
    mean_norm, _ = anchor_step_advantages(returns, KEYS, acted, "none")
    assert mean_norm[1].tolist() == pytest.approx([-0.25, -0.25, 0.0], abs=1e-9)


def test_gigpo_method_mixes_episode_and_step_advantages():
    group = CreditGroup(rewards=GI_REWARDS, turn_ids=GI_TURNS, loss_mask=GI_MASK, num_turns=torch.tensor([2, 2, 1]),
                        state_keys=KEYS)
    # A^E (std): mean 2/3, σ = sqrt(2/9) → [0.7071068, −1.4142136, 0.7071068]
    got = get_credit("gigpo").advantages(group, gamma=0.5, omega=0.5)
    e0, e1 = 0.7071068, -1.4142136
    assert got[0].tolist() == pytest.approx([0, e0, 0, e0 + 0.5, 0, e0], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, e1 - 0.5 * 1.2247449, 0, e1 - 0.5, 0, e1], abs=1e-6)
    assert got[2].tolist() == pytest.approx([0, e0 + 0.5 * 1.2247449, 0, e0, 0, 0], abs=1e-6)
    diag = get_credit("gigpo").diagnostics(group, gamma=0.5)
    assert diag["anchor_share"] == pytest.approx(7 / 8)  # only rollout 1's last action is alone
    with pytest.raises(ValueError, match="needs environment state keys"):
        get_credit("gigpo").advantages(CreditGroup(rewards=GI_REWARDS, turn_ids=GI_TURNS, loss_mask=GI_MASK,
                                                   num_turns=torch.tensor([2, 2, 1])))


def test_gigpo_method_with_a_mean_centred_episode_advantage():
    # outcome_scale=none: A^E = R − mean = [1/3, −2/3, 1/3]; the step part (step_scale=std) is unchanged
    group = CreditGroup(rewards=GI_REWARDS, turn_ids=GI_TURNS, loss_mask=GI_MASK, num_turns=torch.tensor([2, 2, 1]),
                        state_keys=KEYS)
    got = get_credit("gigpo").advantages(group, gamma=0.5, omega=0.5, outcome_scale="none")
    e0, e1 = 1 / 3, -2 / 3
    assert got[0].tolist() == pytest.approx([0, e0, 0, e0 + 0.5, 0, e0], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, e1 - 0.5 * 1.2247449, 0, e1 - 0.5, 0, e1], abs=1e-6)
    assert got[2].tolist() == pytest.approx([0, e0 + 0.5 * 1.2247449, 0, e0, 0, 0], abs=1e-6)


def test_in_a_group_where_every_rollout_failed_the_discount_alone_ranks_the_first_action_by_shortness():
    """What compare_long's GiGPO seed 0 shortened its rollouts by (README, long preset): a well-formed wrong answer
    earns 0.1, and S_0 is every rollout's state, so in a group with no success (GRPO: no signal, A^E = 0) the
    first action's returns 0.1·γ^T differ by the discount only, and σ-scaling makes that difference unit-sized.
    T = 2, 6, 10, γ = 0.95: returns 0.09025, 0.0735092, 0.0598737; mean 0.0745443, σ 0.0124227
    → A^S = +1.2642792, −0.0833240, −1.1809552. With γ = 1 the returns are equal and A^S = 0."""
    keys = [torch.tensor([a] + [100 * g + k for k in range(1, t + 1)]) for g, t in enumerate((2, 6, 10))]
    acted = [torch.ones(t + 1, dtype=torch.bool) for t in (2, 6, 10)]
    returns = [step_returns(0.1, t, 0.95) for t in (2, 6, 10)]
    step, sizes = anchor_step_advantages(returns, keys, acted, "std")
    assert [s[0].item() for s in step] == pytest.approx([1.2642792, -0.0833240, -1.1809552], abs=1e-6)
    assert [s[0].item() for s in sizes] == [3, 3, 3]
    flat, _ = anchor_step_advantages([step_returns(0.1, t, 1.0) for t in (2, 6, 10)], keys, acted, "std")
    assert all(float(s.abs().max()) == 0.0 for s in flat)
    scaled_by_one, _ = anchor_step_advantages(returns, keys, acted, "none")  # verl-agent's mean_norm: 0.0157, not 1.26
    assert scaled_by_one[0][0].item() == pytest.approx(0.09025 - 0.0745443, abs=1e-6)


def test_a_rollout_without_a_final_turn_has_no_action_at_its_last_state():
    # rollout 1 hit the tool limit: its S_2 = c is no action, so anchor c holds rollout 0's answer alone
    turns = torch.tensor([[P, 0, P, 1, P, A], [P, 0, P, 1, P, P]])
    keys = [torch.tensor([a, b, c]), torch.tensor([a, b, c])]
    group = CreditGroup(rewards=torch.tensor([1.0, 0.0]), turn_ids=turns, loss_mask=(turns != P).long(),
                        num_turns=torch.tensor([2, 2]), state_keys=keys)
    diag = get_credit("gigpo").diagnostics(group, gamma=0.5)
    assert diag["anchor_sizes"] == [[2, 2, 1], [2, 2, 0]]


def _env() -> BrowserEnv:
    words = ["castle", "harbour", "museum"]
    docs = [Document(f"d{i}", f"Page {i}", f"https://w/{i}", (f"river {i} line.", f"{words[i]} line.")) for i in range(3)]
    corpus = Corpus(docs)
    return BrowserEnv(corpus, BM25Retriever(corpus), default_topn=3)


def test_browser_states_match_by_what_decides_observations():
    first, second, third = _env(), _env(), _env()
    start = first.snapshot().anchor_key()
    assert start == second.snapshot().anchor_key()
    first.step(ToolCall("browser.search", {"query": "river"}))
    second.step(ToolCall("browser.open", {"id": 0}))  # an error: diagnostics change, the state does not
    assert second.snapshot().anchor_key() == start
    second.step(ToolCall("browser.search", {"query": "river"}))
    assert second.snapshot().anchor_key() == first.snapshot().anchor_key()  # same results, other history of errors
    third.step(ToolCall("browser.search", {"query": "castle"}))
    assert third.snapshot().last_results != first.snapshot().last_results
    assert third.snapshot().anchor_key() != first.snapshot().anchor_key()
    first.step(ToolCall("browser.open", {"id": 0}))
    assert first.snapshot().anchor_key() != second.snapshot().anchor_key()  # a page opened


# --- group size (budget-matched GRPO) and loss mode (GSPO): settings of any method ----------------------------------------------------------------


def test_matched_extra_rollouts():
    # G = 8 rollouts cost 800 tokens per group (100 each); continuations 250 and 150 tokens per group: mean 200 → 2
    assert matched_extra_rollouts([250.0, 150.0], [800.0, 800.0], 8) == 2
    assert matched_extra_rollouts([0.0], [800.0], 8) == 0
    with pytest.raises(ValueError):
        matched_extra_rollouts([], [], 8)


def test_matched_phases_and_the_phase_of_a_step_by_hand():
    from agentcredit.credit.budget import extra_rollouts_at, matched_phases

    # 5 logged steps (0, 2, 4, 6, 8), G = 8, 800 tokens a group (100 a rollout); continuations 300, 300, 200, 100, 0.
    # Two phases, larger first: steps 0, 2, 4 (mean 266.7 → round(2.67) = 3) and 6, 8 (mean 50 → round(0.5) = 0,
    # Python's round to even)
    schedule = matched_phases([0, 2, 4, 6, 8], [300, 300, 200, 100, 0], [800] * 5, 8, 2)
    assert schedule == [(0, 3), (6, 0)]
    assert [extra_rollouts_at(schedule, s) for s in (0, 5, 6, 499)] == [3, 3, 0, 0]
    # one phase is the whole run's number: mean 180 → 2
    assert matched_phases([0, 2, 4, 6, 8], [300, 300, 200, 100, 0], [800] * 5, 8, 1) == [(0, 2)]
    with pytest.raises(ValueError, match="credit.match_phases must be an integer >= 1, got 0"):
        validate_credit_config("grpo", {"match_phases": 0})
    with pytest.raises(ValueError, match=r"^credit.match_phases=2 needs credit.match_metrics"):
        validate_credit_config("grpo", {"match_phases": 2, "extra_rollouts": 2})


def test_group_size_knobs_belong_to_every_method_and_reach_the_run_knobs():
    # credit=budget-grpo is GRPO with extra_rollouts 2; any method takes the same knobs (here TRACE with 3)
    for name in ("grpo", "trace", "prover"):
        run = split_credit_config({"name": name}).run
        assert (run["extra_rollouts"], run["match_metrics"]) == (0, None)
    widened = split_credit_config({"name": "trace", "extra_rollouts": 3, "match_metrics": None})
    assert (widened.run["extra_rollouts"], widened.run["match_metrics"]) == (3, None)
    with pytest.raises(ValueError, match="credit.extra_rollouts must be an integer >= 0, got -1"):
        validate_credit_config("trace", {"extra_rollouts": -1})


@pytest.mark.parametrize("knobs, level", [({"name": "grpo"}, "token"),
                                          ({"name": "grpo", "ratio_level": "sequence"}, "sequence"),
                                          ({"name": "trace", "ratio_level": "sequence"}, "sequence"),
                                          ({"name": "grpo", "ratio_level": None}, "token")])  # as recorded before
def test_the_ratio_level_is_a_loss_setting(knobs, level):
    assert loss_settings(split_credit_config(knobs))["ratio_level"] == level


def test_extra_rollouts_from_a_prover_runs_metrics(tmp_path):
    from agentcredit.lit.credit_inputs import extra_rollout_phases

    csv_path = tmp_path / "metrics.csv"
    # steps with continuations: 300 and 100 tokens per group; 8 rollouts cost 800 (100 each) → round(200/100) = 2
    csv_path.write_text("step,credit/extra_tokens,credit/group_tokens,val/accuracy\n0,300,800,\n1,100,800,\n1,,,0.5\n")
    assert extra_rollout_phases({"match_metrics": str(csv_path), "extra_rollouts": 5}, 8) == [(0, 2)]
    assert extra_rollout_phases({"extra_rollouts": 3}, 8) == [(0, 3)] and extra_rollout_phases({}, 8) == [(0, 0)]
    # two phases, one step each: round(300/100) = 3 from step 0, round(100/100) = 1 from step 1
    assert extra_rollout_phases({"match_metrics": str(csv_path), "match_phases": 2}, 8) == [(0, 3), (1, 1)]
    with pytest.raises(ValueError, match="credit.match_phases=3 is more than the 2 steps"):
        extra_rollout_phases({"match_metrics": str(csv_path), "match_phases": 3}, 8)
    with pytest.raises(ValueError, match="is not a file"):
        extra_rollout_phases({"match_metrics": str(tmp_path / "none.csv")}, 8)
