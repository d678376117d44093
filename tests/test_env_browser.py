"""BrowserEnv: the TRACE Table 7 tool semantics, error observations and diagnostics."""

import random

import pytest

from agentcredit.env.browser import BrowserEnv, lead_summary
from agentcredit.env.corpus import Corpus
from agentcredit.env.retrieval import BM25Retriever
from agentcredit.env.types import ToolCall
from agentcredit.world.types import Document

LONG = Document("long", "Harbour Ledger", "https://w/long", tuple(f"Harbour entry {n}." for n in range(30)))
DOCS = [
    Document("volcano", "Mount Kilimanjaro", "https://w/kili",
             ("Kilimanjaro is a dormant volcano in Tanzania.", "Its summit is Uhuru Peak.",
              "The crater (a.k.a. Kibo) holds ice.", "Peak season is January.")),
    Document("ada", "Ada Lovelace", "https://w/ada",
             ("Ada Lovelace was an English mathematician.", "She wrote notes on the Analytical Engine.")),
    LONG,
    Document("empty", "Blank Page", "https://w/blank", ()),
]


class FixedRetriever:
    """Returns the same corpus indices for every query, so tests control the result list exactly."""

    def __init__(self, indices):
        self.indices = list(indices)

    def search(self, query, topn):
        return self.indices[:topn]


def search(query, **kw):
    return ToolCall("browser.search", {"query": query, **kw})


def open_(**kw):
    return ToolCall("browser.open", kw)


def find(pattern, **kw):
    return ToolCall("browser.find", {"pattern": pattern, **kw})


@pytest.fixture
def env():
    return BrowserEnv(Corpus(DOCS), FixedRetriever([0, 1, 2, 3]), default_num_lines=12)


def test_search_lists_zero_based_results_with_title_url_and_summary(env):
    obs = env.step(search("anything", topn=2))
    assert obs.splitlines() == [
        "Search results:",
        "[0] Mount Kilimanjaro (https://w/kili)",
        "    Kilimanjaro is a dormant volcano in Tanzania. Its summit is Uhuru Peak. The crater (a.k.a. Kibo)…",
        "[1] Ada Lovelace (https://w/ada)",
        "    Ada Lovelace was an English mathematician. She wrote notes on the Analytical Engine.",
    ]
    assert env.last_results == ("volcano", "ada")


def test_search_topn_defaults_to_ten():
    docs = [Document(f"d{i}", f"River {i}", f"https://w/{i}", (f"River number {i}.",)) for i in range(12)]
    env = BrowserEnv(Corpus(docs), BM25Retriever(Corpus(docs)))
    env.step(search("river"))
    assert len(env.last_results) == 10
    env.step(search("river", topn=3))
    assert env.last_results == ("d0", "d1", "d2")  # equal BM25 scores keep corpus order


def test_open_takes_zero_based_index_into_most_recent_search(env):
    env.step(search("q"))
    obs = env.step(open_(id=1))
    assert obs.splitlines() == [
        "[cursor 0] Ada Lovelace (https://w/ada)",
        "L0: Ada Lovelace was an English mathematician.",
        "L1: She wrote notes on the Analytical Engine.",
        "Lines 0-1 of 2. End of page.",
    ]
    assert env.current_doc_id == "ada"
    env.retriever.indices = [2]
    env.step(search("other"))  # a new search replaces the result list
    env.step(open_(id=0))
    assert env.current_doc_id == "long"


def test_open_before_any_search_is_a_navigation_error(env):
    assert env.step(open_(id=0)).startswith("Error: there is no search")
    assert env.step(open_()).startswith("Error: no page is open to re-read")
    assert env.diagnostics.navigation_errors == 2
    assert env.current_doc_id is None


@pytest.mark.parametrize("bad_id", [4, 99, -2])
def test_open_out_of_range_id(env, bad_id):
    env.step(search("q"))
    obs = env.step(open_(id=bad_id))
    assert obs == f"Error: id {bad_id} is out of range; the most recent search has results 0..3 (or -1 to re-read)."
    assert env.current_doc_id is None


def test_open_minus_one_rereads_current_page_from_the_beginning(env):
    env.step(search("q"))
    env.step(open_(id=2, loc=20))
    obs = env.step(open_())
    lines = obs.splitlines()
    assert lines[0] == "[cursor 1] Harbour Ledger (https://w/long)"
    assert lines[1] == "L0: Harbour entry 0."
    assert env.page_history == ("long", "long")
    assert env.diagnostics.reopened_documents == 0  # re-reading is not reopening


def test_loc_and_num_lines_select_the_window(env):
    env.step(search("q"))
    first = env.step(open_(id=2)).splitlines()
    assert first[1:13] == [f"L{n}: Harbour entry {n}." for n in range(12)]  # default num_lines = 12
    assert first[-1] == "Lines 0-11 of 30. More: browser.open(loc=12)"
    window = env.step(open_(loc=12, num_lines=3)).splitlines()
    assert window[1:] == ["L12: Harbour entry 12.", "L13: Harbour entry 13.", "L14: Harbour entry 14.",
                          "Lines 12-14 of 30. More: browser.open(loc=15)"]
    tail = env.step(open_(loc=25, num_lines=10)).splitlines()
    assert tail[1:] == [f"L{n}: Harbour entry {n}." for n in range(25, 30)] + ["Lines 25-29 of 30. End of page."]


