"""`python train.py <args>` that kills itself (SIGKILL, as `kill -9` would) in one job of a sweep, at one step:

    python tests/die_in_job.py <job number> <global step> <train.py args...>

The job dies at the start of that training step, after `last.ckpt` of the step before it was written: the
deterministic version of a sweep killed mid-job (tests/test_resume_sweep.py)."""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from agentcredit.lit.module import AgentRLModule  # noqa: E402

job, step = int(sys.argv[1]), int(sys.argv[2])
training_step = AgentRLModule.training_step


def dies_there(self, questions, batch_idx):
    if self.global_step == step and Path(self.settings.samples_dir).name.startswith(f"{job}_"):
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return training_step(self, questions, batch_idx)


AgentRLModule.training_step = dies_there
sys.argv = [str(ROOT / "train.py"), *sys.argv[3:]]
runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
