"""testbed.oracle_queries.oracle_query_agreement: how far rollouts follow the oracle's searches, on replayed episodes."""

import pytest
from tiny_runs import TINY

from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.agent.rollout import RolloutWorker
from agentcredit.run.compose import build_components
from agentcredit.common.configs import compose_config
from agentcredit.env.types import ToolCall
from agentcredit.testbed.oracle_queries import oracle_query_agreement, searched_queries
from agentcredit.world.oracle import solve

SMALL_WORLD = ["data.world.num_documents=80", "data.world.num_questions=60",
               "rollout.max_tool_turns=40", "rollout.max_turn_tokens=256", "rollout.max_obs_tokens=4096"]


@pytest.fixture(scope="module")
def replayed():
    components = build_components(compose_config([*TINY, *SMALL_WORLD]))
    worker = RolloutWorker(None, components.chat, components.env_factory, components.reward_fn, components.rollout_cfg)
    found = []
    for question in components.datamodule.split_questions("train"):
        env = components.env_factory()
        env.reset()
        episode = solve(question, env, use_find=True, topn=3)
        queries = [a.arguments["query"] for a in episode.actions if a.name == "browser.search"]
        if len(queries) >= 2:
            found.append((question, episode, queries))
        if len(found) == 2:
            break
    assert len(found) == 2, "the small world should have two questions with two or more searches"
    return components, worker, found


def test_the_oracles_own_episodes_agree_fully_and_a_wrong_start_not_at_all(replayed):
    components, worker, found = replayed
    (q1, e1, queries1), (q2, _, queries2) = found
    oracle_turns = [render_tool_call(a) for a in e1.actions] + [render_answer(e1.answer)]
    followed = worker.replay(q1, oracle_turns)
    assert searched_queries(followed) == queries1
    lost = worker.replay(q2, [render_tool_call(ToolCall("browser.search", {"query": "no such page"})), render_answer("x")])
    assert searched_queries(lost) == ["no such page"]

    assert oracle_query_agreement([followed], [q1], components.env_factory) == {
        "first_query": 1.0, "later_queries": 1.0, "later_query_count": len(queries1) - 1}
    both = oracle_query_agreement([followed, lost], [q1, q2], components.env_factory)
    later = len(queries1) - 1 + len(queries2) - 1
    assert both == {"first_query": 0.5, "later_queries": (len(queries1) - 1) / later, "later_query_count": later}


def test_a_later_query_counts_wherever_it_comes_and_malformed_turns_are_skipped(replayed):
    components, worker, found = replayed
    question, _, queries = found[0]
    # The right first query, a malformed call, then the oracle's second query: one of its later queries.
    turns = [render_tool_call(ToolCall("browser.search", {"query": queries[0]})), "<tool_call>{not json</tool_call>",
             render_tool_call(ToolCall("browser.search", {"query": queries[1]})), render_answer("x")]
    trajectory = worker.replay(question, turns)
    assert searched_queries(trajectory) == [queries[0], queries[1]]
    result = oracle_query_agreement([trajectory], [question], components.env_factory)
    assert result["first_query"] == 1.0
    assert result["later_queries"] == pytest.approx(1 / (len(queries) - 1))
