"""`hydra/launcher=joblib_workers`: Hydra's joblib launcher, ending a sweep whose worker process died in a few lines
(agentcredit/run/joblib_launcher.py says why and what they hold)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher


class SweepJoblibLauncher(JoblibLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        from joblib.externals.loky.process_executor import TerminatedWorkerError

        try:
            return super().launch(job_overrides, initial_job_idx)
        except TerminatedWorkerError as err:
            from agentcredit.run.joblib_launcher import dead_worker_lines
            from agentcredit.run.preemption import resume_command

            sweep_dir = Path(self.config.hydra.sweep.dir)
            command = resume_command(sys.argv, "hydra.sweep.dir", sweep_dir.resolve())
            print("\n".join(dead_worker_lines(sweep_dir, str(err), command)), flush=True)
            raise SystemExit(1) from None
