"""Processes of one run agree on its config: nodes started with different overrides stop at the start, each
with one line, instead of training different numbers of steps until one waits for the other without end;
and every collective wait is bounded by trainer.collective_timeout_s."""

from __future__ import annotations

from datetime import timedelta

import pytest
from omegaconf import OmegaConf

from agentcredit.lit.rank_agreement import config_digest, disagreement, flat_config
from test_multinode import as_run_here, free_port, node_commands, run_nodes
from tiny_runs import tiny_config

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_the_digest_tells_configs_apart_and_names_the_keys_that_differ():
    a = flat_config(OmegaConf.create({"trainer": {"max_steps": 2, "devices": 1}, "dir": "${oc.env:HOME}"}))
    b = flat_config(OmegaConf.create({"trainer": {"devices": 1, "max_steps": 2}, "dir": "${oc.env:HOME}"}))
    c = flat_config(OmegaConf.create({"trainer": {"max_steps": 3, "devices": 1}, "dir": "${oc.env:HOME}"}))
    assert a["dir"] == '"${oc.env:HOME}"'  # as written: a node's own environment may rightly differ
    assert config_digest(a) == config_digest(b) != config_digest(c)
    assert disagreement([a, b, c]) == "rank 2's trainer.max_steps=3 (rank 0: 2)"


def test_ddp_and_fsdp_strategies_get_the_collective_timeout(tmp_path):
    from agentcredit.run.compose import build_strategy
    from agentcredit.checks.validation import prepare_config
    from agentcredit.common.configs import ConfigError

    timeout = timedelta(seconds=7)
    assert build_strategy("ddp", None, timeout)._timeout == timeout
    assert build_strategy("auto", None, timeout) == "auto"
    fsdp = tiny_config(tmp_path, "trainer=fsdp")
    assert build_strategy(dict(fsdp.trainer.strategy), None, timeout)._timeout == timeout
    assert tiny_config(tmp_path).trainer.collective_timeout_s == 1800
    with pytest.raises(ConfigError, match="trainer.collective_timeout_s"):
        prepare_config(tiny_config(tmp_path, "trainer.collective_timeout_s=0"))


@pytest.mark.slow  # two processes of ~20 s of imports and setup each
def test_two_nodes_started_with_different_max_steps_stop_at_once_with_one_line(tmp_path):
    run_dir = tmp_path / "two_nodes"
    port = free_port()
    commands = [as_run_here(c, port, run_dir, "ddp") for c in node_commands()]
    commands[1].append("trainer.max_steps=3")  # node 1 typed another value: it would train one step more
    results = run_nodes(commands, cwd=tmp_path, timeout=240)  # before the check node 1 waited without end
    for status, out in results:
        assert status != 0, out[-3000:]
        assert "exitcode  : 2" in out  # the process exited as a config error does; torchrun reports it as a failure
        lines = [line for line in out.splitlines() if line.startswith("config error:")]
        assert lines == ["config error: the processes of this run were started with different configs: rank 1's "
                         "trainer.max_steps=3 (rank 0: 2); start every node with the same overrides"], out[-3000:]
        assert "src/agentcredit/" not in out, out[-3000:]  # no traceback through this code (torchrun prints its own)
    assert not (run_dir / "checkpoints").exists()
