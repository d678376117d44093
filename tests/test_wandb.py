"""W&B: offline without a key (files in the run folder, no prompt), online with one, secrets never logged,
and the W&B run finished even when training fails (so a sweep's next job gets its own run)."""

from __future__ import annotations

import time

import pytest
import yaml

from agentcredit.common.secret_keys import redact_secrets
from agentcredit.lit.wandb_logger import wandb_mode
from agentcredit.lit.module import AgentRLModule
from tiny_runs import train_tiny

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SECRET = "sk-do-not-log-me"
# judge=openai with its key in the environment, where secrets must come from (credit=grpo never builds the judge).
WANDB_RUN = ["logger=wandb", "logger.group=g_test", "logger.tags=[t_one,t_two]", "judge=openai", "judge.model=m"]


@pytest.fixture
def no_wandb_account(monkeypatch, tmp_path):
    """No key anywhere, and wandb's own settings and caches kept out of the home directory."""
    import os

    for key in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / var.lower()))
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.setenv("AGENTCREDIT_JUDGE_API_KEY", SECRET)


def test_mode_online_only_with_a_key():
    assert wandb_mode(None, {}) == "offline"
    assert wandb_mode(None, {"WANDB_API_KEY": "k"}) == "online"
    assert wandb_mode("online", {}) == "offline"  # would otherwise stop and ask for a login
    assert wandb_mode(None, {"WANDB_MODE": "disabled", "WANDB_API_KEY": "k"}) == "disabled"
    assert wandb_mode("offline", {"WANDB_API_KEY": "k"}) == "offline"
    with pytest.raises(ValueError, match=r"logger.mode \(or WANDB_MODE\) must be one of \['online', 'offline', 'disabled'\], got 'dry'"):
        wandb_mode("dry", {})


def test_key_from_dot_env_and_the_environment_wins(tmp_path, monkeypatch, no_wandb_account):
    from agentcredit.run.train import load_env_file

    (tmp_path / ".env").write_text("WANDB_API_KEY=from-file\nAGENTCREDIT_JUDGE_MODEL=file-model\nAGENTCREDIT_CACHE=\n")
    monkeypatch.delenv("AGENTCREDIT_CACHE", raising=False)
    monkeypatch.setenv("AGENTCREDIT_JUDGE_MODEL", "env-model")
    monkeypatch.setenv("WANDB_API_KEY", "")  # recorded, so the value read from the file is undone after the test
    monkeypatch.delenv("WANDB_API_KEY")
    assert load_env_file() == str(tmp_path / ".env")
    import os

    assert os.environ["WANDB_API_KEY"] == "from-file" and os.environ["AGENTCREDIT_JUDGE_MODEL"] == "env-model"
    assert "AGENTCREDIT_CACHE" not in os.environ  # empty in the file = unset
    assert wandb_mode(None) == "online"


def test_redact_secrets():
    cfg = {"judge": {"api_key": "k", "model": "m"}, "x": [{"hf_token": "t"}], "openai_api_key": None, "lr": 1}
    assert redact_secrets(cfg) == {"judge": {"api_key": "<redacted>", "model": "m"}, "x": [{"hf_token": "<redacted>"}],
                                   "openai_api_key": None, "lr": 1}


def test_offline_run_writes_its_files_without_a_key(tmp_path, no_wandb_account):
    import wandb

    out = tmp_path / "run"
    train_tiny(out, *WANDB_RUN)
    assert wandb.run is None  # finished
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    expected = (b"g_test", b"t_one", b"micro_batch_size", b"train/reward")
    record = b""
    for _ in range(60):  # wandb's writer process may still be flushing the run file on a busy machine
        record = next(runs[0].glob("run-*.wandb")).read_bytes()
        if all(logged in record for logged in expected):
            break
        time.sleep(0.5)
    for logged in expected:
        assert logged in record, logged
    assert (out / "metrics.csv").exists()  # the CSV is written alongside, for scripts/plot_run.py
    for path in [*out.rglob("*"), *(tmp_path / "wandb_home").rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert yaml.safe_load((out / "resolved_config.yaml").read_text())["judge"]["api_key"] is None


def test_wandb_run_is_finished_when_training_fails(tmp_path, monkeypatch, no_wandb_account):
    import wandb

    def fails(self, questions, batch_idx):
        raise RuntimeError("training failed")

    monkeypatch.setattr(AgentRLModule, "training_step", fails)
    with pytest.raises(RuntimeError, match="training failed"):
        train_tiny(tmp_path / "run", "logger=wandb")
    assert wandb.run is None
    assert len(list((tmp_path / "run" / "wandb").glob("offline-run-*"))) == 1
