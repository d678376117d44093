"""snapshot()/restore(): replaying the same calls from a restored snapshot reproduces every
observation and every diagnostic, however often, in whichever env over the same corpus."""

import pickle
import random

import pytest

from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import BM25Retriever
from agentcredit.env.types import ToolCall
from agentcredit.world.types import Document

WORDS = "river castle museum founded album director harbour rail bridge festival".split()


def random_corpus(seed: int, n_docs: int = 8) -> Corpus:
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        lines = tuple(" ".join(rng.choices(WORDS, k=rng.randint(3, 7))) + "." for _ in range(rng.randint(0, 25)))
        docs.append(Document(f"doc{i}", f"{rng.choice(WORDS).title()} {i}", f"https://w/{i}", lines))
    return Corpus(docs)


def random_call(rng: random.Random) -> ToolCall:
    """Mostly valid calls, with out-of-range indices and the odd malformed one mixed in."""
    kind = rng.random()
    if kind < 0.3:
        args = {"query": " ".join(rng.choices(WORDS + ["zzz"], k=rng.randint(1, 3)))}
        if rng.random() < 0.5:
            args["topn"] = rng.randint(1, 5)
        return ToolCall("browser.search", args)
    if kind < 0.65:
        args = {"id": rng.randint(-1, 5)}
        if rng.random() < 0.5:
            args["loc"] = rng.randint(-1, 30)
        if rng.random() < 0.3:
            args["num_lines"] = rng.choice([-1, 1, 3, 12])
        return ToolCall("browser.open", args)
    if kind < 0.9:
        args = {"pattern": rng.choice(WORDS + ["(", "a.b", "RIVER"])}
        if rng.random() < 0.4:
            args["cursor"] = rng.randint(-1, 4)
        return ToolCall("browser.find", args)
    return ToolCall(rng.choice(["browser.open", "browser.nope"]), {"id": rng.choice(["1", None, 2.0])})


def play(env: BrowserEnv, calls) -> list:
    """Observation and diagnostics after every call, plus the browsing state at the end."""
    trace = [(env.step(call), env.diagnostics.as_dict()) for call in calls]
    return trace + [(env.current_doc_id, env.last_results, env.page_history)]


@pytest.fixture(scope="module")
def corpus():
    return random_corpus(0)


@pytest.fixture(scope="module")
def retriever(corpus):
    return BM25Retriever(corpus)


def test_restore_and_replay_is_identical_over_many_random_sequences(corpus, retriever):
    for seed in range(250):
        rng = random.Random(seed)
        env = BrowserEnv(corpus, retriever, default_num_lines=5)
        play(env, [random_call(rng) for _ in range(rng.randint(0, 10))])
        snap = env.snapshot()
        suffix = [random_call(rng) for _ in range(rng.randint(1, 15))]
        first = play(env, suffix)

        env.restore(snap)
        assert play(env, suffix) == first, f"seed {seed}: replay after restore differs"
        env.restore(snap)
        assert play(env, suffix) == first, f"seed {seed}: second replay differs"
        other = BrowserEnv(corpus, retriever, default_num_lines=5)
        other.restore(pickle.loads(pickle.dumps(snap)))
        assert play(other, suffix) == first, f"seed {seed}: replay in a fresh env from a pickled snapshot differs"


def test_snapshot_is_not_changed_by_later_steps(corpus, retriever):
    env = BrowserEnv(corpus, retriever)
    env.step(ToolCall("browser.search", {"query": "river"}))
    env.step(ToolCall("browser.open", {"id": 0}))
    snap = env.snapshot()
    copy = pickle.loads(pickle.dumps(snap))
    env.step(ToolCall("browser.search", {"query": "river"}))
    env.step(ToolCall("browser.open", {"id": 1}))
    env.diagnostics.record_answer(False)
    assert snap == copy
    env.restore(snap)
    assert env.snapshot() == copy
    assert env.diagnostics.as_dict()["answer_well_formed"] is None


def test_restore_after_reset_returns_to_the_snapshot(corpus, retriever):
    env = BrowserEnv(corpus, retriever)
    env.step(ToolCall("browser.search", {"query": "museum"}))
    snap = env.snapshot()
    env.reset()
    assert env.last_results == ()
    env.restore(snap)
    assert env.last_results == snap.last_results and env.diagnostics.as_dict()["tool_calls"]["browser.search"] == 1


def test_restore_refuses_a_snapshot_from_another_corpus(corpus, retriever):
    snap = BrowserEnv(corpus, retriever).snapshot()
    other_corpus = random_corpus(1)
    other = BrowserEnv(other_corpus, BM25Retriever(other_corpus))
    with pytest.raises(ValueError, match="different corpus"):
        other.restore(snap)
