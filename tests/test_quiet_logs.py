"""A default run prints nothing a user cannot act on: no litlogger tip, no model summary with "Total FLOPs: 0"."""

from __future__ import annotations

import logging

import pytest
from tiny_runs import TINY, cli, tiny_config

from agentcredit.common.configs import compose_config
from agentcredit.lit.quiet_logs import RANK_ZERO_LOGGER, quiet_lightning

TIP = "💡 Tip: For seamless cloud logging"


def test_the_filter_drops_the_tip_and_keeps_every_other_line():
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger = logging.getLogger(RANK_ZERO_LOGGER)
    handler = Keep()
    logger.addHandler(handler)
    try:
        quiet_lightning()
        quiet_lightning()  # a sweep's second job: still one filter
        logger.warning(TIP + ", try installing [litlogger](https://pypi.org/project/litlogger/) ...")
        logger.warning("GPU available: False, used: False")
        logger.warning("`Trainer.fit` stopped: `max_steps=2` reached.")
    finally:
        logger.removeHandler(handler)
    assert seen == ["GPU available: False, used: False", "`Trainer.fit` stopped: `max_steps=2` reached."]
    assert len(logger.filters) == 1


def test_the_model_summary_is_off_by_default_and_can_be_turned_on():
    assert compose_config([]).trainer.enable_model_summary is False
    assert compose_config(["trainer.enable_model_summary=true"]).trainer.enable_model_summary is True


def test_building_the_trainer_logs_no_tip_and_still_the_device_lines(tmp_path, caplog):
    from agentcredit.run.compose import build_trainer

    caplog.set_level(logging.INFO)
    build_trainer(tiny_config(tmp_path, "logger=csv"))  # Lightning's Trainer logs the tip as it is made
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("GPU available") for m in messages), messages
    assert not any(TIP in m for m in messages)


@pytest.mark.slow  # a real command line, about 45 s on a shared machine
def test_a_tiny_run_prints_neither_the_tip_nor_the_flops_line(tmp_path):
    # a real command line: in-process, pytest's own log handlers would swallow Lightning's lines either way
    overrides = [o for o in TINY if o != "logger=none"]  # the default csv logger, as `python train.py` runs
    # TRACE: its frozen reference is a submodule in eval mode, which Lightning would count at the start of training
    done = cli("train.py", *overrides, "credit=trace", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-2000:]
    assert "[agentcredit] final val/accuracy=" in done.stdout  # the output was read: the closing line is in it
    assert TIP not in out and "litlogger" not in out
    assert "Total FLOPs" not in out and "Trainable params" not in out
    assert out.count("GPU available: False, used: False") == 1  # once, not once per handler
    assert "in eval mode at the start of training" not in out  # the module sets the policy's mode itself


def test_with_a_root_handler_lightning_lines_come_once(monkeypatch):
    import lightning  # noqa: F401  (adds Lightning's own console handler to the "lightning" logger)

    package = logging.getLogger("lightning")
    console = logging.StreamHandler()
    monkeypatch.setattr(package, "handlers", [console])  # as Lightning leaves it at import
    monkeypatch.setattr(package, "propagate", True)
    root = logging.getLogger()
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    keep = Keep()
    monkeypatch.setattr(root, "handlers", [keep])  # Hydra's console and train.log, as under `python train.py`
    quiet_lightning()
    assert package.handlers == []
    logging.getLogger("lightning.pytorch.utilities.rank_zero").warning("GPU available: False, used: False")
    assert seen == ["GPU available: False, used: False"]


def test_without_a_root_handler_lightning_keeps_its_console(monkeypatch):
    package = logging.getLogger("lightning")
    console = logging.StreamHandler()
    monkeypatch.setattr(package, "handlers", [console])
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # a script without logging set up: Lightning's is the only one
    quiet_lightning()
    assert package.handlers == [console]


def test_faiss_loader_lines_are_left_out():
    from agentcredit.env.retrieval import import_faiss

    import_faiss()
    assert not logging.getLogger("faiss.loader").isEnabledFor(logging.INFO)
    assert logging.getLogger("faiss.loader").isEnabledFor(logging.WARNING)
