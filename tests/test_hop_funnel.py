"""testbed.hop_funnel: at which stage of which hop a rollout's chain first breaks, counted by hand."""

from agentcredit.agent.trajectory import Trajectory
from agentcredit.testbed.hop_funnel import hop_chain, hop_funnel, hop_stages, saw_fact
from agentcredit.world.types import Question

# "Crimson Compass > creator > employer?": creator Elsa Keller, whose employer is Cobalt Devices.
QUESTION = Question("q1", "Crimson Compass > creator > employer?", "Cobalt Devices", "BRIDGE_ENTITY", hops=2,
                    meta={"program": [{"op": "entity", "id": "w1"}, {"op": "hop", "rel": "creator"},
                                      {"op": "hop", "rel": "employer"}]})
ORACLE = ["Crimson Compass", "Elsa Keller"]
CHAIN = [("Crimson Compass", "creator", "Elsa Keller"), ("Elsa Keller", "employer", "Cobalt Devices")]


def search(query: str) -> str:
    return f'Then: x.\n<tool_call>{{"name": "browser.search", "arguments": {{"query": "{query}", "topn": 3}}}}</tool_call>'


def rollout(turns: list[str], observations: list[str], answer: str | None) -> Trajectory:
    return Trajectory("q1", [], [], [], [], [], [], turn_texts=turns, observations=observations, answer=answer)


FIND_CREATOR = '1 match for "creator" in [cursor 0] Crimson Compass:\nL3: creator: Elsa Keller'
FIND_EMPLOYER = '1 match for "employer" in [cursor 0] Elsa Keller:\nL2: employer: Cobalt Devices'
# every stage of both hops passes: search, see, copy; search, see, answer
SOLVED = rollout([search("Crimson Compass"), "find", "creator: Elsa Keller\n" + search("Elsa Keller"), "find",
                  "<answer>Cobalt Devices</answer>"], ["results", FIND_CREATOR, "results", FIND_EMPLOYER], "Cobalt Devices")
# sees the first fact but copies a wrong name: fails at "1/2 copied"
MISCOPIED = rollout([search("Crimson Compass"), "find", "creator: Elsa Kramer\n" + search("Elsa Kramer"),
                     "<answer>x</answer>"], ["results", FIND_CREATOR, "results"], "x")
# the wrong first search: fails at once
LOST = rollout([search("Golden River"), "<answer>x</answer>"], ["results"], "x")


def test_a_chain_is_read_off_the_oracles_searches_and_the_answer():
    assert hop_chain(QUESTION, ORACLE) == CHAIN
    assert hop_chain(QUESTION, ["Crimson Compass"]) == []  # the oracle searched something else: not a plain chain
    no_program = Question("q2", "How many?", "3", "COUNTING_FILTERED")
    assert hop_chain(no_program, ["a"]) == []


def test_a_fact_counts_as_seen_only_on_a_page_line_that_states_it():
    assert saw_fact(["results", FIND_CREATOR], "creator", "Elsa Keller")
    assert not saw_fact([FIND_CREATOR], "creator", "Elsa Kramer")
    assert not saw_fact([FIND_CREATOR], "employer", "Elsa Keller")  # the right value under another relation
    assert not saw_fact(["[0] Elsa Keller (https://atlas.example/person/elsa-keller)"], "creator", "Elsa Keller")
    # the realistic world's sentence lines count too
    assert saw_fact(["L1: Its founder is Anna Voss."], "founder", "Anna Voss")


def test_stages_run_in_reading_order_and_stop_at_the_first_failure():
    assert hop_stages(SOLVED, CHAIN, copies=True) == [
        ("1/2 searched", True), ("1/2 saw", True), ("1/2 copied", True),
        ("2/2 searched", True), ("2/2 saw", True), ("2/2 answered", True)]
    assert hop_stages(MISCOPIED, CHAIN, copies=True) == [("1/2 searched", True), ("1/2 saw", True),
                                                           ("1/2 copied", False)]
    # without plan notes there is nothing to copy: the miscopied rollout then fails at the next search
    assert hop_stages(MISCOPIED, CHAIN, copies=False) == [("1/2 searched", True), ("1/2 saw", True),
                                                            ("2/2 searched", False)]
    assert hop_stages(LOST, CHAIN, copies=True) == [("1/2 searched", False)]


def test_the_funnel_counts_passed_of_reached_per_stage_and_each_rollouts_first_failure():
    unplanned = Question("q3", "How many?", "3", "COUNTING_FILTERED")  # left out: not a chain of hops
    figures = hop_funnel([SOLVED, MISCOPIED, LOST, LOST], [QUESTION, QUESTION, QUESTION, unplanned],
                         [ORACLE, ORACLE, ORACLE, ["x"]], copies=True)
    assert figures == {
        "stages": {"1/2 searched": [2, 3], "1/2 saw": [2, 2], "1/2 copied": [1, 2],
                   "2/2 searched": [1, 1], "2/2 saw": [1, 1], "2/2 answered": [1, 1]},
        "first_failure": {"none": 1, "1/2 copied": 1, "1/2 searched": 1},
        "chains": 3}
    assert list(figures["stages"]) == ["1/2 searched", "1/2 saw", "1/2 copied", "2/2 searched", "2/2 saw",
                                       "2/2 answered"]
