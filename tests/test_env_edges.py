"""Environment edges (issue 20, item 5): reprs that raise, forged snapshots, huge echoed values."""

from __future__ import annotations

import dataclasses

import pytest

from agentcredit.agent.protocol import MAX_ERROR_CHARS, error_observation, parse_turn
from agentcredit.env.arguments import short_repr
from agentcredit.env.browser import BrowserEnv
from agentcredit.env.corpus import Corpus
from agentcredit.env.types import ToolCall
from agentcredit.world.types import Document


class BadRepr:
    def __init__(self, err: type[BaseException]):
        self.err = err

    def __repr__(self):
        raise self.err("no repr")


class FirstHit:
    def search(self, query: str, topn: int) -> list[int]:
        return [0, 1][:topn]


def make_env() -> BrowserEnv:
    docs = [Document("a", "Alpha", "u://a", ("one", "two")), Document("b", "Beta", "u://b", ("three",))]
    return BrowserEnv(Corpus(docs), FirstHit(), default_topn=2, max_topn=5)


@pytest.mark.parametrize("err", [ValueError, RuntimeError, TypeError, RecursionError, KeyError])
def test_an_argument_whose_repr_raises_gives_an_error_observation(err):
    env = make_env()
    for call in (ToolCall("browser.open", {"id": BadRepr(err)}), ToolCall("browser.search", {"query": BadRepr(err)}),
                 ToolCall("browser.find", {BadRepr(err): "x"})):
        obs = env.step(call)
        assert obs.startswith("Error: ") and len(obs) < 300, obs
    assert env.diagnostics.invalid_calls == 3


def test_short_repr_is_bounded_and_never_raises():
    huge = ["x" * 10**6] * 10**3  # repr would be a billion characters
    assert len(short_repr(huge)) <= 40
    assert short_repr(BadRepr(RuntimeError)).startswith("<BadRepr")
    assert short_repr(10**5000) == "<int too large to show>"


def forged(env: BrowserEnv, **changes):
    snap = env.snapshot()
    diag = changes.pop("diagnostics", {})
    return dataclasses.replace(snap, diagnostics=dataclasses.replace(snap.diagnostics, **diag), **changes)


FORGED = {
    "unknown id in history": ({"history": ("a", "zzz")}, "history names document id"),
    "unknown id in last_results": ({"last_results": ("nope",), "has_searched": True}, "last_results names"),
    "results without a search": ({"last_results": ("a",), "has_searched": False}, "has_searched is False"),
    "history not a tuple": ({"history": ["a"]}, "history must be a tuple"),
    "unknown opened document": ({"diagnostics": {"opened_documents": frozenset({"q"})}}, "opened_documents names"),
    "unknown find document": ({"diagnostics": {"seen_finds": frozenset({("q", "x")})}}, "seen_finds"),
    "unknown tool": ({"diagnostics": {"tool_calls": (("browser.delete", 1), ("browser.open", 0), ("browser.find", 0))}},
                     "tool_calls must count each"),
    "negative count": ({"diagnostics": {"tool_calls": (("browser.search", -1), ("browser.open", 0), ("browser.find", 0))}},
                       "tool_calls must count each"),
    "negative counter": ({"diagnostics": {"invalid_calls": -2}}, "invalid_calls must be an integer >= 0"),
    "bool counter": ({"diagnostics": {"repeated_finds": True}}, "repeated_finds must be an integer >= 0"),
    "not a snapshot": (None, "needs an EnvSnapshot"),
}


@pytest.mark.parametrize("case", FORGED)
def test_restore_rejects_a_snapshot_the_corpus_could_not_produce(case):
    changes, message = FORGED[case]
    env = make_env()
    env.step(ToolCall("browser.search", {"query": "q"}))
    good = env.snapshot()
    bad = {"x": 1} if changes is None else forged(env, **changes)
    with pytest.raises(ValueError, match=message):
        env.restore(bad)
    env.restore(good)  # a real snapshot still round-trips
    assert env.snapshot() == good
    assert env.step(ToolCall("browser.open", {"id": 1})).startswith("[cursor 0] Beta")


HUGE = 8_000_000


@pytest.mark.parametrize("turn", [
    '<tool_call>{"name": "' + "n" * HUGE + '", "arguments": {}}</tool_call>',
    '<tool_call>{"name": ["' + "n" * HUGE + '"], "arguments": {}}</tool_call>',
    '<tool_call>{"name": {"k": "' + "n" * HUGE + '"}, "arguments": {}}</tool_call>',
    '<tool_call>{"name": ' + "[" * 50 + "1" + "]" * 50 + ', "arguments": {}}</tool_call>',
    '<tool_call>' + "{" * HUGE + '</tool_call>',
])
def test_error_observations_echo_capped_values(turn):
    parsed = parse_turn(turn)
    assert parsed.kind == "invalid"
    obs = error_observation(parsed.error)
    assert len(obs) <= MAX_ERROR_CHARS + 200, len(obs)


def test_error_observation_caps_any_error_text():
    assert len(error_observation("e" * 10**6)) <= MAX_ERROR_CHARS + 200
    assert error_observation("short") .startswith("Error: short. ")


def test_browser_error_observations_stay_short_for_huge_arguments():
    env = make_env()
    calls = [ToolCall("browser.search", {"query": "q" * HUGE}), ToolCall("browser.open", {"id": ["x"] * HUGE}),
             ToolCall("browser.find", {"pattern": ["p" * HUGE]}), ToolCall("browser.open", {"n" * HUGE: 1}),
             ToolCall(["browser.open"] * 1000, {})]
    for call in calls:
        assert len(env.step(call)) < 400
