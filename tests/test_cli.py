"""The `agentcredit` command: its subcommands, its errors, and the one Hydra start-up its Hydra subcommands share."""

from __future__ import annotations

import sys
from unittest import mock

import pytest
from hydra.core.hydra_config import HydraConfig

from agentcredit.cli import SUBCOMMANDS, main
from agentcredit.cli.bench import available
from agentcredit.cli.hydra_start import run_hydra_command
from tiny_runs import ROOT, agentcredit_cli

SECRET = "sk-" + "a" * 40  # the shape of an API key


def run(*argv: str) -> int:
    """`agentcredit <argv>` in this process: its exit status (a SystemExit's code, or main's return)."""
    with mock.patch.object(sys, "argv", ["agentcredit", *argv]):
        try:
            return main(list(argv))
        except SystemExit as stop:
            return stop.code


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_every_subcommand_answers_help(name, capsys):
    before = HydraConfig.instance().cfg
    try:
        assert run(name, "--help") == 0
    finally:
        HydraConfig.instance().cfg = before
    out = capsys.readouterr().out
    assert len(out.splitlines()) >= 2, out
    if SUBCOMMANDS[name].hydra:  # Hydra's help lists the config groups of the command's config
        assert "credit:" in out and "== Config ==" in out, out[-1500:]
    elif name != "bench":
        assert out.startswith(f"usage: agentcredit {name}"), out[:200]


def test_no_subcommand_or_an_unknown_one_is_one_line(capsys):
    assert run() == 2
    assert "subcommands:" in capsys.readouterr().out
    assert run("trian") == 2
    assert capsys.readouterr().err == ("agentcredit: no subcommand 'trian'; one of: train, evaluate, fidelity, compare, "
                                       "view, plot, restore, carry, progress, base-policy, bench\n")


def test_bench_runs_the_named_benchmark_of_the_checkout(capsys):
    assert available() == sorted(p.stem.removeprefix("bench_").replace("_", "-")
                                 for p in (ROOT / "benchmarks").glob("bench_*.py"))
    assert {"env", "rollout", "reference-scoring"} <= set(available())
    assert run("bench", "env", "--help") == 0  # the benchmark's own options: it was run, with the arguments after its name
    assert "--docs" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"^agentcredit bench: no benchmark 'nope'; one of: .*rollout"):
        main(["bench", "nope"])


def test_the_console_command_refuses_in_one_line(tmp_path):
    done = agentcredit_cli("restore", str(tmp_path), str(tmp_path / "sweep"), cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (f"agentcredit restore: error: {tmp_path} holds no exported "
                                                    "*.summary.json")


def test_a_bad_value_of_a_hydra_subcommand_is_one_line_before_any_model_loads(tmp_path, capsys):
    before = HydraConfig.instance().cfg
    try:
        assert run("evaluate", "split=nope", f"hydra.run.dir={tmp_path / 'eval'}") == 2
    finally:
        HydraConfig.instance().cfg = before
    assert capsys.readouterr().err.strip().splitlines() == [
        "config error: split must be one of ['train', 'val', 'test'], got 'nope'"]
    assert not (tmp_path / "eval" / "trajectories.jsonl").exists()


def record_the_job(cfg):
    record_the_job.seen = {"argv": list(sys.argv), "job": HydraConfig.get().job.name, "n": cfg.n,
                           "threads": cfg.threads}


def test_the_hydra_start_up_names_the_job_after_the_task_and_hands_it_the_whole_command(tmp_path):
    before, argv = HydraConfig.instance().cfg, list(sys.argv)
    overrides = [f"hydra.run.dir={tmp_path / 'run'}", "n=1", "+threads=1"]
    try:
        run_hydra_command(record_the_job, "eval", overrides, program=["/bin/agentcredit", "evaluate"])
    finally:
        HydraConfig.instance().cfg, sys.argv = before, argv
    # +threads=1 of older command lines is read as threads=1; what runs the command again (Lightning's DDP
    # workers, a stopped run's resume line) is the whole command line, subcommand included
    assert record_the_job.seen == {"argv": ["/bin/agentcredit", "evaluate", f"hydra.run.dir={tmp_path / 'run'}", "n=1",
                                            "threads=1"], "job": "test_cli", "n": 1, "threads": 1}
    assert (tmp_path / "run" / ".hydra" / "overrides.yaml").is_file()


def test_the_hydra_start_up_refuses_a_secret_before_hydra_writes(tmp_path, capsys):
    record_the_job.seen = None
    with pytest.raises(SystemExit) as stop:
        run_hydra_command(record_the_job, "eval", [f"hydra.run.dir={tmp_path / 'run'}", f"judge.api_key={SECRET}"])
    assert stop.value.code == 2 and record_the_job.seen is None
    assert "judge.api_key" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_base_policy_composes_through_the_same_checks(tmp_path, capsys):
    # a secret on its command line would be recorded in info.json's overrides: refused before anything is built
    assert run("base-policy", "--out", str(tmp_path / "bp"), f"judge.api_key={SECRET}") == 2
    assert "judge.api_key" in capsys.readouterr().err
    assert not (tmp_path / "bp").exists()
