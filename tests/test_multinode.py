"""Several nodes simulated on this machine: the documentation's two `torchrun --nnodes=2` commands (one process
per node, CPU, gloo), read from docs/scale-out.md and run as written there, with only a free port, a temporary run
folder and the tests' tiny sizes put in. Both processes join one world of 2, train 2 steps and answer their
own share of the test questions.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from test_readme_commands import readme_commands
from tiny_runs import ROOT, TINY, read_metrics

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SHRINK = [o for o in TINY if o != "logger=none"] + ["logger=csv"]
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def node_commands() -> list[str]:
    """The documented multi-node commands, node 0 first."""
    commands = [c for c in readme_commands() if c.startswith("torchrun --nnodes=2 ")]
    return sorted(commands, key=lambda c: re.search(r"--node_rank=(\d+)", c).group(1))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_run_here(command: str, port: int, run_dir: Path, trainer: str) -> list[str]:
    """The README command with this machine's torchrun, a free port, `run_dir`, `trainer` and the tiny sizes."""
    args = shlex.split(command)
    assert args[0] == "torchrun" and "train.py" in args, command
    args[0] = TORCHRUN
    args = [str(ROOT / "train.py") if a == "train.py" else a for a in args]
    args = [re.sub(r"^--master_port=\d+$", f"--master_port={port}", a) for a in args]
    args = [f"hydra.run.dir={run_dir}" if a.startswith("hydra.run.dir=") else a for a in args]
    args = [f"trainer={trainer}" if a.startswith("trainer=") else a for a in args]
    return args + SHRINK


def run_nodes(commands: list[list[str]], cwd: Path, timeout: float = 300) -> list[tuple[int, str]]:
    """Start every node's command at once; (exit status, output) of each. A node that fails leaves the
    others waiting for it, so on a timeout all of them are stopped (each in its own process group)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    nodes = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True) for c in commands]
    results = []
    try:
        for node in nodes:
            out, _ = node.communicate(timeout=timeout)
            results.append((node.returncode, out))
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
    return results


def test_the_readme_shows_one_command_per_node_that_differ_only_in_node_rank():
    commands = node_commands()
    assert len(commands) == 2, commands
    assert [re.search(r"--node_rank=(\d+)", c).group(1) for c in commands] == ["0", "1"]
    assert commands[0].replace("--node_rank=0", "--node_rank=1") == commands[1]
    args = shlex.split(commands[0])
    assert "--nproc_per_node=1" in args and "trainer.devices=1" in args and "trainer.num_nodes=2" in args


VLLM = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="rollout.engine=vllm needs vLLM")


@pytest.mark.parametrize("trainer, extra", [
    pytest.param("fsdp", [], id="fsdp"), pytest.param("ddp", [], id="ddp"),
    pytest.param("fsdp", ["rollout.engine=vllm"], id="fsdp-vllm", marks=[pytest.mark.slow, VLLM])])
def test_two_nodes_on_this_machine_train_in_one_world(tmp_path, trainer, extra):
    run_dir = tmp_path / "two_nodes"
    port = free_port()
    commands = [as_run_here(c, port, run_dir, trainer) + extra for c in node_commands()]
    results = run_nodes(commands, cwd=tmp_path)
    for rank, (status, out) in enumerate(results):
        assert status == 0, out[-3000:]
        # Lightning read the world from torchrun's variables: this process is global rank `rank` of 2.
        assert f"GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/2" in out, out[-3000:]
    steps = [r for r in read_metrics(run_dir) if r.get("train/loss")]
    assert [int(r["step"]) for r in steps] == [0, 1]
    summary = json.loads((run_dir / "test_summary.json").read_text())
    assert summary["n_test"] == 2  # data.n_test=2: one question answered on each node
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    if extra:  # an engine on each node, reloaded from the gathered shards: its log-probabilities are the trainer's
        for row in steps:
            assert max(float(row[f"rollout/logprob_gap/rank{r}"]) for r in (0, 1)) <= 1e-4
