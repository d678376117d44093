"""Experiment loggers chosen with logger=csv|wandb|none. W&B runs also write the CSV, which
`scripts/plot_run.py` reads from the run folder.

metrics.csv is written by `RunFolderCSVLogger`, which departs from Lightning's CSVLogger in two ways:
- every row reaches the file when it is logged (Lightning's keeps 100 steps in memory, all lost to a kill);
- an existing metrics.csv is continued, never deleted: a resumed run appends to it, after
  `callbacks.ContinueRunFolder` has dropped the rows from the checkpoint's step on.
"""

from __future__ import annotations

import csv
from pathlib import Path
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter


class AppendingWriter(ExperimentWriter):
    """Lightning's CSV writer without the deletion of an earlier metrics.csv; the header is read from the
    file at each save, so rows dropped or keys added by anyone since the last save are respected."""

    def __init__(self, log_dir: str) -> None:
        self.hparams = {}
        self.metrics = []
        self.metrics_keys = []
        self._fs = get_filesystem(log_dir)
        self.log_dir = log_dir
        self.metrics_file_path = str(Path(log_dir) / self.NAME_METRICS_FILE)
        Path(log_dir).mkdir(parents=True, exist_ok=True)

    def save(self) -> None:
        if not self.metrics:
            return
        path = Path(self.metrics_file_path)
        header: list[str] = []
        if path.is_file() and path.stat().st_size:
            with path.open(newline="") as f:
                header = next(csv.reader(f), [])
        keys = sorted(set(header).union(*self.metrics))
        if header and keys != header:
            self._rewrite_with_new_header(keys)  # a new metric: the whole file gets the wider header
        with path.open("a" if header else "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            if not header:
                writer.writeheader()
            writer.writerows(self.metrics)
        self.metrics_keys = keys
        self.metrics = []


class RunFolderCSVLogger(CSVLogger):
    """metrics.csv in the run folder itself, written at every logged row (flush_logs_every_n_steps=1) and
    continued across resumes."""

    def __init__(self, out: Path) -> None:
        super().__init__(save_dir=str(out), name="", version="", flush_logs_every_n_steps=1)

    @property
    @rank_zero_experiment
    def experiment(self) -> AppendingWriter:
        if self._experiment is None:
            self._experiment = AppendingWriter(log_dir=self.log_dir)
        return self._experiment


def build_logger(cfg, out: Path):
    kind = cfg.logger.kind
    if kind == "none":
        return False
    csv_logger = RunFolderCSVLogger(out)
    if kind == "csv":
        return csv_logger
    if kind == "wandb":
        from agentcredit.lit.wandb_logger import build_wandb_logger

        return [csv_logger, build_wandb_logger(cfg, out)]
    raise ValueError(f"logger.kind must be csv, wandb or none, got {kind!r}")
