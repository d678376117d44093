"""The local judge: the text tool protocol with a scripted model, and a real (tiny / SmolLM2) HF model."""

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentcredit.judge.verification import make_segment_verifier
from agentcredit.judge import AgenticJudge, JudgeError, Proposal, build_judge, build_judge_context
from agentcredit.judge.local import LocalChatBackend, hf_generator, parse_reply, render_messages
from agentcredit.judge.tools import TOOL_SPECS
from judge_fixtures import QUESTION, FakeWorker, error_traj, expert_traj, failed_traj

CONF = Path(__file__).resolve().parents[1] / "conf" / "judge"
TINY = {"kind": "tiny", "hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 64,
        "vocab_size": 400, "seed": 0}


def group():
    return [expert_traj(), failed_traj(), error_traj()]


def context():
    return build_judge_context(group(), QUESTION.text, chosen=0, max_segment_turns=4, success_threshold=1.0)


class ScriptedModel:
    """Stands in for generation: returns the scripted texts in order and keeps the prompts it saw."""

    def __init__(self, *texts):
        self.texts = list(texts)
        self.prompts: list[list[dict]] = []

    def __call__(self, messages):
        self.prompts.append(messages)
        text = self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]
        return text, 50


def test_render_messages_for_any_chat_template():
    messages = [
        {"role": "system", "content": "judge"},
        {"role": "user", "content": "group"},
        {"role": "assistant", "content": "<tool_call>...</tool_call>",
         "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "get_segment", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "{\"turns\": []}"},
    ]
    rendered = render_messages(messages, TOOL_SPECS)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user"]
    assert rendered[0]["content"].startswith("judge") and '"name": "search_trajectory"' in rendered[0]["content"]
    assert rendered[3]["content"] == "Result of get_segment:\n{\"turns\": []}"
    assert render_messages(messages[:1], None)[0]["content"] == "judge"  # no tools offered: no tool text


def test_parse_reply_reads_tool_calls_and_skips_broken_ones():
    text = ('Let me look. <tool_call>{"name": "search_trajectory", "arguments": {"query": "mayor"}}</tool_call>'
            '<tool_call>{broken</tool_call><tool_call>{"name": "get_segment", "arguments": {"traj_id": 1}}</tool_call>')
    turn = parse_reply(text, call_offset=4)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("call_4", "search_trajectory", {"query": "mayor"}), ("call_5", "get_segment", {"traj_id": 1})]
    assert parse_reply('{"segment_start_turn": 1}').tool_calls == ()


def test_scripted_model_drives_the_agentic_protocol():
    model = ScriptedModel(
        '<tool_call>{"name": "search_trajectory", "arguments": {"query": "Korvel", "k": 1}}</tool_call>',
        '<tool_call>{"name": "get_segment", "arguments": {"traj_id": 0, "start_turn": 3, "end_turn": 3}}</tool_call>',
        '{"segment_start_turn": 2, "segment_end_turn": 3, "rationale": "reaches the mayor"}',
    )
    proposal = AgenticJudge(LocalChatBackend(model), max_tool_rounds=3).propose(context())
    assert (proposal.start, proposal.end, proposal.problem, proposal.judge_tokens) == (2, 3, None, 150)
    search_result = model.prompts[1][-1]
    assert search_result["role"] == "user" and search_result["content"].startswith("Result of search_trajectory:")
    assert json.loads(search_result["content"].split("\n", 1)[1])[0]["traj_id"] == 1
    assert "[cursor 1] Ada Fenn" in model.prompts[2][-1]["content"]


def test_scripted_model_that_never_answers_properly_falls_back():
    model = ScriptedModel("I think the answer is Blue Harbor Trust.")
    judge = AgenticJudge(LocalChatBackend(model), max_tool_rounds=1)
    segment, logs = make_segment_verifier(judge)(group(), QUESTION, FakeWorker({}), {"max_judge_corrections": 2})
    assert segment is None and logs["judge_failure"] == 1.0 and len(model.prompts) == 3
    assert "Your answer was rejected" in model.prompts[1][-1]["content"]


@pytest.fixture(scope="module")
def tiny_model():
    from agentcredit.models.loading import load_policy

    texts = [json.dumps({"segment_start_turn": 1, "segment_end_turn": 2}), QUESTION.text, "search_trajectory"] * 20
    model, tokenizer = load_policy(TINY, tokenizer_texts=lambda: texts)
    return model.eval(), tokenizer


def test_hf_generator_runs_a_real_model_and_fails_cleanly(tiny_model):
    model, tokenizer = tiny_model
    generate = hf_generator(model, tokenizer, max_new_tokens=6, max_prompt_tokens=100_000)
    text, tokens = generate([{"role": "system", "content": "judge"}, {"role": "user", "content": "pick a segment"}])
    assert isinstance(text, str) and tokens > 6
    judge = AgenticJudge(LocalChatBackend(generate), max_tool_rounds=1, observation_chars=100)
    segment, logs = make_segment_verifier(judge)(group(), QUESTION, FakeWorker({}), {"max_judge_corrections": 1})
    assert segment is None and logs["judge_failure"] == 1.0  # an untrained model writes no valid JSON


def test_hf_generator_refuses_an_overlong_prompt(tiny_model):
    model, tokenizer = tiny_model
    generate = hf_generator(model, tokenizer, max_new_tokens=4, max_prompt_tokens=10)
    with pytest.raises(JudgeError, match="over judge.max_prompt_tokens=10"):
        generate([{"role": "user", "content": "a rather long prompt " * 10}])


@pytest.mark.slow
def test_smollm2_judge_from_config_proposes_or_fails_cleanly():
    from agentcredit.models.loading import smollm2_gguf_path

    try:
        smollm2_gguf_path()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        pytest.skip(str(err))
    cfg = {**OmegaConf.to_container(OmegaConf.load(CONF / "local.yaml")), "max_new_tokens": 48, "max_tool_rounds": 1}
    judge = build_judge(cfg)
    try:
        proposal = judge.propose(context())
    except JudgeError:
        return
    assert isinstance(proposal, Proposal) and len(proposal.transcript) >= 3