@pytest.mark.parametrize("loc", [30, 1000, -2])
def test_loc_out_of_range(env, loc):
    env.step(search("q"))
    env.step(open_(id=2))
    assert env.step(open_(loc=loc)) == (
        f"Error: loc {loc} is out of range; this page has lines 0..29 (or -1 for the beginning)."
    )


@pytest.mark.parametrize("num_lines", [0, -2, 51])
def test_num_lines_out_of_range(env, num_lines):
    env.step(search("q"))
    obs = env.step(open_(id=2, num_lines=num_lines))
    assert obs == f"Error: browser.open argument 'num_lines' must be in 1..50 or -1, got {num_lines}."


def test_empty_page_opens(env):
    env.step(search("q"))
    assert env.step(open_(id=3)) == "[cursor 0] Blank Page (https://w/blank)\n(empty page)"
    assert env.step(find("x")) == 'No match for "x" in [cursor 0] Blank Page (0 lines).'


def test_find_with_no_open_page_is_an_error(env):
    assert env.step(find("peak")).startswith("Error: no page is open to search in")
    env.step(search("q"))
    assert env.step(find("peak")).startswith("Error: no page is open to search in")
    assert env.diagnostics.navigation_errors == 2


def test_find_is_case_insensitive_literal_and_reports_line_numbers(env):
    env.step(search("q"))
    env.step(open_(id=0))
    assert env.step(find("PEAK")) == (
        '2 matches for "PEAK" in [cursor 0] Mount Kilimanjaro:\n'
        "L1: Its summit is Uhuru Peak.\n"
        "L3: Peak season is January."
    )
    assert env.step(find("nowhere")) == 'No match for "nowhere" in [cursor 0] Mount Kilimanjaro (4 lines).'


@pytest.mark.parametrize("pattern,expected_lines", [
    ("(a.k.a.", ["L2"]), ("a.k.a", ["L2"]), ("a?k", []), (".*", []), ("[", []), ("\\", []), ("Peak$", []),
])
def test_find_treats_regex_metacharacters_literally(env, pattern, expected_lines):
    env.step(search("q"))
    env.step(open_(id=0))
    obs = env.step(find(pattern))
    assert not obs.startswith("Error")
    assert [ln.split(":")[0] for ln in obs.splitlines()[1:]] == expected_lines


def test_find_cursor_addresses_page_history(env):
    env.step(search("q"))
    env.step(open_(id=0))  # cursor 0
    env.step(open_(id=1))  # cursor 1, now current
    assert env.step(find("volcano")).startswith('No match for "volcano" in [cursor 1] Ada Lovelace')
    assert env.step(find("volcano", cursor=0)).startswith('1 match for "volcano" in [cursor 0] Mount Kilimanjaro')
    assert env.step(find("volcano", cursor=2)) == (
        "Error: cursor 2 is out of range; the page history has cursors 0..1 (or -1 for the current page)."
    )


def test_find_lists_extra_matches_by_line_number():
    env = BrowserEnv(Corpus([LONG]), FixedRetriever([0]), max_find_matches=2)
    env.step(search("q"))
    env.step(open_(id=0))
    lines = env.step(find("entry 2")).splitlines()  # lines 2, 20..29
    assert lines[0] == '11 matches for "entry 2" in [cursor 0] Harbour Ledger:'
    assert lines[1:3] == ["L2: Harbour entry 2.", "L20: Harbour entry 20."]
    assert lines[3] == "9 more at " + ", ".join(f"L{n}" for n in range(21, 30)) + "."


def test_empty_search_result_then_open_explains(env):
    env.retriever.indices = []
    assert env.step(search("zzz")) == 'No results for "zzz". Try different words.'
    assert env.step(open_(id=0)).startswith("Error: the most recent search returned no results")


