"""An installed (not editable) package holds every config file: pyproject's package-data globs cover the whole of
src/agentcredit/conf/, however deep (conf/hydra/launcher/ is two folders down)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_config_file_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["agentcredit"]
    package = ROOT / "src" / "agentcredit"
    shipped = {path for pattern in globs for path in package.glob(pattern)}
    configs = set((package / "conf").rglob("*.yaml"))
    assert configs and not sorted(str(p.relative_to(package)) for p in configs - shipped)
