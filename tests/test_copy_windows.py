"""Copy windows: which turns count as copying, and the exact ids and masks of each window.

Token ids here are character codes, so a window's text can be read off by eye."""

import pytest

from agentcredit.agent.copy_windows import copied_text, copy_windows, policy_turn_spans, turn_windows
from agentcredit.agent.trajectory import Trajectory
from agentcredit.credit.tokens import ANSWER_TURN, NON_POLICY


def decode(ids):
    return "".join(chr(i) for i in ids)


def search(query):
    return '<tool_call>{"name": "browser.search", "arguments": {"query": "' + query + '"}}</tool_call>'


OPEN = '<tool_call>{"name": "browser.open", "arguments": {"id": 0}}</tool_call>'


def trajectory(prompt, turns_and_observations):
    """Prompt, then alternating policy turns and observations; the last turn is the answer turn."""
    ids, mask, turn_ids, turns, observations = [], [], [], [], []
    ids += [ord(ch) for ch in prompt]
    mask += [0] * len(prompt)
    turn_ids += [NON_POLICY] * len(prompt)
    policy_turns = turns_and_observations[0::2]
    for i, text in enumerate(turns_and_observations):
        if i % 2 == 0:
            k = i // 2
            turn = ANSWER_TURN if k == len(policy_turns) - 1 else k
            ids += [ord(ch) for ch in text]
            mask += [1] * len(text)
            turn_ids += [turn] * len(text)
            turns.append(text)
        else:
            ids += [ord(ch) for ch in text]
            mask += [0] * len(text)
            turn_ids += [NON_POLICY] * len(text)
            observations.append(text)
    return Trajectory("q", ids, mask, turn_ids, [], [], [0.0] * len(ids), turns, observations)


PROMPT = "Who made the Oak Cup?|"
EPISODE = [
    search("Oak Cup"), "The Oak Cup was made by Bo Kim.|",
    search("Bo Kim"), "Result 0: Bo Kim|",
    OPEN, "Bo Kim lives in Oslo. Born 1949.|",
    "<answer>Oslo</answer>",
]


def test_spans_follow_the_policy_turns():
    t = trajectory(PROMPT, EPISODE)
    spans = policy_turn_spans(t)
    assert [decode(t.input_ids[a:b]) for a, b in spans] == EPISODE[0::2]


def test_copied_text_reads_queries_and_answers_only():
    assert copied_text(search("Bo Kim"), "made by Bo Kim.") == "Bo Kim"
    assert copied_text("<answer>Oslo</answer>", "lives in Oslo.") == "Oslo"
    assert copied_text(search("Ann Lee"), "made by Bo Kim.") is None  # not in the observation
    assert copied_text("<answer>1949</answer>", "Born 1949.") is None  # numbers are worked out, not copied
    assert copied_text(OPEN, "Bo Kim") is None
    assert copied_text("garbage", "garbage") is None


def test_windows_with_wide_context_are_the_copying_turns():
    t = trajectory(PROMPT, EPISODE)
    windows = copy_windows(t, 1000, decode)
    spans = policy_turn_spans(t)
    # Turn 0 copies out of the question, turn 1 out of observation 0, the answer out of observation 2;
    # the open (turn 2) copies nothing.
    expected = [spans[0], spans[1], spans[3]]
    assert len(windows) == 3
    for (ids, mask), (start, end) in zip(windows, expected):
        assert ids == t.input_ids[:end]
        assert mask == [0] * start + [1] * (end - start)


def test_window_keeps_only_the_last_context_tokens():
    t = trajectory(PROMPT, EPISODE)
    start, end = policy_turn_spans(t)[1]
    ids, mask = copy_windows(t, 20, decode)[1]
    assert ids == t.input_ids[start - 20 : end]
    assert mask == [0] * 20 + [1] * (end - start)
    assert "Bo Kim" in decode(ids[:20])


def test_turn_whose_name_lies_outside_the_context_is_left_out():
    t = trajectory(PROMPT, EPISODE)
    # 5 tokens before the answer turn are "949.|": "Oslo" is not inside, so the answer window is dropped,
    # and so are the two searches, whose names end more than 5 tokens before them.
    assert copy_windows(t, 5, decode) == []


def test_turn_windows_start_at_the_turn_before():
    t = trajectory(PROMPT, EPISODE)
    spans = policy_turn_spans(t)
    windows = turn_windows(t)
    assert len(windows) == 4
    # The first turn's window is the whole prefix (prompt with the question); later windows start
    # where the turn before them starts, so they hold that turn and the observation after it.
    firsts = [0, spans[0][0], spans[1][0], spans[2][0]]
    for (ids, mask), first, (start, end) in zip(windows, firsts, spans):
        assert ids == t.input_ids[first:end]
        assert mask == [0] * (start - first) + [1] * (end - start)
    assert decode(windows[3][0]) == OPEN + "Bo Kim lives in Oslo. Born 1949.|<answer>Oslo</answer>"
    assert decode(windows[0][0]) == PROMPT + search("Oak Cup")


