"""W&B through Lightning's WandbLogger (`logger=wandb`), never prompting.

Online when WANDB_API_KEY is set (in the environment or in `.env`, loaded by `train.run`), offline
otherwise: the run is written under `<run dir>/wandb/` and can be uploaded later with `wandb sync`.
An explicit `logger.mode` (or WANDB_MODE) wins, except that `online` without a key falls back to
offline, because wandb would otherwise stop and ask for a login. The config is logged as
resolved_config.yaml holds it (`secret_keys.config_for_records`): `${oc.env:...}` unresolved and every
secret (by key name or by value) replaced by "<redacted>".

What else W&B records: the process arguments and the run folder's name, which hold no secret because
the entry scripts refuse one on the command line and in every composed config before Hydra starts
(`secret_check.refuse_secrets`; job folder names are made safe by `sweep.job_dirname` too). It records no
source code, no git diff and no job artefact (`save_code=False`, `disable_git`, `disable_job_creation`):
a diff of uncommitted files is content this project never sees, so it cannot vouch for it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path


log = logging.getLogger(__name__)

MODES = ("online", "offline", "disabled")


def wandb_mode(configured: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """The mode W&B runs in: configured (or WANDB_MODE), else online iff an API key is present."""
    mode = configured or environ.get("WANDB_MODE") or None
    has_key = bool(environ.get("WANDB_API_KEY"))
    if mode is None:
        return "online" if has_key else "offline"
    if mode not in MODES:
        raise ValueError(f"logger.mode (or WANDB_MODE) must be one of {list(MODES)}, got {mode!r}")
    return "offline" if mode == "online" and not has_key else mode


def build_wandb_logger(settings: dict, out: Path, config: dict):
    """`settings`: the config's `logger` group; `config`: the whole config as the run records it
    (`secret_keys.config_for_records`, made once by the composition root)."""
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    mode = wandb_mode(settings.get("mode"))
    os.environ.setdefault("WANDB_SILENT", "true")  # keep the progress bar readable; our own line says where the run is
    if mode == "offline":
        log.info(f"W&B offline (no WANDB_API_KEY): run files in {out / 'wandb'}; upload later with `wandb sync {out / 'wandb'}/offline-run-*`")
    return WandbLogger(
        project=settings.get("project") or "agentcredit",
        entity=settings.get("entity"),
        group=settings.get("group"),
        tags=list(settings.get("tags") or []),
        name=settings.get("name") or out.name,
        save_dir=str(out),
        mode=mode,
        config=config,
        log_model=False,  # checkpoints stay in the run folder; uploading them is opt-in through wandb itself
        save_code=False,
        settings=wandb.Settings(disable_git=True, disable_job_creation=True),
    )


def finish_wandb(failed: bool) -> None:
    """Close the W&B run of this process, if one was started: the next job of a sweep must get its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish(exit_code=1 if failed else 0)
