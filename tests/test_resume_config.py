"""Which settings a resumed run may change (lit/resume_config.py), on hand-made configs."""

import pytest

from agentcredit.common.configs import ConfigError
from agentcredit.lit.resume_config import check_resumed_config, is_free, setting_changes


def test_changes_are_the_settings_both_configs_hold_with_other_values_in_the_saved_order():
    saved = {"credit": {"name": "trace", "K": 3, "alpha": 0.5}, "seed": 0, "train": {"betas": [0.9, 0.98]}, "old": 1}
    now = {"seed": 0, "credit": {"name": "grpo", "K": 3, "alpha": 0.5, "new": 2}, "train": {"betas": [0.9, 0.99]}}
    assert setting_changes(saved, now) == [("credit.name", "trace", "grpo"), ("train.betas", [0.9, 0.98], [0.9, 0.99])]
    assert setting_changes(saved, saved) == []


def test_settings_of_the_host_and_the_records_are_free_and_nothing_under_another_key_is():
    assert is_free("threads") and is_free("logger.kind") and is_free("trainer.max_steps") and is_free("ckpt_path")
    assert not is_free("threads_extra") and not is_free("trainer.max_steps_x") and not is_free("rollout.top_p")
    saved = {"threads": 2, "trainer": {"max_steps": 100, "precision": "32-true"}, "logger": {"kind": "csv"}}
    now = {"threads": 1, "trainer": {"max_steps": 500, "precision": "32-true"}, "logger": {"kind": "wandb"}}
    assert setting_changes(saved, now) == []


def test_a_refusal_names_three_changes_and_counts_the_rest(tmp_path):
    (tmp_path / "resolved_config.yaml").write_text("a: 1\nb: 2\nc: 3\nd: 4\ne: x\n")
    with pytest.raises(ConfigError) as err:
        check_resumed_config(tmp_path, {"a": 0, "b": 0, "c": 0, "d": 0, "e": "x"})
    assert str(err.value).startswith(f"resume=true would continue the run in {tmp_path} under other settings: "
                                     "a=0 where the run has 1, b=0 where the run has 2, c=0 where the run has 3 and 1 "
                                     "more; repeat the run's own overrides")
    check_resumed_config(tmp_path, {"a": 1, "b": 2, "c": 3, "d": 4, "e": "x", "f": "added since"})


def test_no_saved_config_passes_and_a_damaged_one_is_one_line(tmp_path):
    check_resumed_config(tmp_path, {"a": 1})  # a job restored from a committed summary has none
    (tmp_path / "resolved_config.yaml").write_text("a: [1,\n")
    with pytest.raises(ConfigError, match=r"resolved_config.yaml cannot be read \(\w+\), so the resumed run cannot be "
                                          r"checked against the config it started with; repair or remove that file"):
        check_resumed_config(tmp_path, {"a": 1})
    (tmp_path / "resolved_config.yaml").write_text("- a\n")
    with pytest.raises(ConfigError, match="holds no config mapping"):
        check_resumed_config(tmp_path, {"a": 1})
