"""`hydra/launcher=joblib_workers`: Hydra's joblib launcher, ending a sweep whose worker process died in a few lines,
and on request starting the jobs with the most training left first (agentcredit/run/joblib_launcher.py says why and
what they hold).

No `from __future__ import annotations` here: Hydra imports its plugins outside sys.modules, where a dataclass
cannot resolve annotations written as strings."""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher


@dataclass
class SweepJoblibLauncherConf(JobLibLauncherConf):
    _target_: str = "hydra_plugins.agentcredit_launchers.joblib_workers.SweepJoblibLauncher"
    # given: the sweep's own order; longest_first: the jobs with the most training left first (joblib_launcher.py)
    order: str = "given"


ConfigStore.instance().store(group="hydra/launcher", name="joblib_workers_schema", node=SweepJoblibLauncherConf,
                             provider="agentcredit")


class SweepJoblibLauncher(JoblibLauncher):
    def __init__(self, order: str = "given", **kwargs: Any) -> None:
        from agentcredit.run.joblib_launcher import check_order

        super().__init__(**kwargs)
        self.order = check_order(order)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        from joblib.externals.loky.process_executor import TerminatedWorkerError

        sweep_dir = Path(self.config.hydra.sweep.dir)
        try:
            if self.order == "given":
                return super().launch(job_overrides, initial_job_idx)
            return self._launch_in_order(job_overrides, initial_job_idx, sweep_dir)
        except TerminatedWorkerError as err:
            from agentcredit.run.joblib_launcher import dead_worker_lines
            from agentcredit.run.preemption import resume_command

            command = resume_command(sys.argv, "hydra.sweep.dir", sweep_dir.resolve())
            print("\n".join(dead_worker_lines(sweep_dir, str(err), command)), flush=True)
            raise SystemExit(1) from None

    def _launch_in_order(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, sweep_dir: Path) -> Any:
        """The plugin's own launch with the jobs handed to joblib in another order: each keeps its number (its
        folder's name), and the returns come back in the sweep's order."""
        from hydra.core.singleton import Singleton
        from hydra.core.utils import configure_log, setup_globals
        from hydra_plugins.hydra_joblib_launcher._core import execute_job, process_joblib_cfg
        from joblib import Parallel, delayed

        from agentcredit.run.joblib_launcher import dispatch_order

        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        order, line = dispatch_order(sweep_dir, job_overrides, initial_job_idx)
        print(line, flush=True)
        joblib_cfg = dict(self.joblib, backend="loky")  # as the plugin: Hydra needs processes
        process_joblib_cfg(joblib_cfg)
        state = Singleton.get_state()
        runs = Parallel(**joblib_cfg)(
            delayed(execute_job)(initial_job_idx + i, job_overrides[i], self.hydra_context, self.config,
                                 self.task_function, state) for i in order)
        by_index = dict(zip(order, runs))
        return [by_index[i] for i in range(len(job_overrides))]
