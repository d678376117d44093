"""Rule-based judges (random, heuristic) and building judges from conf/judge/*.yaml."""

from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentcredit.credit.prover import validate_segment
from agentcredit.judge import AgenticJudge, HeuristicJudge, JudgeError, RandomJudge, build_judge, build_judge_context
from agentcredit.judge.context import TurnView
from agentcredit.judge.heuristic import heuristic_segment, turn_key
from judge_fixtures import (QUESTION, error_traj, expert_traj, failed_traj, make_traj, open_result, page, results,
                            search)

CONF = Path(__file__).resolve().parents[1] / "conf" / "judge"


def group_context(*trajectories, max_len=4):
    return build_judge_context(list(trajectories), QUESTION.text, chosen=0, max_segment_turns=max_len,
                               success_threshold=1.0)


# ---------------------------------------------------------------- random


def test_random_paper_mode_draws_start_and_length_uniformly():
    context = group_context(expert_traj(), failed_traj())  # expert: 6 recorded turns (T = 5), max_len 4
    judge = RandomJudge(seed=3, mode="paper")
    draws = [judge.propose(context) for _ in range(4800)]
    counts = Counter((p.start, p.end - p.start + 1) for p in draws)
    assert set(counts) == {(s, n) for s in range(6) for n in range(1, 5)}  # 24 equally likely pairs
    assert all(abs(c / 4800 - 1 / 24) < 0.015 for c in counts.values())
    valid = sum(validate_segment(p.start, p.end, 5, 4) is None for p in draws)
    assert abs(valid / 4800 - 14 / 24) < 0.03  # 14 of the 24 pairs are valid segments


def test_random_judge_is_reproducible_and_paper_mode_discards_invalid_draws():
    context = group_context(expert_traj(), failed_traj())
    a, b = RandomJudge(seed=7), RandomJudge(seed=7)
    assert [(p.start, p.end) for p in (a.propose(context) for _ in range(20))] == \
           [(p.start, p.end) for p in (b.propose(context) for _ in range(20))]
    with pytest.raises(JudgeError, match="discarded"):
        a.correct(context, a.propose(context), "segment_end_turn 5 is the final (terminal) turn")


def test_random_valid_mode_is_uniform_over_valid_segments():
    context = group_context(expert_traj(), failed_traj())
    judge = RandomJudge(seed=0, mode="valid")
    draws = [judge.propose(context) for _ in range(2800)]
    counts = Counter((p.start, p.end) for p in draws)
    assert len(counts) == 14 and all(validate_segment(s, e, 5, 4) is None for s, e in counts)
    assert all(abs(c / 2800 - 1 / 14) < 0.025 for c in counts.values())
    assert validate_segment(*(lambda p: (p.start, p.end))(judge.correct(context, draws[0], "x")), 5, 4) is None
    no_tools = group_context(make_traj([], "<answer>x</answer>", 1.1), failed_traj())
    with pytest.raises(JudgeError, match="no tool turn"):
        judge.propose(no_tools)


def test_random_judge_rejects_unknown_mode():
    with pytest.raises(ValueError, match="judge.mode='uniform'"):
        RandomJudge(mode="uniform")


# ---------------------------------------------------------------- heuristic


def test_turn_keys():
    assert turn_key(TurnView(0, open_result(1), page("Ada Fenn", 3))) == ("page", "https://w/ada-fenn")
    assert turn_key(TurnView(0, search("  Korvel MAYOR? "), results("Korvel"))) == ("query", "korvel mayor")
    assert turn_key(TurnView(0, '<tool_call>{"name": "browser.find", "arguments": {"pattern": "x"}}</tool_call>',
                             "No match for \"x\" in [cursor 0] Korvel (1 lines).")) is None
    assert turn_key(TurnView(0, open_result(9), "Error: id 9 is out of range")) is None
    assert turn_key(TurnView(0, "<answer>x</answer>", None)) is None


