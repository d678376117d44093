"""The documentation site builds with `mkdocs build --strict` (issue 45, item 2): a broken link between pages,
a link to a missing file or anchor, a page missing from the nav's files, or a docstring mkdocstrings cannot
read fails the default suite. README.md links into the same pages, so its links are checked too."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tiny_runs import ROOT


def test_the_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, not a problem of ours
    # No --quiet: it drops warnings below the level --strict counts, and a strict build would pass them.
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    front = (tmp_path / "site" / "index.html").read_text()
    assert "agentcredit" in front and "fidelity_vs_gain_tuned.png" in front  # the front page shows the current chart
    assert (tmp_path / "site" / "api" / "credit" / "index.html").read_text().count('class="doc doc-heading"') > 10


def test_readme_links_point_at_files_that_exist():
    """README.md is read on GitHub, outside the site: each relative link must name a file of the checkout."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    assert len(links) >= 10, links
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, missing


def test_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
