"""Experiment loggers chosen with logger=csv|wandb|none. W&B runs also write the CSV, which
`scripts/plot_run.py` reads from the run folder.

metrics.csv is written by `RunFolderCSVLogger`, which departs from Lightning's CSVLogger in three ways:
- every row reaches the file when it is logged (Lightning's keeps 100 steps in memory, all lost to a kill);
- an existing metrics.csv is continued, never deleted: a resumed run appends to it, after
  `callbacks.ContinueRunFolder` has dropped the rows from the checkpoint's step on;
- a new metric (the first validation, the test) widens the header by writing the whole file anew beside it
  and renaming it into place, where Lightning's rewrites the file in place: a kill during that rewrite
  lost every earlier row for good. A row appended on a full disk is taken back, so the file never ends in a
  line cut short by a failed write (a kill can still cut one, which `run_folder.whole_rows` leaves out).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from agentcredit.lit.run_folder import csv_text, whole_rows
from agentcredit.records import atomic_write_text


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
        header, ends_whole = _header(path)
        keys = sorted(set(header).union(*self.metrics))
        if header and keys == header and ends_whole:
            _append(path, csv_text(keys, self.metrics, header_line=False))
        else:  # a new file, a new metric (a wider header), or a last line cut short: the whole file, atomically
            rows = whole_rows(path)[1] if header else []
            atomic_write_text(path, csv_text(keys, rows + self.metrics))
        self.metrics_keys = keys
        self.metrics = []


def _header(path: Path) -> tuple[list[str], bool]:
    """metrics.csv's header ([] for no file or an empty one) and whether the file ends with a whole line."""
    if not path.is_file() or not path.stat().st_size:
        return [], True
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        ends_whole = f.read(1) == b"\n"
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        return next(csv.reader(f), []), ends_whole


def _append(path: Path, text: str) -> None:
    """Append `text`, flushed to the disk; on a failed write (a full disk) the file is cut back to its old
    end, so that no partial row is left for the next append to run into. Unbuffered, so that nothing of a
    failed write is left in a buffer to be written again on close."""
    data = memoryview(text.encode("utf-8"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        try:
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, end)  # shrinking needs no space
            raise
    finally:
        os.close(fd)


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


def build_logger(settings: dict, out: Path, record: dict):
    """The loggers of the config's `logger` group (`settings`); `record` is the whole config as W&B logs it."""
    kind = settings.get("kind")
    if kind == "none":
        return False
    csv_logger = RunFolderCSVLogger(out)
    if kind == "csv":
        return csv_logger
    if kind == "wandb":
        from agentcredit.lit.wandb_logger import build_wandb_logger

        return [csv_logger, build_wandb_logger(settings, out, record)]
    raise ValueError(f"logger.kind must be csv, wandb or none, got {kind!r}")
