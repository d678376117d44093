"""`python train.py <args>` that receives SIGTERM (what a scheduler sends on preemption) at one training step:

    python tests/term_in_job.py <job folder prefix, or -> <global step> <train.py args...>

The signal arrives at the start of that step in the job whose folder name starts with the prefix (`-`: any
run): the deterministic version of a run preempted mid-step (tests/test_preemption.py)."""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from agentcredit.lit.module import AgentRLModule  # noqa: E402

prefix, step = sys.argv[1], int(sys.argv[2])
training_step = AgentRLModule.training_step


def preempted_there(self, questions, batch_idx):
    if self.global_step == step and (prefix == "-" or Path(self.settings.samples_dir).name.startswith(prefix)):
        os.kill(os.getpid(), signal.SIGTERM)  # handled between bytecodes: the step itself still runs to its end
    return training_step(self, questions, batch_idx)


AgentRLModule.training_step = preempted_there
sys.argv = [str(ROOT / "train.py"), *sys.argv[3:]]
runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
