"""Lightning's checkpoint IO with the integrity digest of `agentcredit.common.checkpoint_file`: written on
save, checked on load; the file is replaced atomically in its own folder (`write_checkpoint`).

    trainer = L.Trainer(..., plugins=[VerifiedCheckpointIO()])    # compose.build_trainer does this
"""

from __future__ import annotations

from typing import Any

from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from agentcredit.common.checkpoint_file import INTEGRITY_KEY, VERSION, checkpoint_digest, read_checkpoint, write_checkpoint


class VerifiedCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint IO with the digest written on save and checked on load."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        checkpoint[INTEGRITY_KEY] = {"sha256": checkpoint_digest(checkpoint), "version": VERSION}
        if storage_options is not None or "://" in str(path):  # remote storage: fsspec's own transaction
            return super().save_checkpoint(checkpoint, path, storage_options)
        write_checkpoint(checkpoint, path)

    def load_checkpoint(self, path, map_location=None, weights_only: bool | None = None) -> dict[str, Any]:
        # map_location: states load on the CPU; Lightning and the optimiser move them to their devices.
        return read_checkpoint(path, weights_only=weights_only)
