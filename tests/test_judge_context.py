"""Judge context, the two trajectory tools, the prompt and reading the judge's answer."""

import json
import math

import pytest

from agentcredit.judge.base import parse_proposal
from agentcredit.judge.context import build_judge_context
from agentcredit.judge.prompt import correction_message, system_message, user_message
from agentcredit.judge.tools import get_segment, run_tool, search_trajectory
from judge_fixtures import QUESTION, error_traj, expert_traj, failed_traj


@pytest.fixture
def context():
    return build_judge_context([expert_traj(), failed_traj(), error_traj()], QUESTION.text, chosen=0,
                               max_segment_turns=4, success_threshold=1.0)


def test_context_turns_and_roles(context):
    expert = context.expert
    assert expert.traj_id == 0 and expert.success and expert.num_tool_turns == 5
    assert len(expert.turns) == 6 and expert.turns[5].is_final and not expert.turns[4].is_final
    assert [r.traj_id for r in context.failed] == [1, 2]
    error = context.rollout(2)
    assert error.turns[0].failed and not error.turns[1].failed
    assert error.last_turn == 1 and error.num_tool_turns == 2  # gave up: no final turn
    with pytest.raises(KeyError, match="traj_id 3"):
        context.rollout(3)


def test_search_scores_are_idf_weighted_overlap(context):
    # Six searchable turns (4 of rollout 1, 2 of rollout 2). "korvel" occurs in rollout 1's turns 0, 2
    # and 3 (df 3); "trust" in rollout 1's turn 3 and rollout 2's turn 1 (df 2).
    hits = search_trajectory(context, "Korvel trust", k=3)
    assert [(h["traj_id"], h["turn"]) for h in hits] == [(1, 3), (2, 1), (1, 0)]
    assert hits[0]["score"] == pytest.approx(math.log(1 + 6 / 3) + math.log(1 + 6 / 2), abs=1e-4)
    assert hits[1]["score"] == pytest.approx(math.log(4), abs=1e-4)
    assert hits[2]["score"] == pytest.approx(math.log(3), abs=1e-4)
    assert hits[0]["final"] is True and "observation" not in hits[0]
    # The expert is not searched (it is shown in full); no overlap gives nothing.
    assert all(h["traj_id"] != 0 for h in search_trajectory(context, "Ada Fenn mayor", k=10))
    assert search_trajectory(context, "zebra", k=5) == []


def test_search_previews_are_bounded(context):
    hits = search_trajectory(context, "Korvel", k=10, preview_chars=20)
    assert all(len(h["observation"]) <= 20 for h in hits if "observation" in h)
    assert any(h.get("observation", "").endswith("…") for h in hits)


def test_get_segment_returns_turns_with_earlier_context(context):
    seg = get_segment(context, traj_id=1, start_turn=1, end_turn=2)
    assert seg["question"] == QUESTION.text and seg["success"] is False
    assert len(seg["earlier_actions"]) == 1 and "painter Lena Marsh" in seg["earlier_actions"][0]
    assert [t["turn"] for t in seg["turns"]] == [1, 2]
    assert seg["turns"][1]["observation"].startswith("[cursor 1] Korvel")
    capped = get_segment(context, traj_id=0, start_turn=0, end_turn=5, max_turns=2)
    assert [t["turn"] for t in capped["turns"]] == [0, 1] and "from turn 2" in capped["note"]
    with pytest.raises(ValueError, match="end_turn <= 3"):
        get_segment(context, traj_id=1, start_turn=2, end_turn=4)


def test_run_tool_reports_bad_input_as_text(context):
    ok = json.loads(run_tool(context, "get_segment", '{"traj_id": 0, "start_turn": "3", "end_turn": 3}'))
    assert ok["turns"][0]["observation"].startswith("[cursor 1] Ada Fenn")
    assert run_tool(context, "get_segment", '{"traj_id": 9, "start_turn": 0, "end_turn": 0}').startswith("Error: traj_id 9")
    assert run_tool(context, "get_segment", '{"traj_id": 0, "start_turn": 0}').startswith("Error: argument end_turn")
    assert run_tool(context, "search_trajectory", "{not json").startswith("Error: arguments of search_trajectory")
    assert run_tool(context, "search_trajectory", '{"query": ""}').startswith("Error: argument query")
    assert run_tool(context, "open_page", "{}").startswith("Error: unknown tool 'open_page'")
    assert json.loads(run_tool(context, "search_trajectory", {"query": "zebra"}))["results"] == []


def test_prompt_states_the_bounds_and_shows_the_group(context):
    system = system_message(context)["content"]
    assert "At most 4 turns" in system and "segment_end_turn <= 4" in system and "turn 5, the answer" in system
    payload = json.loads(user_message(context, preview_turns=2)["content"])
    assert payload["task"] == QUESTION.text
    assert payload["expert"]["final_turn"] == 5 and len(payload["expert"]["turns"]) == 6
    index = payload["failed_trajectory_indexes"]
    assert [(f["traj_id"], f["start_turn"], f["end_turn"]) for f in index] == [(1, 0, 3), (2, 0, 1)]
    assert all(len(f["first_actions"]) <= 2 for f in index)
    assert "rejected: end too late" in correction_message("end too late")["content"]


@pytest.mark.parametrize("text, start, end", [
    ('{"segment_start_turn": 2, "segment_end_turn": 3, "rationale": "opens the mayor"}', 2, 3),
    ('```json\n{"segment_start_turn": 1, "segment_end_turn": 1, "rationale": "x"}\n```', 1, 1),
    ('Here it is: {"segment_start_turn": 0, "segment_end_turn": 2} done', 0, 2),
    ('{"segment_start_turn": "2", "segment_end_turn": 3.5}', "2", 3.5),  # read as written; validation rejects
])
def test_parse_proposal_reads_the_answer(text, start, end):
    proposal = parse_proposal(text)
    assert (proposal.start, proposal.end, proposal.problem) == (start, end, None)


@pytest.mark.parametrize("text, problem", [
    ("", "empty"),
    (None, "empty"),
    ("the segment is turns 2 to 3", "not valid JSON"),
    ('{"segment_start_turn": 2,', "not valid JSON"),
    ("[2, 3]", "must be a JSON object"),
    ('{"segment_start_turn": 2}', "lacks segment_end_turn"),
])
def test_parse_proposal_explains_what_is_wrong(text, problem):
    proposal = parse_proposal(text)
    assert proposal.start is None and problem in proposal.problem