def test_context_must_be_positive():
    with pytest.raises(ValueError, match="copy_context_tokens"):
        copy_windows(trajectory(PROMPT, EPISODE), 0, decode)


# ---------------------------------------------------------------- training on windows (agent/warmstart.py)

def small_model(seed=0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=2, intermediate_size=32))


def test_pad_rows_right_pads_ids_and_masks():
    from agentcredit.agent.trajectory import pad_rows

    batch = pad_rows([([5, 6, 7], [0, 1, 1]), ([8, 9], [0, 1])], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 9, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["loss_mask"].tolist() == [[0, 1, 1], [0, 1, 0]]


def test_a_mixed_step_optimises_the_sum_of_both_losses():
    import torch

    from agentcredit.agent.trajectory import pad_rows
    from agentcredit.agent.warmstart import WarmStartConfig, sft_loss, sft_optimizer, sft_step

    episodes = pad_rows([([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 1])], pad_id=0)
    windows = pad_rows([([7, 8, 9], [0, 1, 1]), ([3, 4], [0, 1])], pad_id=0)
    model = small_model()
    with torch.no_grad():
        expected = float(sft_loss(model, episodes, 0.0) + sft_loss(model, windows, 0.0))
    optimizer, schedule = sft_optimizer(model, WarmStartConfig())
    assert sft_step(model, episodes, optimizer, schedule, 0.0, windows) == pytest.approx(expected, abs=1e-6)


def test_copy_phase_learns_its_windows_and_reports_its_loss():
    import torch

    from agentcredit.agent.trajectory import pad_rows
    from agentcredit.agent.warmstart import WarmStartConfig, sft_loss, train_window_phase

    # Each window ends by repeating its second token four positions later: an offset copy, which a
    # one-layer model learns in a few dozen steps.
    generator = torch.Generator().manual_seed(0)
    windows = []
    for _ in range(64):
        a, b, c = (int(x) for x in torch.randint(10, 40, (3,), generator=generator))
        windows.append(([2, a, b, c, 2, a], [0, 0, 0, 0, 0, 1]))
    model = small_model()
    batch = pad_rows(windows, pad_id=0)
    with torch.no_grad():
        before = float(sft_loss(model, batch, 0.0))
    cfg = WarmStartConfig(window_steps=150, window_batch_size=32, lr=1e-2, warmup_steps=10)
    stats = train_window_phase(model, windows, 0, cfg, torch.Generator().manual_seed(1), progress=False)
    with torch.no_grad():
        after = float(sft_loss(model, batch, 0.0))
    assert before > 3.0 and after < 0.5 * before, (before, after)
    assert stats["window_final_loss"] < before and stats["window_seconds"] > 0


def test_copy_settings_without_windows_or_with_bad_values_are_clear_errors():
    from agentcredit.agent.warmstart import WarmStartConfig, train_sft

    model = small_model()
    with pytest.raises(ValueError, match="window_steps > 0 but the episodes gave no turn windows"):
        train_sft(model, [], 0, WarmStartConfig(window_steps=5, window_mix=0), progress=False)
    with pytest.raises(ValueError, match="window_mix > 0 but the episodes gave no turn windows"):
        train_sft(model, [], 0, WarmStartConfig(window_steps=0, window_mix=4), progress=False)
    with pytest.raises(ValueError, match="warmstart.window_mix must be an integer >= 0, got -1"):
        WarmStartConfig(window_mix=-1)
    with pytest.raises(ValueError, match="warmstart.window_batch_size must be an integer >= 1, got 0"):
        WarmStartConfig(window_batch_size=0)
    with pytest.raises(ValueError, match=r"warmstart.window_kind must be one of \['turn', 'copy'\], got 'pages'"):
        WarmStartConfig(window_kind="pages")
    with pytest.raises(ValueError, match="warmstart.answer_loss_weight must be a number > 0, got 0"):
        WarmStartConfig(answer_loss_weight=0)


def test_bad_warmstart_value_is_a_one_line_config_error():
    from agentcredit.evaluate import compose_config
    from agentcredit.validation import ConfigError, validate_config

    with pytest.raises(ConfigError, match=r"^warmstart.window_steps must be an integer >= 0, got -3$"):
        validate_config(compose_config(["warmstart.window_steps=-3"]))