def test_heuristic_picks_the_first_novel_page_and_the_novel_search_before_it():
    # Expert: 0 search (shared), 1 open Lena Marsh (shared), 2 search "Korvel mayor" (novel),
    # 3 open Ada Fenn (novel page), 4 open Korvel (shared) → [2, 3].
    context = group_context(expert_traj(), failed_traj(), error_traj())
    proposal = HeuristicJudge().propose(context)
    assert (proposal.start, proposal.end) == (2, 3)
    assert heuristic_segment(context.expert, set(), max_len=4)[1] == 1  # no failures: the first page opened
    assert heuristic_segment(context.expert, {("query", "painter lena marsh")}, max_len=1) == (1, 1)
    with pytest.raises(JudgeError, match="deterministic"):
        HeuristicJudge().correct(context, proposal, "turn 3 is bad")


def test_heuristic_falls_back_to_novel_search_then_last_successful_turn():
    saw_mayor = make_traj([(open_result(1), page("Ada Fenn"))], "<answer>no</answer>", 0.1)
    proposal = HeuristicJudge().propose(group_context(expert_traj(), failed_traj(), saw_mayor))
    assert (proposal.start, proposal.end) == (2, 2)  # no novel page; first novel search
    searched_too = make_traj([(search("korvel  Mayor"), results("Korvel"))], "<answer>no</answer>", 0.1)
    proposal = HeuristicJudge().propose(group_context(expert_traj(), failed_traj(), saw_mayor, searched_too))
    assert (proposal.start, proposal.end) == (4, 4)  # nothing novel: the last successful tool turn
    ends_in_error = make_traj([(search("x"), results("A")), (open_result(5), "Error: id 5 is out of range")],
                              "<answer>A</answer>", 1.1)
    proposal = HeuristicJudge().propose(group_context(ends_in_error, make_traj([(search("x"), results("A"))], None, 0.0)))
    assert (proposal.start, proposal.end) == (0, 0)
    with pytest.raises(JudgeError, match="no tool turn"):
        HeuristicJudge().propose(group_context(make_traj([], "<answer>x</answer>", 1.1), failed_traj()))


# ---------------------------------------------------------------- configs


@pytest.mark.parametrize("kind", ["random", "heuristic", "openai", "local"])
def test_every_judge_config_starts_with_its_command_and_selects_its_kind(kind):
    path = CONF / f"{kind}.yaml"
    first = path.read_text().splitlines()[0]
    assert first.startswith("#") and f"judge={kind}" in first and "python train.py" in first
    assert OmegaConf.load(path).kind == kind


def load(kind, **overrides):
    return {**OmegaConf.to_container(OmegaConf.load(CONF / f"{kind}.yaml")), **overrides}


def test_build_judge_from_configs(monkeypatch):
    assert isinstance(build_judge(load("random")), RandomJudge)
    assert isinstance(build_judge(load("heuristic")), HeuristicJudge)
    monkeypatch.setenv("AGENTCREDIT_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("AGENTCREDIT_JUDGE_MODEL", "judge-model")
    judge = build_judge(load("openai", max_tool_rounds=2))
    assert isinstance(judge, AgenticJudge) and judge.max_tool_rounds == 2
    assert judge.backend.model == "judge-model" and str(judge.backend.client.base_url).startswith("http://127.0.0.1:9")
    assert build_judge(load("openai", model="other")).backend.model == "other"  # config beats environment


def test_build_judge_errors_say_what_to_do(monkeypatch):
    monkeypatch.delenv("AGENTCREDIT_JUDGE_MODEL", raising=False)
    monkeypatch.delenv("AGENTCREDIT_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("AGENTCREDIT_JUDGE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="judge.kind='oracle' is not known"):
        build_judge({"kind": "oracle"})
    with pytest.raises(ValueError, match="judge=random does not take temperature"):
        build_judge(load("random", temperature=1.0))
    with pytest.raises(ValueError, match="set AGENTCREDIT_JUDGE_MODEL"):
        build_judge(load("openai"))
    with pytest.raises(ValueError, match="needs an endpoint"):
        build_judge(load("openai", model="m"))
    with pytest.raises(ValueError, match="judge=openai does not take seed"):
        build_judge(load("openai", model="m", base_url="http://127.0.0.1:9/v1", seed=1))
    with pytest.raises(ValueError, match="judge.model.kind must be one of"):
        build_judge(load("local", model={"kind": "tiny"}))
