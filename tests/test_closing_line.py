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
