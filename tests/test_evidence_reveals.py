"""What a tool call showed (env/reveals.py) and the evidence events built from it (agent/evidence.py), on real
browser observations: hand-made pages, and the oracle's episodes in a small testbed world."""

import pytest
import torch

from test_env_browser import DOCS, FixedRetriever, find, open_, search

from agentcredit.agent.evidence import measure_evidence, rollout_events
from agentcredit.agent.protocol import render_tool_call
from agentcredit.agent.trajectory import Trajectory
from agentcredit.common.configs import compose_config, plain
from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import build_retriever
from agentcredit.env.reveals import shown
from agentcredit.env.types import ToolCall
from agentcredit.lit.credit_inputs import INPUT_BUILDERS, InputRequest
from agentcredit.world.config import WorldConfig
from agentcredit.world.generator import generate_world
from agentcredit.world.oracle import solve
from agentcredit.world.types import Evidence, Question

CORPUS = Corpus(DOCS)


def _env(**kw):
    return BrowserEnv(CORPUS, FixedRetriever([0, 1, 2, 3]), default_num_lines=12, **kw)


def _step(env, call):
    observation = env.step(call)
    return observation, shown(call, observation, env.snapshot(), CORPUS)


def test_search_shows_result_pages_and_the_leading_lines_its_summaries_show_whole():
    _, screen = _step(_env(), search("q"))
    assert screen.results == ("volcano", "ada", "long", "empty")
    # Kilimanjaro: "…Its summit is Uhuru Peak. The crater (a.k.a. Kibo)…": lines 0, 1 whole, line 2 cut.
    # Ada: both lines whole. Harbour Ledger: "Harbour entry 0. … Harbour entry 4. Harbour entry…": 0..4 whole.
    assert screen.lines == {("volcano", 0), ("volcano", 1), ("ada", 0), ("ada", 1), *(("long", n) for n in range(5))}


def test_open_shows_its_window_and_find_only_the_matches_it_prints():
    env = _env(max_find_matches=2)
    env.step(search("q"))
    _, screen = _step(env, open_(id=2))  # default window: L0..L11
    assert screen.lines == {("long", n) for n in range(12)} and screen.results == ()
    _, screen = _step(env, open_(loc=12, num_lines=3))  # a re-read of the current page: cursor 1
    assert screen.lines == {("long", 12), ("long", 13), ("long", 14)}
    observation, screen = _step(env, find("Harbour"))  # 30 matches, 2 printed, "28 more at L2, …" not shown
    assert "28 more at L2" in observation and screen.lines == {("long", 0), ("long", 1)}
    env.step(search("q"))
    env.step(open_(id=0))  # cursor 2: the volcano page
    _, screen = _step(env, find("harbour entry 2", cursor=1))  # an older cursor: L2, L20..L29 match, 2 printed
    assert screen.lines == {("long", 2), ("long", 20)}
    _, screen = _step(env, find("PEAK"))  # cursor -1: the volcano page, L1 and L3
    assert screen.lines == {("volcano", 1), ("volcano", 3)}


def test_errors_misses_and_non_calls_show_nothing():
    env = _env()
    assert _step(env, open_(id=0))[1].units() == frozenset()  # "Error: there is no search …"
    env.step(search("q"))
    env.step(open_(id=0))
    assert _step(env, find("zzz"))[1].units() == frozenset()  # "No match for …"
    assert _step(env, ToolCall("browser.fly", {}))[1].units() == frozenset()
    assert shown(None, "[cursor 0] Mount Kilimanjaro (https://w/kili)\nL0: x", env.snapshot(), CORPUS).units() == frozenset()


def test_an_observation_in_another_format_is_an_error_not_silence():
    env = _env()
    env.step(search("q"))
    observation = env.step(open_(id=0))  # "[cursor 0] Mount Kilimanjaro …"
    later = env.snapshot()
    env.step(open_(id=1))
    with pytest.raises(ValueError, match=r"should start with '\[cursor 1\] '"):
        shown(open_(id=0), observation, env.snapshot(), CORPUS)  # a snapshot two cursors long
    with pytest.raises(ValueError, match="has 4 lines"):
        shown(open_(id=0), observation + "\nL9: made up", later, CORPUS)


