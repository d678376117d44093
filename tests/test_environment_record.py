"""environment.json: what each start of a run ran on."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from agentcredit.records.environment import (append_environment, cpu_model, environment_record, package_versions,
                                              source_revision)


def test_cpu_model_reads_the_model_name_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nflags\t: fpu avx2\n")
    assert cpu_model(info) == "AMD EPYC 9R14"


def test_cpu_model_without_the_file_falls_back_to_platform(tmp_path):
    assert cpu_model(tmp_path / "missing")  # never empty: platform.processor() or the machine name


def test_package_versions_names_missing_distributions_none():
    versions = package_versions(("torch", "no-such-distribution-here"))
    assert versions == {"torch": torch.__version__, "no-such-distribution-here": None}


def test_the_record_holds_the_threads_and_instructions_torch_uses():
    record = environment_record(resuming=False)
    assert record["torch_threads"] == torch.get_num_threads()
    assert record["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["packages"]["torch"] == torch.__version__ and record["resuming"] is False
    json.dumps(record)  # plain JSON


def test_each_start_appends_and_a_damaged_file_is_replaced(tmp_path):
    append_environment(tmp_path, {"start": 1})
    append_environment(tmp_path, {"start": 2})
    assert json.loads((tmp_path / "environment.json").read_text()) == [{"start": 1}, {"start": 2}]
    (tmp_path / "environment.json").write_text('[{"start": 1}, {"sta')  # cut off by a full disk
    append_environment(tmp_path, {"start": 3})
    assert json.loads((tmp_path / "environment.json").read_text()) == [{"start": 3}]
    (tmp_path / "environment.json").write_text('{"not": "a list"}')
    append_environment(tmp_path, {"start": 4})
    assert json.loads((tmp_path / "environment.json").read_text()) == [{"start": 4}]


def test_the_revision_is_read_only_from_the_projects_own_checkout(tmp_path):
    import subprocess

    assert source_revision(tmp_path) is None  # no .git: an installed package
    inner = tmp_path / "site-packages"
    inner.mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert source_revision(inner) is None  # inside someone else's repository: not its revision
    checkout = Path(__file__).resolve().parents[1]
    assert bool(environment_record(resuming=True)["revision"]) == (checkout / ".git").exists()  # this checkout's own
