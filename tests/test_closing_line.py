"""The closing line of a run that never validated names the setting that kept it from validating."""

import pytest
from omegaconf import OmegaConf

from agentcredit.run.train import why_no_validation


@pytest.mark.parametrize("data,trainer,why", [
    ({"n_val": 0}, {"limit_val_batches": 8, "val_check_interval": 10, "max_steps": 30}, "data.n_val=0"),
    ({"n_val": 64}, {"limit_val_batches": 0, "val_check_interval": 10, "max_steps": 30}, "trainer.limit_val_batches=0"),
    ({"n_val": 64}, {"limit_val_batches": 8, "val_check_interval": 40, "max_steps": 30},
     "trainer.val_check_interval > trainer.max_steps"),
    ({"n_val": 64}, {"limit_val_batches": 8, "val_check_interval": None, "max_steps": 30},
     "trainer.val_check_interval=null"),
])
def test_the_reason_is_the_setting_that_stopped_validation(data, trainer, why):
    assert why_no_validation(OmegaConf.create({"data": data, "trainer": trainer})) == why


def test_a_run_without_a_last_step_says_so_when_it_starts(tmp_path, monkeypatch, capsys):
    """trainer.max_steps=-1 trains until stopped: nothing said so, and no held-out test would ever run."""
    from tiny_runs import TINY, hydra_cli, stop_before_the_model

    from agentcredit.run.train import UNBOUNDED_RUN

    stopped = stop_before_the_model(monkeypatch)
    with pytest.raises((stopped, SystemExit)):
        hydra_cli(*[o for o in TINY if not o.startswith("trainer.max_steps")], "trainer.max_steps=-1",
                  f"hydra.run.dir={tmp_path / 'run'}")
    assert f"[agentcredit] {UNBOUNDED_RUN}" in capsys.readouterr().out.splitlines()