def _trajectory(env, calls, finish_reason="answer"):
    """A rollout's record of `calls` played in `env` (tokens left out: the events read text and snapshots)."""
    snapshots, observations = [env.snapshot()], []
    for call in calls:
        observations.append(env.step(call))
        snapshots.append(env.snapshot())
    return Trajectory(question_id="q", input_ids=[], loss_mask=[], turn_ids=[], boundaries=list(range(len(calls) + 1)),
                      snapshots=snapshots, old_logprobs=[], turn_texts=[render_tool_call(c) for c in calls] + ["<answer>x"],
                      observations=observations, finish_reason=finish_reason)


def test_events_count_first_reveals_and_redundancy():
    needed = frozenset({("ada", 1), ("long", 13), ("volcano", 3)})
    calls = [search("q"), open_(id=2, num_lines=3), open_(id=2, num_lines=3), open_(loc=12, num_lines=3), find("Peak")]
    events = rollout_events(_trajectory(_env(), calls), needed, CORPUS)
    # turn 0: the search shows ada L1 whole → 1/3; its 4 pages and 9 summary lines are all new → P = 0
    # turn 1: L0..L2 of the ledger, all in the search's summary → gain 0, P = 3/3
    # turn 2: the same three lines again → gain 0, P = 1
    # turn 3: L12..L14 → long 13 first shown: 1/3, P = 0
    # turn 4: find "Peak" on the ledger (the current page): no match → nothing, P = 0
    assert torch.allclose(events, torch.tensor([[1 / 3, 0.0], [0.0, 1.0], [0.0, 1.0], [1 / 3, 0.0], [0.0, 0.0]]))


def test_a_truncated_last_observation_shows_nothing():
    needed = frozenset({("long", 13)})
    calls = [search("q"), open_(id=2, loc=12, num_lines=3)]
    assert rollout_events(_trajectory(_env(), calls), needed, CORPUS)[:, 0].tolist() == [0.0, 1.0]
    cut = _trajectory(_env(), calls, finish_reason="obs_budget")
    assert rollout_events(cut, needed, CORPUS)[:, 0].tolist() == [0.0, 0.0]


class _Worker:
    """What the evidence builder reads of the rollout worker: its environment factory (for the corpus)."""

    def __init__(self, corpus):
        self.env_factory = lambda: BrowserEnv(corpus, build_retriever("bm25", corpus))


@pytest.fixture(scope="module")
def testbed():
    world_cfg = plain(compose_config(["data=testbed"]).data)["world"]
    world = generate_world(WorldConfig.from_mapping({**world_cfg, "num_documents": 60, "num_questions": 20}))
    return world, Corpus(world.documents)


def test_the_oracle_reveals_every_needed_fact_of_the_questions_it_answers(testbed):
    world, corpus = testbed
    solved = 0
    for question in world.questions:
        env = BrowserEnv(corpus, build_retriever("bm25", corpus))
        episode = solve(question, env)
        if episode.answer != question.answer:
            continue
        solved += 1
        trajectory = _trajectory(BrowserEnv(corpus, build_retriever("bm25", corpus)), episode.actions)
        assert trajectory.observations == episode.observations  # the replay is the oracle's episode
        (events,), logs = INPUT_BUILDERS["evidence"](InputRequest([trajectory], question, _Worker(corpus), {}, None,
                                                                  "gold-evidence"))
        assert events[:, 0].sum().item() == pytest.approx(1.0)  # every needed fact, each counted once
        for k in torch.nonzero(events[:, 0]).flatten().tolist():
            assert episode.actions[k].name in ("browser.search", "browser.open", "browser.find")
        assert logs["extra_tokens"] == 0.0 and logs["time/evidence_s"] >= 0
    assert solved >= 15  # the oracle answers nearly all of the world


def test_a_question_without_needed_facts_is_refused(testbed):
    _, corpus = testbed
    bare = Question("u1", "Who?", "x", "USER")
    with pytest.raises(ValueError, match="needs the facts question 'u1' rests on, and it has none"):
        measure_evidence([], bare, corpus)
    assert measure_evidence([], Question("u2", "Who?", "x", "USER", evidence=(Evidence("d", 0),)), corpus)[0] == []
