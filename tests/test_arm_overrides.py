"""A command line that runs one setting under another arm's name is refused (checks/arm_overrides.py)."""

from __future__ import annotations

import pytest

from agentcredit.checks.arm_overrides import arm_override_problem, arm_setting


def test_an_arm_file_gives_its_credit_option_and_its_knobs():
    assert arm_setting("trace_k0") == ("trace", {"credit.K": 0})
    option, knobs = arm_setting("budget_grpo_tuned")
    assert option == "budget-grpo" and knobs == {"train.lr": 0.0003}


def test_an_arm_without_a_file_is_its_credit_option_with_no_knobs_of_its_own():
    assert arm_setting("mc_value") == ("mc-value", {})
    assert arm_setting("mc-value") == ("mc-value", {})
    assert arm_setting("no_such_arm") == (None, {})


@pytest.mark.parametrize("overrides, start", [
    (["arm=igpo_tuned", "credit=grpo"], "arm=igpo_tuned runs credit=igpo, and credit=grpo would train another method "
                                        "under the name igpo_tuned"),
    (["arm=trace_k0", "credit.K=3"], "arm=trace_k0 is the setting credit.K=0, and credit.K=3 would run another setting "
                                     "under its name"),
    (["arm=budget_grpo_tuned", "train.lr=1e-4"], "arm=budget_grpo_tuned is the setting train.lr=0.0003, and "
                                                 "train.lr=0.0001 would run"),
    (["-m", "arm=trace_tuned,igpo_tuned", "credit=trace"], "arm=igpo_tuned runs credit=igpo, and credit=trace"),
    (["--cfg", "job", "arm=trace_k0", "++credit.K=5"], "arm=trace_k0 is the setting credit.K=0, and credit.K=5"),
    (["credit=trace", "credit.name=grpo"], "credit.name=grpo would run grpo under whichever credit= option"),
    (["arm=trace_tuned", "credit.name=grpo"], "credit.name=grpo would run grpo"),
    (["-m", "credit=trace,igpo", "credit.name=spo-chain"], "credit.name=spo-chain would run spo-chain"),
])
def test_overriding_what_an_arm_stands_for_is_one_line(overrides, start):
    problem = arm_override_problem(overrides)
    assert problem is not None and problem.startswith(start) and "\n" not in problem, problem


@pytest.mark.parametrize("overrides", [
    ["arm=trace_k0", "credit.K=0"],                        # the arm's own value, repeated
    ["arm=budget_grpo_tuned", "train.lr=3e-4"],            # the same number, spelt otherwise
    ["arm=mc-value", "credit=mc-value"],
    ["arm=trace", "credit.K=1", "seed=3"],                 # the tuning sweep's jobs: an arm without knobs of its own
    ["arm=trace_tuned", "seed=2", "data.n_val=8"],         # knobs the arm does not set
    ["credit=grpo", "credit.K=3"],                         # no arm named
    ["arm=no_such_arm", "credit=grpo"],                    # Hydra's own error names it
    ["credit=grpo", "credit.name=signal"],                 # a method registered in code, with no file to choose it by
])
def test_settings_that_keep_the_arms_meaning_pass(overrides):
    assert arm_override_problem(overrides) is None


def test_train_refuses_it_with_exit_2_before_anything_is_written(tmp_path, capsys):
    from tiny_runs import hydra_cli

    with pytest.raises(SystemExit) as exit_info:
        hydra_cli("arm=igpo_tuned", "credit=grpo", f"hydra.run.dir={tmp_path}/run")
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error: arm=igpo_tuned runs credit=igpo"), lines
    assert not (tmp_path / "run").exists()
