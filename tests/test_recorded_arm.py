"""The arm a run records (run/recorded_arm.py): what the command line changed in the setting, measured on the
resolved config, so a knob's sweep gives one arm per value and one setting one name however it was written."""

from __future__ import annotations

import pytest

from agentcredit.checks.validation import prepare_config
from agentcredit.common.configs import compose_config
from agentcredit.run import recorded_arm as module


def arm_of(monkeypatch, *overrides: str) -> str:
    """The arm `python train.py <overrides>` records: the job's overrides as Hydra would hand them over."""
    monkeypatch.setattr(module, "task_overrides", lambda: list(overrides))
    return module.recorded_arm(prepare_config(compose_config(list(overrides))))


@pytest.mark.parametrize("overrides, arm", [
    (["credit=trace", "credit.K=1"], "trace+credit.K:1"),
    (["credit=trace", "credit.K=1", "credit.alpha_turn=0.5"], "trace+credit.K:1+credit.alpha_turn:0.5"),
    (["credit=trace", "credit.K=3"], "trace"),  # 3 is trace's K: the same setting as plain trace
    (["credit=trace", "credit.transform='raw'"], "trace+credit.transform:raw"),  # quoted or not, one name
    (["credit=trace", "credit.transform=raw"], "trace+credit.transform:raw"),
    (["credit=grpo", "credit.K=3"], "grpo"),  # grpo reads no K: it trained plain GRPO
    (["credit=grpo", "judge=random"], "grpo"),  # nor a judge
    (["credit=prover", "judge=random"], "prover+judge:random"),
    (["credit=prover", "judge.kind=random"], "prover+judge:random"),  # one judge, however it was chosen
    (["credit=prover", "judge=random", "judge.seed=4"], "prover+judge:random+judge.seed:4"),
    (["credit=prover", "judge=heuristic"], "prover"),
    (["arm=grpo_tuned", "train.lr=0.0001"], "grpo_tuned"),  # the arm's own learning rate, repeated
    (["arm=grpo_tuned", "train.lr=3e-4"], "grpo_tuned+train.lr:0.0003"),
    (["arm=budget_grpo_tuned", "credit.outcome_scale=none"], "budget_grpo_tuned+credit.outcome_scale:none"),
    (["credit=trace", "seed=3", "threads=1", "trainer.max_steps=5", "train.micro_batch_size=4"], "trace"),
    (["arm=grpo_tuned", "experiment=compare_long_tuned", "seed=2"], "grpo_tuned"),  # the comparison's jobs
])
def test_the_arm_names_what_changed_in_the_setting(monkeypatch, overrides, arm):
    assert arm_of(monkeypatch, *overrides) == arm


def test_a_sweep_over_a_knob_gives_one_arm_per_value(monkeypatch):
    arms = [arm_of(monkeypatch, "credit=trace", f"credit.K={k}") for k in (0, 1, 3, 5)]
    assert arms == ["trace+credit.K:0", "trace+credit.K:1", "trace", "trace+credit.K:5"]


def test_outside_a_hydra_job_the_arm_is_the_arm_or_the_method(monkeypatch):
    monkeypatch.setattr(module, "task_overrides", lambda: [])
    assert module.recorded_arm(prepare_config(compose_config(["credit=trace", "credit.K=1"]))) == "trace"


def test_a_config_that_cannot_be_composed_again_is_named_by_the_command_never_an_error(monkeypatch, capsys):
    """A run whose config composed once does not fail over its name; it says how it was named."""
    monkeypatch.setattr(module, "compose_config", lambda overrides: 1 / 0)
    assert arm_of(monkeypatch, "credit=trace", "credit.K=1", "seed=2", "judge=random") == "trace+credit.K:1"
    assert "arm is named by the command as typed (trace+credit.K:1)" in capsys.readouterr().err


def test_a_secret_behind_an_environment_interpolation_never_reaches_the_name(monkeypatch):
    """The name goes to W&B: `${oc.env:...}` is named as written, never by the secret it resolves to."""
    monkeypatch.setenv("JUDGE_URL", "https://user:s3c+r3tpassword@host/v1")
    arm = arm_of(monkeypatch, "credit=prover", "judge=openai", "judge.model=m", "judge.base_url=${oc.env:JUDGE_URL}")
    assert "s3c" not in arm and "host" not in arm and "oc.env:JUDGE_URL" in arm, arm


def test_the_setting_keys_are_read_as_hydra_parses_them():
    """`+`, `++`, `~` and `@package` never hide a key; what is not a setting, or not a line Hydra parses, is none."""
    keys = module.setting_keys(["++credit.K=1", "~credit.fill", "+judge.mode=sign", "judge@judge=random", "train.lr=1e-4",
                                "seed=2", "trainer.max_steps=5", "credit=trace", "judgement.x=1", "credit.K=="])
    assert keys == {"++credit.K=1": "credit.K", "~credit.fill": "credit.fill", "+judge.mode=sign": "judge.mode",
                    "judge@judge=random": "judge", "train.lr=1e-4": "train.lr"}


def test_by_the_command_a_prefixed_knob_is_named_by_its_key(monkeypatch, capsys):
    """The fallback names `++credit.K=1` as `credit.K`, and leaves a judge out for a method that asks none."""
    monkeypatch.setattr(module, "compose_config", lambda overrides: 1 / 0)
    assert arm_of(monkeypatch, "credit=trace", "++credit.K=1", "++judge.mode=sign", "judge=random") == "trace+credit.K:1"
    capsys.readouterr()
    # a judge chosen with a package is still the judge (a hand-kept prefix list missed `judge@judge`); a deletion
    # names nothing, though Hydra lets it carry the value it deletes
    keys = module.setting_keys(["credit.K=1", "~credit.alpha_turn=0.2", "~credit.fill", "judge@judge=random"])
    assert module._by_the_command(keys) == {"credit.K": "1", "judge": "random"}
