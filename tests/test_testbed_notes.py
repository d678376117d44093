"""Plan notes of the testbed's searcher, kind-true guesses and the answer-turn loss weight, on hand-built inputs."""

import random
from types import SimpleNamespace

import torch

from agentcredit.agent.protocol import parse_turn, render_answer, render_tool_call
from agentcredit.credit.tokens import ANSWER_TURN, NON_POLICY
from agentcredit.env.types import ToolCall
from agentcredit.testbed.base_policy import guesses_by_kind
from agentcredit.testbed.notes import answer_note, hop_cues
from agentcredit.testbed.warmstart import WarmStartConfig, build_examples, degrade, sft_loss
from agentcredit.world.types import Question


def question(answer, last, qid="q"):
    meta = {"program": [{"op": "start", "entity": "org1"}, last]} if last else {}
    return Question(qid, "How many?", answer, "COUNTING_FILTERED" if last else "USER", meta=meta)


def bridge(answer, rels, qid="b"):
    program = [{"op": "start", "entity": "org1", "mention": "Harbor Press"}] + [{"op": "hop", "rel": r} for r in rels]
    return Question(qid, "Harbor Press > " + " > ".join(rels) + "?", answer, "BRIDGE_ENTITY", meta={"program": program})


COUNT = {"op": "count"}
CREATOR = {"op": "hop", "rel": "creator"}
SEARCH = ToolCall("browser.search", {"query": "Harbor Press"})
OPEN = ToolCall("browser.open", {"id": 0})
SEARCH2 = ToolCall("browser.search", {"query": "Ann Lee"})
CLEAN = dict(p_vague_query=0.0, p_wrong_open=0.0)


def test_hop_cues_and_the_answer_note_come_from_the_program():
    q = bridge("Elmford", ["founder", "hometown"])
    assert hop_cues(q) == ["founder", "hometown"]
    assert answer_note(q) == "Then: hometown.\n"
    assert hop_cues(bridge("x", ["based_in", "mayor"])) == ["based in", "mayor"]  # cue words, not relation names
    assert answer_note(question("2", COUNT)) == ""  # no hop: nothing to read
    assert answer_note(question("Ann Lee", None)) == "" and hop_cues("q") == []  # user data: no program


def test_every_turn_starts_with_its_plan_note_and_copies_the_fact_after_each_page():
    cfg = WarmStartConfig(**CLEAN, p_premature_answer=0.0)
    turns = degrade([SEARCH, OPEN, SEARCH2, OPEN], "Elmford", random.Random(0), cfg, ["x"], ["founder", "hometown"])
    assert turns == [
        "Then: founder hometown.\n" + render_tool_call(SEARCH),
        "Then: founder hometown.\n" + render_tool_call(OPEN),
        "founder: Ann Lee\nThen: hometown.\n" + render_tool_call(SEARCH2),  # the page line, then what is left
        "Then: hometown.\n" + render_tool_call(OPEN),
        "Then: hometown.\n" + render_answer("Elmford"),  # = answer_note: where TRACE's reference is scored
    ]
    parsed = [parse_turn(t) for t in turns]
    assert [p.kind for p in parsed] == ["tool"] * 4 + ["answer"] and parsed[-1].answer == "Elmford"
    assert parsed[2].call.arguments["query"] == "Ann Lee"
    # Without cues (user data) the turns carry no note.
    assert degrade([SEARCH], "2", random.Random(0), cfg, ["x"]) == [render_tool_call(SEARCH), render_answer("2")]


def test_a_vague_query_carries_the_fact_once_and_a_premature_answer_keeps_its_hops_note():
    vague = WarmStartConfig(p_vague_query=1.0, p_wrong_open=0.0, p_premature_answer=0.0)
    search = ToolCall("browser.search", {"query": "Ann Lee Voss"})
    turns = degrade([SEARCH, OPEN, search, OPEN], "1970", random.Random(0), vague, ["x"], ["founder", "born"])
    third, fourth = turns[3], turns[4]  # turns 0-1: the anchor's vague query, then its real one
    assert third.startswith("founder: Ann Lee Voss\nThen: born.\n") and '"query": "Ann Lee Voss"' not in third
    assert fourth == "Then: born.\n" + render_tool_call(search)
    early = degrade([SEARCH, OPEN, SEARCH2, OPEN], "x", random.Random(0), WarmStartConfig(**CLEAN, p_premature_answer=1.0),
                    ["7"], ["founder", "hometown"])
    cut = len(early) - 1
    assert early[-1].endswith(render_answer("7")) and 1 <= cut <= 3
    assert early[-1] == ("Then: founder hometown.\n" if cut <= 2 else "Then: hometown.\n") + render_answer("7")