MALFORMED = [
    (ToolCall("browser.delete", {}), "Error: unknown tool 'browser.delete'"),
    (ToolCall(None, {}), "Error: unknown tool None"),
    (ToolCall("browser.search", None), "Error: browser.search arguments must be an object"),
    (ToolCall("browser.search", ["q"]), "Error: browser.search arguments must be an object"),
    (ToolCall("browser.search", {}), "Error: browser.search needs the argument 'query'."),
    (ToolCall("browser.search", {"query": "q", "k": 3}), "Error: browser.search got unknown argument(s) 'k'"),
    (ToolCall("browser.search", {"query": 7}), "Error: browser.search argument 'query' must be a string, got int 7."),
    (ToolCall("browser.search", {"query": None}), "argument 'query' must be a string, got NoneType None."),
    (ToolCall("browser.search", {"query": "   "}), "Error: browser.search argument 'query' is empty"),
    (ToolCall("browser.search", {"query": "x" * 10_000}), "is 10000 characters; the limit is 300."),
    (ToolCall("browser.search", {"query": "bad \ud800"}), "contains characters that are not valid text."),
    (ToolCall("browser.search", {"query": "q", "topn": "3"}), "argument 'topn' must be an integer, got str '3'."),
    (ToolCall("browser.search", {"query": "q", "topn": True}), "argument 'topn' must be an integer, got bool True."),
    (ToolCall("browser.search", {"query": "q", "topn": 3.0}), "argument 'topn' must be an integer, got float 3.0."),
    (ToolCall("browser.search", {"query": "q", "topn": 0}), "argument 'topn' must be in 1..20, got 0."),
    (ToolCall("browser.search", {"query": "q", "topn": 10**5000}), "must be in 1..20, got <int too large to show>."),
    (ToolCall("browser.open", {"id": [0]}), "argument 'id' must be an integer, got list [0]."),
    (ToolCall("browser.open", {"id": None}), "argument 'id' must be an integer, got NoneType None."),
    (ToolCall("browser.open", {"doc": 0}), "got unknown argument(s) 'doc'; allowed: id, loc, num_lines."),
    (ToolCall("browser.open", {1: 0}), "got unknown argument(s) 1; allowed"),
    (ToolCall("browser.find", {"pattern": "p" * 101}), "argument 'pattern' is 101 characters; the limit is 100."),
    (ToolCall("browser.find", {"pattern": {"re": "x"}}), "argument 'pattern' must be a string, got dict"),
    (ToolCall("browser.find", {"pattern": "x", "cursor": "-1"}), "argument 'cursor' must be an integer, got str"),
    ("browser.search", "Error: unknown tool None"),  # not a ToolCall at all
]


@pytest.mark.parametrize("call,expected", MALFORMED)
def test_malformed_calls_give_error_observations_and_change_nothing(env, call, expected):
    env.step(search("q"))
    env.step(open_(id=0))
    before = env.snapshot()
    obs = env.step(call)
    assert obs.startswith("Error: ") and expected in obs
    after = env.snapshot()
    assert (after.last_results, after.history) == (before.last_results, before.history)
    assert env.diagnostics.invalid_calls == 1 and env.diagnostics.navigation_errors == 0


def test_random_garbage_never_raises(env):
    rng = random.Random(0)
    values = [None, True, 3.5, -1, 0, 2, 10**30, "", "x", "(", "a" * 500, [1], {"a": 1}, b"bytes", object()]
    names = ["browser.search", "browser.open", "browser.find", "browser", "", None, 5]
    keys = ["query", "topn", "id", "loc", "num_lines", "pattern", "cursor", "junk", None, 3]
    for _ in range(2000):
        args = {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 3))}
        obs = env.step(ToolCall(rng.choice(names), args))
        assert isinstance(obs, str) and obs


def test_diagnostics_count_repeats_and_errors(env):
    env.step(search("Volcano  peak"))
    env.step(search("volcano peak"))  # same query up to case and spacing
    env.step(open_(id=0))
    env.step(open_(id=0))  # reopened
    env.step(open_())  # re-read: not a reopening
    env.step(find("Peak"))
    env.step(find("peak"))  # repeated find on the same page
    env.step(open_(id=1))
    env.step(find("peak"))  # same pattern, other page: not a repeat
    env.step(open_(id=9))  # navigation error
    env.step(ToolCall("browser.open", {"id": "1"}))  # invalid call
    env.step(ToolCall("browser.scroll", {}))  # unknown tool: invalid, not a browser tool call
    env.diagnostics.record_answer(True)
    assert env.diagnostics.as_dict() == {
        "tool_calls": {"browser.search": 2, "browser.open": 6, "browser.find": 3},
        "total_tool_calls": 11,
        "repeated_queries": 1,
        "reopened_documents": 1,
        "repeated_finds": 1,
        "navigation_errors": 1,
        "invalid_calls": 2,
        "answer_well_formed": True,
    }
    env.reset()
    assert env.diagnostics.as_dict()["total_tool_calls"] == 0
    assert env.current_doc_id is None and env.last_results == ()


def test_lead_summary_cuts_at_a_word_boundary():
    doc = Document("d", "T", "u", ("Alpha beta gamma.", "  Delta   epsilon zeta eta. "))
    assert lead_summary(doc, 100) == "Alpha beta gamma. Delta epsilon zeta eta."
    # 24 chars: "Alpha beta gamma. Delta " → cut before the partial word, then the ellipsis
    assert lead_summary(doc, 24) == "Alpha beta gamma. Delta…"
    assert lead_summary(doc, 20) == "Alpha beta gamma.…"


def test_long_lines_are_clipped():
    doc = Document("d", "T", "u", ("word " * 100,))
    env = BrowserEnv(Corpus([doc]), FixedRetriever([0]), max_line_chars=20)
    env.step(search("q"))
    line = env.step(open_(id=0)).splitlines()[1]
    assert line == "L0: " + ("word " * 4).rstrip() + "…"


def test_bad_constructor_settings_raise_clear_errors():
    with pytest.raises(ValueError, match="default_num_lines must be in 1..max_num_lines"):
        BrowserEnv(Corpus(DOCS), FixedRetriever([]), default_num_lines=0)
