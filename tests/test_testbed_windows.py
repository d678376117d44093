"""Turn windows (exact ids and masks), the supervised phases that train on them, and a build's resume.

Token ids here are character codes, so a window's text can be read off by eye."""

import pytest

from agentcredit.testbed.windows import policy_turn_spans, turn_windows
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


# ---------------------------------------------------------------- training on windows (testbed/warmstart.py)

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
    from agentcredit.testbed.warmstart import WarmStartConfig, sft_loss, sft_optimizer, sft_step

    episodes = pad_rows([([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 1])], pad_id=0)
    windows = pad_rows([([7, 8, 9], [0, 1, 1]), ([3, 4], [0, 1])], pad_id=0)
    model = small_model()
    with torch.no_grad():
        expected = float(sft_loss(model, episodes, 0.0) + sft_loss(model, windows, 0.0))
    optimizer, schedule = sft_optimizer(model, WarmStartConfig())
    assert sft_step(model, episodes, optimizer, schedule, 0.0, windows) == pytest.approx(expected, abs=1e-6)


def test_window_phase_learns_its_windows_and_reports_its_loss():
    import torch

    from agentcredit.agent.trajectory import pad_rows
    from agentcredit.testbed.warmstart import Checkpoints, WarmStartConfig, run_phase, sample_windows, sft_loss, sft_optimizer

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
    cfg = WarmStartConfig(steps=150, lr=1e-2, warmup_steps=10)
    optimizer, schedule = sft_optimizer(model, cfg)
    sampler = torch.Generator().manual_seed(1)
    loss, seconds = run_phase(model, "turn windows", lambda: (pad_rows(sample_windows(windows, 32, sampler), 0), None), 150,
                              optimizer, schedule, sampler, 0.0, False, Checkpoints(None, 100), None)
    with torch.no_grad():
        after = float(sft_loss(model, batch, 0.0))
    assert before > 3.0 and after < 0.5 * before, (before, after)
    assert loss < before and seconds > 0


def build_in_steps(tmp_path, interrupt_at=None):
    """train_sft on two hand-built episodes and their windows; interrupted at the `interrupt_at`-th update when given."""
    import torch

    import agentcredit.testbed.warmstart as warmstart

    episodes = [trajectory(PROMPT, EPISODE), trajectory("Who runs Oslo?|", [search("Oslo"), "Mayor: Ann Lee.|", "<answer>Ann Lee</answer>"])]
    for t in episodes:
        t.input_ids = [i % 40 for i in t.input_ids]  # the small model's vocabulary
    windows = [w for t in episodes for w in turn_windows(t)]
    cfg = warmstart.WarmStartConfig(window_steps=5, steps=5, batch_size=1, window_batch_size=2, window_mix=1,
                                    warmup_steps=1, checkpoint_every=2, lr=1e-2)
    model = small_model()
    checkpoints = warmstart.Checkpoints(tmp_path, cfg.checkpoint_every)
    real_step, calls = warmstart.sft_step, []

    def step(*args, **kwargs):
        calls.append(1)
        if interrupt_at is not None and len(calls) == interrupt_at:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    warmstart.sft_step = step
    try:
        stats = warmstart.train_sft(model, episodes, 0, cfg, False, windows, checkpoints)
    except KeyboardInterrupt:
        stats = None
    finally:
        warmstart.sft_step = real_step
    return model, stats, checkpoints


@pytest.mark.parametrize("interrupt_at", [4, 8])  # in the window phase, in the episode phase
def test_an_interrupted_build_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path, interrupt_at):
    import torch

    whole, whole_stats, _ = build_in_steps(tmp_path / "whole")
    _, stopped, checkpoints = build_in_steps(tmp_path / "resumed", interrupt_at)
    assert stopped is None and checkpoints.path.exists()  # the state of the last checkpoint is on disk
    resumed, stats, _ = build_in_steps(tmp_path / "resumed")  # the same command again
    for (name, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    assert stats["final_loss"] == pytest.approx(whole_stats["final_loss"], abs=1e-6)
    assert stats["window_final_loss"] == pytest.approx(whole_stats["window_final_loss"], abs=1e-6)
    assert not checkpoints.path.exists()  # a finished build leaves no state behind


def test_a_damaged_build_state_is_a_one_line_error(tmp_path):
    from agentcredit.testbed.warmstart import Checkpoints

    checkpoints = Checkpoints(tmp_path, 2)
    tmp_path.joinpath("build_state.pt").write_bytes(b"not a state")
    with pytest.raises(RuntimeError, match=r"build state .*build_state.pt cannot be read .*delete it to start over"):
        checkpoints.load()


def test_window_settings_without_windows_or_with_bad_values_are_clear_errors():
    from agentcredit.testbed.warmstart import WarmStartConfig, train_sft

    model = small_model()
    for steps, mix in ((5, 0), (0, 4)):
        with pytest.raises(ValueError, match="window_steps or window_mix > 0 but the episodes gave no turn windows"):
            train_sft(model, [], 0, WarmStartConfig(window_steps=steps, window_mix=mix), progress=False)
    with pytest.raises(ValueError, match="warmstart.window_mix must be an integer >= 0, got -1"):
        WarmStartConfig(window_mix=-1)
    with pytest.raises(ValueError, match="warmstart.window_batch_size must be an integer >= 1, got 0"):
        WarmStartConfig(window_batch_size=0)
    with pytest.raises(ValueError, match=r"warmstart.p_vague_query must be a probability in \[0, 1\], got 1.5"):
        WarmStartConfig(p_vague_query=1.5)
    with pytest.raises(ValueError, match="warmstart.answer_loss_weight must be a finite number > 0, got 0"):
        WarmStartConfig(answer_loss_weight=0)


def test_bad_warmstart_value_is_a_one_line_config_error():
    from agentcredit.common.configs import compose_config
    from agentcredit.checks.validation import ConfigError, validate_config

    with pytest.raises(ConfigError, match=r"^warmstart.window_steps must be an integer >= 0, got -3$"):
        validate_config(compose_config(["warmstart.window_steps=-3"]))