def test_guesses_come_from_training_answers_of_the_same_kind():
    train = [question("1", COUNT), question("1", COUNT), question("2", COUNT), question("Ann Lee", CREATOR),
             question("Bo", None)]
    guesses = guesses_by_kind(train, ["Harbor Press"])
    assert guesses(question("3", COUNT)) == ["1", "1", "2"]  # repeats kept: guesses follow the frequencies
    assert guesses(question("x", CREATOR)) == ["Ann Lee"]
    assert guesses(question("1970", {"op": "hop", "rel": "born"})) == ["Harbor Press"]  # no such kind in training
    assert guesses(question("x", None)) == ["Harbor Press"]


class _ReplayingWorker:
    def replay(self, q, turns):
        return SimpleNamespace(turns=list(turns), finish_reason="answer")


def test_build_examples_writes_notes_and_draws_guesses_per_question():
    def solve(worker, q, use_find):
        return [SEARCH, OPEN], q.answer

    count, creator = question("2", COUNT, "a"), question("Ann Lee", CREATOR, "b")
    pools = {"a": ["1"], "b": ["Cy Dahl"]}
    cfg = WarmStartConfig(episodes=2, **CLEAN, p_premature_answer=1.0)
    examples = build_examples([(_ReplayingWorker(), count), (_ReplayingWorker(), creator)], solve, cfg,
                              lambda q: pools[q.id], progress=False)
    assert examples[0].turns == [render_tool_call(SEARCH), render_answer("1")]  # no hop, no note
    assert examples[1].turns == ["Then: creator.\n" + render_tool_call(SEARCH), "Then: creator.\n" + render_answer("Cy Dahl")]


def test_answer_weight_scales_the_answer_turns_tokens_in_the_mean():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=2, intermediate_size=32))
    ids = torch.randint(0, 30, (1, 8))
    loss_mask = torch.tensor([[0, 0, 1, 1, 0, 0, 1, 1]], dtype=torch.float32)
    turn_ids = torch.tensor([[NON_POLICY, NON_POLICY, 0, 0, NON_POLICY, NON_POLICY, ANSWER_TURN, ANSWER_TURN]])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "loss_mask": loss_mask, "turn_ids": turn_ids}
    logits = model(input_ids=ids).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")[0]  # (7,)
    # Targets 2, 3 (turn 0) weigh 1, targets 6, 7 (the answer) weigh 4: (n2 + n3 + 4 n6 + 4 n7) / 10.
    expected = (nll[1] + nll[2] + 4 * nll[5] + 4 * nll[6]) / 10
    assert torch.allclose(sft_loss(model, batch, 0.0, answer_weight=4.0), expected, atol=1e-6)
    assert torch.allclose(sft_loss(model, batch, 0.0), (nll[1] + nll[2] + nll[5] + nll[6]) / 4, atol=1e-6)


def test_reference_scores_the_gold_answer_after_the_plan_note():
    from agentcredit.agent.chat import ChatFormat
    from agentcredit.lit.credit_inputs import CreditInputs
    from agentcredit.models.loading import load_policy

    texts = ["Then: creator.\n<answer>Ann Lee</answer>", "Harbor Press > creator?"] * 50
    _, tokenizer = load_policy({"kind": "tiny", "hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2,
                                "intermediate_size": 64, "vocab_size": 300, "seed": 0}, tokenizer_texts=lambda: texts)
    chat = ChatFormat.from_tokenizer(tokenizer)
    seen = []

    def score_fn(reference, items):
        seen.extend(items)
        return [torch.zeros(1) for _ in items]

    trajectory = SimpleNamespace(input_ids=[1, 2, 3], boundaries=[3])
    q = question("Ann Lee", CREATOR)
    CreditInputs(reference=object(), chat=chat, score_fn=score_fn, answer_reasoning=answer_note).reference_scores([trajectory], q)
    CreditInputs(reference=object(), chat=chat, score_fn=score_fn).reference_scores([trajectory], q)
    with_note, bare = seen[0][2], seen[1][2]
    header = list(chat.assistant_header)
    assert with_note == header + chat.encode("Then: creator.\n<answer>") and bare == chat.answer_opener
    assert bare == header + chat.encode("<answer>") and with_note != bare
    assert tokenizer.decode(with_note[len(header):]) == "Then: creator.\n<answer>"
    assert seen[0][3] == chat.encode("Ann Lee")
