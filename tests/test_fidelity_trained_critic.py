"""The fidelity instrument measures a learned critic's *trained* head when given a checkpoint: the head saved
with the policy (lit.critic.load_trained_head), a checkpoint without one as one line, and without a
checkpoint the table says the head is untrained."""

from __future__ import annotations

import json
from unittest import mock

import pytest
import torch

from agentcredit.common.checkpoint_file import CheckpointError
from agentcredit.lit.critic import TurnCritic, load_trained_head
from test_credit_critic import ParityReward, head
from test_credit_fidelity_script import fidelity_cli
from tiny_runs import TINY, train_tiny

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
KNOBS = dict(lr=1e-3, epochs=1, gamma=1.0, gae_lambda=0.95)


def _saved_head(width: int, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = {"head.0.weight": (64, width), "head.0.bias": (64,), "head.2.weight": (1, 64), "head.2.bias": (1,)}
    return {f"critic.{k}": torch.randn(s, generator=generator) for k, s in shapes.items()}


def test_the_saved_head_replaces_the_fresh_one():
    critic = TurnCritic(8, **KNOBS)
    saved = _saved_head(8, seed=1)
    step = load_trained_head(critic, "run.ckpt", {"state_dict": {"policy.w": torch.zeros(2), **saved}, "global_step": 7})
    assert step == 7
    for key, value in critic.state_dict().items():
        assert torch.equal(value, saved[f"critic.{key}"]), key
    # V of a known feature through the loaded weights: tanh(W0 x + b0) · w2 + b2
    x = torch.ones(1, 8)
    expected = torch.tanh(x @ saved["critic.head.0.weight"].T + saved["critic.head.0.bias"]) @ saved["critic.head.2.weight"].T
    assert critic(x).item() == pytest.approx((expected + saved["critic.head.2.bias"]).item(), rel=1e-6)


def test_a_checkpoint_without_a_head_or_with_another_width_is_one_line():
    with pytest.raises(CheckpointError, match="grpo.ckpt holds no turn-critic value head") as err:
        load_trained_head(TurnCritic(8, **KNOBS), "grpo.ckpt", {"state_dict": {"policy.w": torch.zeros(2)}})
    assert "\n" not in str(err.value)
    with pytest.raises(CheckpointError, match="does not fit the configured model"):
        load_trained_head(TurnCritic(8, **KNOBS), "wide.ckpt", {"state_dict": _saved_head(16, seed=1)})


RUN = ["credit.critic_lr=0.05", "logger=csv", "trainer.max_steps=1", "trainer.val_check_interval=1",
       "checkpoint.every_n_steps=1", "rollout.group_size=3"]


def test_the_instrument_measures_the_head_trained_with_the_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("agentcredit.run.compose.make_reward_fn", lambda env_cfg: ParityReward())
    train_tiny(tmp_path / "run", "credit=turn-critic", *RUN)
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    saved = head(ckpt)
    assert saved["critic.head.2.weight"].abs().sum() > 0  # a fresh head's last layer is 0: one step moved it

    import agentcredit.fidelity.methods as fm

    measured = []
    set_heads = fm.set_critic_heads
    out = tmp_path / "fid"
    with mock.patch("agentcredit.fidelity.methods.set_critic_heads",
                    side_effect=lambda methods, path: set_heads(methods, path) or measured.extend(methods)):
        fidelity_cli(*TINY, f"ckpt_path={ckpt}", "n=1", "data.prompts_per_step=1", "group_size=2", "mc=2", "bootstrap=0",
                     "samples=0", "methods=[grpo,turn_critic]", f"hydra.run.dir={out}")
    critic = next(m for m in measured if m.label == "turn_critic").inputs.critic
    assert critic.state_dict().keys() == {k[len("critic."):] for k in saved}
    for key, value in critic.state_dict().items():
        assert torch.equal(value, saved[f"critic.{key}"]), key
    assert next(m for m in measured if m.label == "grpo").note == ""
    note = f"turn_critic: trained head of {ckpt} (step 1)."
    assert note in (out / "fidelity.md").read_text()
    assert json.loads((out / "fidelity.json").read_text())["notes"] == {"turn_critic": note[len("turn_critic: "):-1]}


def test_a_grpo_checkpoint_is_one_line_and_no_fresh_head(tmp_path, capsys):
    train_tiny(tmp_path / "run", "credit=grpo", *RUN)
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    with pytest.raises(SystemExit) as exit_info:
        fidelity_cli(*TINY, f"ckpt_path={ckpt}", "n=1", "data.prompts_per_step=1", "group_size=2", "mc=2",
                     "methods=[grpo,turn_critic]", f"hydra.run.dir={tmp_path / 'fid'}")
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("checkpoint error:") and "holds no turn-critic value head" in err[-1]
    assert not (tmp_path / "fid" / "turns.jsonl").exists() or not (tmp_path / "fid" / "turns.jsonl").read_text()


class AlternatingReward(ParityReward):
    """1, 0, 1, ... in the order rollouts end: rewards that differ within every group, whatever the tiny policy
    samples (its rollouts all end at the tool limit)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, final_text, question):
        self.calls += 1
        return float(self.calls % 2), None, False


def test_without_a_checkpoint_the_head_is_untrained_and_credit_is_whitened_over_each_step(tmp_path, monkeypatch, capsys):
    """The table says the head is untrained; and the critic's credit is what training uses: whitened over every
    action of a step of data.prompts_per_step questions (TINY: 2), so each step's turn credits have mean 0 and
    population σ 1, where one question's alone need not."""
    monkeypatch.setattr("agentcredit.run.compose.make_reward_fn", lambda env_cfg: AlternatingReward())
    out = tmp_path / "fid"
    fidelity_cli(*TINY, "n=4", "group_size=3", "mc=2", "bootstrap=0", "samples=0", "methods=[grpo,turn_critic]",
                 f"hydra.run.dir={out}")
    table = (out / "fidelity.md").read_text()
    assert "turn_critic: untrained head (no checkpoint" in table and "grpo:" not in table
    records = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    credit = [torch.tensor([c for r in record["rollouts"] for c in r["credit"]["turn_critic"]], dtype=torch.float64)
              for record in records]
    for step in (torch.cat(credit[:2]), torch.cat(credit[2:])):
        assert step.mean().item() == pytest.approx(0.0, abs=1e-6) and step.std(correction=0).item() == pytest.approx(1.0)
    assert any(abs(c.mean().item()) > 1e-3 for c in credit)  # whitened over the step, not over each question


def test_a_count_that_cuts_a_step_is_one_line_for_a_method_with_a_step_hook(tmp_path, capsys):
    with mock.patch("agentcredit.run.compose.build_components", side_effect=AssertionError("loaded a model")):
        with pytest.raises(SystemExit) as exit_info:
            fidelity_cli(*TINY, "n=3", "methods=[grpo,turn_critic]", f"hydra.run.dir={tmp_path}")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["config error: n=3: turn_critic computes credit over a whole step of data.prompts_per_step=2 "
                   "questions; give n a multiple of 2"]
    fidelity_cli(*TINY, "n=3", "group_size=2", "mc=2", "bootstrap=0", "samples=0", "methods=[grpo]",
                 f"hydra.run.dir={tmp_path / 'grpo'}")  # a method without one: any n, one question at a time
    assert len((tmp_path / "grpo" / "turns.jsonl").read_text().splitlines()) == 3
    # Added to that folder of 3 questions with a larger n: the folder's count cuts the step, one line, nothing loads.
    capsys.readouterr()
    with mock.patch("agentcredit.run.compose.build_components", side_effect=AssertionError("loaded a model")):
        with pytest.raises(SystemExit) as exit_info:
            fidelity_cli(*TINY, "n=4", "group_size=2", "mc=2", f"add_to={tmp_path / 'grpo'}", "methods=[turn_critic]",
                         f"hydra.run.dir={tmp_path / 'run'}")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"config error: add_to: {tmp_path / 'grpo'} holds 3 questions, not a multiple of "
                       "data.prompts_per_step=2: ['turn_critic'] computes credit over whole steps")


def test_notes_of_added_methods_join_the_stored_ones():
    from pathlib import Path

    from agentcredit.fidelity.adding import Addition, merged

    record = {"index": 0, "methods": ["grpo"], "settings": "old", "rollouts": [{"credit": {"grpo": [0.0]}}],
              "cost": {"methods": {"grpo": {"seconds": 0.1}}}, "notes": {"old_critic": "untrained head"}}
    entry = {"credit": [{"turn_critic": [0.5]}], "cost": {"turn_critic": {"seconds": 1.0}},
             "notes": {"turn_critic": "trained head of run.ckpt (step 30)"}}
    addition = Addition(Path("."), [record], ["grpo"], ["turn_critic"], "new", None, done={0: entry})
    (out,) = merged(addition)
    assert out["notes"] == {"old_critic": "untrained head", "turn_critic": "trained head of run.ckpt (step 30)"}
    assert out["rollouts"][0]["credit"] == {"grpo": [0.0], "turn_critic": [0.5]}
    del record["notes"], entry["notes"]
    assert "notes" not in merged(addition)[0]  # no note: the record stays as before notes existed
