"""`python train.py -m ...`: one folder per job under the sweep dir; a failing job does not stop the others."""

from __future__ import annotations

import json

import pytest
import yaml

from agentcredit.run.sweep import job_dirname
from tiny_runs import TINY, hydra_cli

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def job_dirs(sweep_dir):
    """The sweep's job folders: not the plots/ folder test_plot draws into the shared sweep."""
    return sorted(p for p in sweep_dir.iterdir() if p.is_dir() and p.name != "plots")


def test_two_job_multirun_completes_into_one_folder_per_job(tiny_sweep):
    sweep, stdout = tiny_sweep
    jobs = job_dirs(sweep)
    assert [j.name.split("_")[0] for j in jobs] == ["0", "1"]
    assert jobs[0].name.startswith("0_") and "credit:grpo" in jobs[0].name[2:].split("+")
    assert jobs[1].name.startswith("1_") and "credit:trace" in jobs[1].name[2:].split("+")
    for job, credit in zip(jobs, ["grpo", "trace"]):
        for artefact in ("metrics.csv", "resolved_config.yaml", "credit_samples.jsonl", "checkpoints/last.ckpt",
                         ".hydra/overrides.yaml"):
            assert (job / artefact).exists(), f"{job.name} has no {artefact}"
        assert yaml.safe_load((job / "resolved_config.yaml").read_text())["credit"]["name"] == credit
        assert not (job / "error.txt").exists()
    assert "credit.K" not in yaml.safe_load((jobs[0] / "resolved_config.yaml").read_text())["credit"]  # grpo ignores K
    # Each job records the setting it trained as its arm, which comparisons group by: K is part of trace's setting
    # and none of grpo's, so a sweep over K gives one trace arm per value (before, every value recorded "trace").
    arms = [json.loads((job / "test_summary.json").read_text())["arm"] for job in jobs]
    assert arms == ["grpo", "trace+credit.K:1"]
    # Named at the start too (resolved_config.yaml, W&B), so a run killed before its test keeps the name.
    assert [yaml.safe_load((job / "resolved_config.yaml").read_text())["recorded_arm"] for job in jobs] == arms
    samples = [json.loads(line) for line in (jobs[1] / "credit_samples.jsonl").read_text().splitlines()]
    assert samples and all({"turn_advantages", "deltas", "turn_rewards", "step"} <= set(s) for s in samples)
    assert f"sweep finished, all jobs ran: {sweep}" in stdout


def _broken_advantages(group):
    raise RuntimeError("broken credit: no advantages")


def test_a_failing_job_is_recorded_and_the_sweep_goes_on(tmp_path, capsys):
    from agentcredit.credit.registry import available_credits, register_credit, unregister_credit

    sweep = tmp_path / "multirun"
    # a method registered in code only (no file, so chosen by its name) that fails in the job's first step,
    # after every config check passed
    from tiny_runs import ensure_signal_credit

    ensure_signal_credit()
    if "broken" not in available_credits():
        register_credit("broken")(_broken_advantages)
    try:
        with pytest.raises(SystemExit, match=r"1 job\(s\) of the sweep failed"):
            hydra_cli("-m", "credit=grpo", "credit.name=broken,signal", *TINY, "logger=csv", f"hydra.sweep.dir={sweep}")
    finally:
        unregister_credit("broken")
    failed, ok = job_dirs(sweep)
    assert "broken credit: no advantages" in (failed / "error.txt").read_text()
    assert (ok / "checkpoints" / "last.ckpt").exists() and not (ok / "error.txt").exists()
    assert f"failed: {failed}" in capsys.readouterr().out


def test_a_bad_value_in_any_job_refuses_the_sweep_before_the_first_job(tmp_path, capsys, monkeypatch):
    for name in ("AGENTCREDIT_JUDGE_BASE_URL", "AGENTCREDIT_JUDGE_MODEL", "AGENTCREDIT_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env above it to give the judge a model
    sweep = tmp_path / "multirun"
    # the first job is good; the second's value would otherwise be refused only when it started, after the first
    with pytest.raises(SystemExit) as stop:
        hydra_cli("-m", "credit=prover", "credit.boundary_value=reward,succes", *TINY, f"hydra.sweep.dir={sweep}")
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["config error: the sweep's job credit.boundary_value=succes: credit.boundary_value "
                     "must be one of ['reward', 'success'], got 'succes'"], lines
    assert not sweep.exists()
    # and a job that needs a setting the sweep does not give: prover under judge=openai without judge.model
    with pytest.raises(SystemExit) as stop:
        hydra_cli("-m", "credit=grpo,prover", "judge=openai", *TINY, f"hydra.sweep.dir={sweep}")
    assert stop.value.code == 2 and "judge.model must be set for judge=openai" in capsys.readouterr().err
    assert not sweep.exists()


def test_multi_process_trainer_under_multirun_is_a_recorded_config_error(tmp_path):
    sweep = tmp_path / "multirun"
    with pytest.raises(SystemExit, match=r"2 job\(s\) of the sweep failed"):
        hydra_cli("-m", "trainer=ddp", "credit=grpo,trace", *TINY, f"hydra.sweep.dir={sweep}")
    for job in job_dirs(sweep):
        assert "cannot run under -m" in (job / "error.txt").read_text()


def test_job_folder_names_can_be_pasted_into_overrides():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    short = job_dirname("credit.K:1+credit:trace+logger.tags:[a,b]")
    assert short == "credit.K:1+credit:trace+logger.tags:_a_b_"
    long = job_dirname("model.hidden_size:64+" * 20)
    assert len(long) == 120 and long[-18:-16] == ".." and long != job_dirname("model.hidden_size:32+" * 20)
    for name in (short, long):
        assert parser.parse_override(f"ckpt_path=outputs/multirun/0_{name}/checkpoints/last.ckpt").value().endswith("last.ckpt")


def test_the_sweep_check_reads_env_and_leaves_hydra_runtime_values_to_the_jobs(tmp_path, monkeypatch, capsys):
    """.env settings count, as each job reads them first; a value taken from Hydra's runtime (${hydra:job.name}) is
    not known before the job runs, and is no reason to refuse (or crash on) the sweep."""
    from agentcredit.cli.train import refuse_a_sweep_with_a_bad_job

    for name in ("AGENTCREDIT_JUDGE_BASE_URL", "AGENTCREDIT_JUDGE_MODEL", "AGENTCREDIT_JUDGE_API_KEY"):
        monkeypatch.setenv(name, "x")  # recorded, so that what the .env sets below is undone after the test
        monkeypatch.delenv(name)
    (tmp_path / ".env").write_text("AGENTCREDIT_JUDGE_MODEL=m\nAGENTCREDIT_JUDGE_BASE_URL=http://localhost:1/v1\n")
    monkeypatch.chdir(tmp_path)
    refuse_a_sweep_with_a_bad_job(["-m", "credit=prover", "judge=openai", "seed=0,1", *TINY])  # no SystemExit
    refuse_a_sweep_with_a_bad_job(["-m", "seed=0,1", "logger=wandb", "logger.mode=disabled",
                                   "logger.name=${hydra:job.name}", *TINY])
    assert capsys.readouterr().err == ""

