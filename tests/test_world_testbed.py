"""The testbed world preset (data=testbed, chosen by model=tiny): relation lines, chain questions, its check,
and its browser view (env=testbed): a fact's value first shows in a find result."""

from __future__ import annotations

import re

from test_scripts import run_json

from agentcredit.common.configs import compose_config
from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.factory import browser_kwargs
from agentcredit.env.retrieval import build_retriever
from agentcredit.testbed.readiness import revealing_turn
from agentcredit.world.config import WorldConfig
from agentcredit.world.generator import generate_world
from agentcredit.world.oracle import solve
from agentcredit.world.sentences import CUES, parse_fact


def shrunk_testbed_world(**knobs):
    world = dict(compose_config(["model=tiny"]).data.world)
    return WorldConfig.from_mapping({**world, "num_documents": 80, "num_questions": 60, **knobs})


def test_model_tiny_selects_the_testbed_world_and_real_models_the_realistic_one():
    assert compose_config([]).data.world.line_style == "relation"
    assert compose_config(["data=default"]).data.world.get("line_style", "sentence") == "sentence"
    assert compose_config(["model=smollm2_135m"]).data.world.get("question_style", "nested") == "nested"


def test_pages_state_each_fact_as_a_cue_line_and_nothing_else():
    world = generate_world(shrunk_testbed_world())
    cue = re.compile(r"^(" + "|".join(map(re.escape, CUES)) + r"): \S")
    for doc in world.documents:
        assert doc.lines[0].startswith(doc.title + " is ")  # the intro
        assert all(cue.match(line) for line in doc.lines[1:]), doc.lines  # no filler, no look-alike lines


def test_bridge_questions_list_their_hops_in_reading_order():
    world = generate_world(shrunk_testbed_world())
    assert {q.template for q in world.questions} == {"BRIDGE_ENTITY"}
    for q in world.questions[:30]:
        program = q.meta["program"]
        hops = [op["rel"] for op in program if op["op"] == "hop"]
        assert 2 <= q.hops <= 3 and len(hops) == q.hops
        assert q.text == program[0]["mention"] + " > " + " > ".join(parse_cue(h) for h in hops) + "?"


def parse_cue(rel):
    from agentcredit.world.sentences import RELATIONS

    return RELATIONS[rel].cue


def test_relation_lines_and_sentences_both_parse():
    assert parse_fact("founder", "founder: Anna Voss") == ("Anna Voss", None)
    assert parse_fact("based_in", "based in: Elmford") == ("Elmford", None)
    assert parse_fact("released", "released: Quiet Harbor (2012)") == ("Quiet Harbor", 2012)
    assert parse_fact("staff", "staff: 35") == ("35", None)
    assert parse_fact("founder", "Its founder is Anna Voss.") == ("Anna Voss", None)
    assert parse_fact("founder", "hometown: Elmford") is None


def test_the_default_styles_leave_the_realistic_world_byte_identical():
    plain = WorldConfig(num_documents=80, num_questions=40)
    explicit = WorldConfig(num_documents=80, num_questions=40, line_style="sentence", question_style="nested")
    assert generate_world(plain).to_json() == generate_world(explicit).to_json()


def test_the_testbed_preset_passes_the_world_check():
    out = run_json("-m", "agentcredit.world.check", "--preset", "testbed", "--n", "40", "--split", "val", "--retriever", "bm25")
    assert out["n"] == 40 and out["oracle_success"] >= 0.95 and out["single_doc_success"] <= 0.05
    assert all(v >= 0.9 for v in out["per_template"].values())


def test_model_tiny_selects_the_testbed_view_and_real_models_the_default_one():
    assert compose_config([]).env.summary_chars == 0 and compose_config([]).env.default_num_lines == 1
    default = compose_config(["env=default"]).env
    assert default.summary_chars == 100 and default.default_num_lines == 12
    assert dict(compose_config(["model=smollm2_135m"]).env) == dict(default)
    assert dict(compose_config(["model=hf"]).env) == dict(default)


def first_sight_tools(env_preset: str) -> list:
    """For the oracle's episodes that see the gold answer: the tool whose observation first shows it."""
    world = generate_world(shrunk_testbed_world())
    corpus = Corpus(world.documents)
    kwargs = browser_kwargs(dict(compose_config([f"env={env_preset}"]).env))
    env = BrowserEnv(corpus, build_retriever("bm25", corpus), **kwargs)
    tools = []
    for q in world.questions[:30]:
        env.reset()
        episode = solve(q, env, topn=3)
        k = revealing_turn(episode.observations, q.answer)
        if k is not None:  # bm25 on this small world misses a few pages; those episodes never see the answer
            tools.append(episode.actions[k].name)
    assert len(tools) >= 20, tools
    return tools


def test_in_the_testbed_view_the_answer_first_shows_in_a_find_result():
    # TRACE's readiness is measured on the turn that first shows the answer; the testbed's policy reads a
    # value from a find line, so that is where the view puts it (in the default view: a search lead)
    testbed, default = first_sight_tools("testbed"), first_sight_tools("default")
    assert testbed.count("browser.find") >= 0.9 * len(testbed), testbed
    assert default.count("browser.find") <= 0.2 * len(default), default
