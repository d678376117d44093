"""The oracle solves the world through BrowserEnv calls only, from visible text only."""

from __future__ import annotations

import json

import pytest

from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import build_retriever
from agentcredit.world import check
from agentcredit.world.config import TEMPLATES, WorldConfig
from agentcredit.world.generator import generate_world
from agentcredit.world.oracle import SEARCH_TOPN, solve
from agentcredit.world.sentences import CUES
from agentcredit.world.types import Question


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(seed=7, num_documents=100, num_questions=100))


@pytest.fixture(scope="module")
def bm25_env(world):
    corpus = Corpus(world.documents)
    return BrowserEnv(corpus, build_retriever("bm25", corpus))


def test_oracle_solves_the_world_with_bm25(world):
    result = check.check_world(world, world.questions, "bm25")
    assert result["n"] == 100
    assert result["oracle_success"] >= 0.95
    assert set(result["per_template"]) == set(TEMPLATES)
    assert min(result["per_template"].values()) >= 0.9
    assert result["single_doc_success"] <= 0.1
    assert result["mean_tool_calls"] >= 4


def test_oracle_solves_a_sample_with_dense_retrieval(tmp_path):
    small = generate_world(WorldConfig(seed=2, num_documents=60, num_questions=25))
    result = check.check_world(small, small.questions, "dense", cache_dir=tmp_path)
    assert result["oracle_success"] >= 0.9 and result["single_doc_success"] <= 0.2


def test_every_string_the_oracle_sends_was_visible(world, bm25_env):
    for q in world.questions[:40]:
        bm25_env.reset()
        episode = solve(q, bm25_env)
        seen = q.text
        last_results = 0
        for call, obs in zip(episode.actions, episode.observations):
            args = call.arguments
            if call.name == "browser.search":
                assert args["query"] in seen and args["topn"] == SEARCH_TOPN
                last_results = obs.count("\n[")
            elif call.name == "browser.open":
                assert 0 <= args["id"] < last_results
            else:
                assert call.name == "browser.find" and args["pattern"] in CUES
            assert not obs.startswith("Error"), (call, obs)
            seen += "\n" + obs
        assert episode.answer in seen  # the answer was read, never taken from the question record


def test_reading_off_the_open_page_saves_the_finds(world, bm25_env):
    for q in world.questions[:30]:
        bm25_env.reset()
        with_find = solve(q, bm25_env)
        bm25_env.reset()
        without = solve(q, bm25_env, use_find=False)
        assert without.answer == with_find.answer == q.answer
        finds = sum(c.name == "browser.find" for c in with_find.actions)
        assert len(without.actions) == len(with_find.actions) - finds + sum(c.name == "browser.find" for c in without.actions)
        assert len(without.actions) < len(with_find.actions)


def test_one_page_budget(world, bm25_env):
    for q in world.questions[:20]:
        bm25_env.reset()
        episode = solve(q, bm25_env, max_docs_opened=1)
        opens = [c for c in episode.actions if c.name == "browser.open"]
        assert len(opens) <= 1 and episode.docs_opened <= 1
        assert episode.out_of_budget  # every question needs a second page


def test_user_questions_are_refused(bm25_env):
    with pytest.raises(ValueError, match="no program"):
        solve(Question("u1", "Who?", "x", "USER"), bm25_env)


def test_plan_must_name_what_the_question_says(world, bm25_env):
    q = world.questions[0]
    reworded = Question(q.id, "A question that names nothing?", q.answer, q.template, q.evidence, q.hops,
                        q.anchor, q.meta)
    with pytest.raises(ValueError, match="does not contain"):
        solve(reworded, bm25_env)


def test_check_cli_prints_one_json_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path))
    check.main(["--n", "6", "--split", "val", "--retriever", "bm25", "--num-documents", "80",
                "--num-questions", "60"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert set(result) == {"n", "oracle_success", "per_template", "single_doc_success", "mean_tool_calls",
                           "max_tool_calls"}
    assert result["n"] == 6
