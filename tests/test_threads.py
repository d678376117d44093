"""`threads`: the job's torch threads (issue 42, item 4). auto is one thread for the tiny testbed model, so
that its default run prints the same closing line on every host of a CPU family, and torch's default for
real models; an integer sets it; `+threads=1` of older command lines and recorded runs still means threads=1."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from agentcredit.common.configs import compose_config, current_overrides
from agentcredit.run.train import job_threads
from tiny_runs import hydra_cli, tiny_config


@pytest.mark.parametrize("threads,kind,hidden,expected", [
    ("auto", "tiny", 128, 1),     # the testbed model: one thread
    ("auto", "tiny", None, 1),
    ("auto", "tiny", 576, None),  # a tiny-kind model in SmolLM2's shape (scripts/gpu_check.sh): torch's default
    ("auto", "hf", None, None),   # a real model: torch's default (None leaves it alone)
    ("auto", "smollm2_135m", None, None),
    (3, "tiny", 128, 3),          # an integer wins over the rule, for every model
    (2, "hf", None, 2),
])
def test_auto_is_one_thread_for_the_tiny_model_and_torchs_default_for_real_ones(threads, kind, hidden, expected):
    assert job_threads(threads, kind, hidden) == expected


def test_the_default_config_says_auto_and_experiments_override_it_plainly():
    assert compose_config([]).threads == "auto"
    assert compose_config(["experiment=compare_long"]).threads == 1
    assert compose_config(["threads=4"]).threads == 4


def test_older_plus_threads_overrides_still_set_threads():
    assert current_overrides(["seed=1", "+threads=1", "+final_test=false", "++threads=2"]) == \
        ["seed=1", "threads=1", "+final_test=false", "++threads=2"]
    assert compose_config(["+threads=2"]).threads == 2  # Hydra alone refuses + on a declared key


class Stop(Exception):
    pass


@pytest.fixture
def threads_at_model_load(monkeypatch):
    """The torch thread count when the run starts loading its model (which stops it, with Stop); torch's
    own count is put back afterwards."""
    seen = []

    def record(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise Stop

    monkeypatch.setattr("agentcredit.run.compose.build_components", record)
    before = torch.get_num_threads()
    yield seen
    torch.set_num_threads(before)


@pytest.mark.parametrize("overrides,expected", [([], 1), (["threads=2"], 2)])
def test_a_run_sets_its_threads_before_any_model_loads(tmp_path, threads_at_model_load, overrides, expected):
    from agentcredit.run.train import run

    torch.set_num_threads(3)  # something other than what either case sets
    with pytest.raises(Stop):
        run(tiny_config(tmp_path, *overrides))
    assert threads_at_model_load == [expected]


def test_plus_threads_on_the_command_line_runs(tmp_path, threads_at_model_load):
    """`python train.py +threads=N ...` as the README's and older experiments' commands write it."""
    # run_job turns the Stop into an exit with a traceback, after the threads were set
    with pytest.raises(SystemExit), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        hydra_cli("+threads=2", "trainer.max_steps=2", f"hydra.run.dir={tmp_path}/run")
    assert threads_at_model_load == [2]


def test_more_threads_than_usable_cores_is_a_warning_at_the_start(tmp_path, monkeypatch, capsys):
    """threads=1000 was taken silently: on 2 cores each operation then waits on threads sharing a core."""
    from agentcredit.run import train as train_module
    from tiny_runs import TINY, stop_before_the_model

    stopped = stop_before_the_model(monkeypatch)
    monkeypatch.setattr(train_module, "usable_cores", lambda: 2)
    try:
        with pytest.raises((stopped, SystemExit)):
            hydra_cli(*TINY, "threads=3", f"hydra.run.dir={tmp_path / 'run'}")
    finally:
        torch.set_num_threads(1)
    assert ("[agentcredit] warning: threads=3 is more than the 2 cores this process may use: threads that share a "
            "core wait on each other at every operation") in capsys.readouterr().err.splitlines()
