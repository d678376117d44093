"""Lightning's start-up lines that nobody can act on, left out of a run's output.

    quiet_lightning()   # compose.build_trainer, before the Trainer is made

Lightning announces an optional cloud service on every start ("💡 Tip: For seamless cloud logging ...")
through its rank-zero logger; a filter on that logger drops exactly that message and lets every other
line (devices found, warnings) through. The model summary, whose FLOPs column reads 0 without an
example input, is off by the trainer's own flag instead (`trainer.enable_model_summary`, conf/trainer/cpu.yaml).
Under `python train.py` Hydra logs through the root logger (console and the run folder's train.log), and
Lightning's package logger keeps a console handler of its own besides, so each of its lines came twice;
with a root handler present, Lightning's own console handler goes and its lines come once, through the root.
"""

from __future__ import annotations

import logging

RANK_ZERO_LOGGER = "lightning.pytorch.utilities.rank_zero"
NOT_ACTIONABLE = ("💡 Tip: For seamless cloud logging",)  # message beginnings dropped


class DropNotActionable(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(NOT_ACTIONABLE)


def quiet_lightning() -> None:
    """Install the filter once per process (a sweep builds one Trainer per job); one copy of each line."""
    logger = logging.getLogger(RANK_ZERO_LOGGER)
    if not any(isinstance(f, DropNotActionable) for f in logger.filters):
        logger.addFilter(DropNotActionable())
    package = logging.getLogger("lightning")
    if logging.getLogger().handlers and package.propagate:  # the root prints these lines already
        for handler in [h for h in package.handlers if type(h) is logging.StreamHandler]:
            package.removeHandler(handler)
