"""The layers of docs/architecture.md, checked on the source: imports point down and never close a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "agentcredit"

# area -> areas it may import (besides itself and the base areas). Anything else runs up a layer.
# An area is a folder of the package; within run/, checks/ and analysis/ each module is its own area,
# so that their order (docs/architecture.md) is checked too.
BASE = {"credit", "common", "records", "agentcredit"}
LOWER = {"models", "agent", "env", "world"}
ALLOWED = {
    "credit": set(),
    "env": set(),
    "world": {"env"},
    "agent": {"env", "world"},
    "models": {"agent", "env", "world"},
    "judge": {"agent", "models", "env", "world"},
    "lit": {"agent", "models", "env", "world"},
    "testbed": {"lit"} | LOWER,
    "checks.secret_check": set(),
    "checks.arm_overrides": {"checks.secret_check"},
    "checks.config_checks": {"judge"} | LOWER,
    "checks.validation": {"checks.config_checks", "testbed", "lit", "judge"} | LOWER,
    "run.preemption": set(),
    "run.carry": set(),
    "run.sweep": {"run.preemption", "analysis.sweep_progress"},
    "run.joblib_launcher": {"run.sweep", "analysis.sweep_progress"},
    "run.compose": {"checks.validation", "testbed", "lit", "judge"} | LOWER,
    "run.evaluate": {"checks.validation", "checks.config_checks", "run.compose", "lit"} | LOWER,
    "run.recorded_arm": {"checks.arm_overrides", "checks.validation", "run.sweep"} | LOWER,
    "run.train": {"checks.validation", "checks.secret_check", "run.compose", "run.evaluate", "run.sweep", "run.preemption",
                  "run.recorded_arm",
                  "testbed", "lit", "judge"} | LOWER,
    "fidelity": {"checks.validation", "checks.config_checks", "run.compose", "run.evaluate", "lit", "judge"} | LOWER,
    "analysis.comparison": {"analysis.comparison_runs", "analysis.comparison_stats", "analysis.comparison_curves",
                            "analysis.comparison_base", "analysis.comparison_format"},
    "analysis.comparison_base": {"analysis.comparison_runs", "analysis.comparison_stats", "analysis.comparison_format"},
    "analysis.comparison_format": set(),
    "analysis.comparison_curves": {"analysis.comparison_runs", "analysis.comparison_stats", "analysis.pilot"},
    "analysis.comparison_runs": set(),
    "analysis.comparison_stats": set(),
    "analysis.tuning_spec": set(),
    "analysis.tuning_jobs": set(),
    "analysis.tuning_archive": {"analysis.comparison_runs", "analysis.tuning_jobs", "analysis.tuning_spec"},
    "analysis.tuning_halving": {"analysis.tuning_jobs", "analysis.tuning_archive", "analysis.tuning_spec"},
    "analysis.tuning": {"analysis.tuning_spec", "analysis.comparison_stats", "analysis.tuning_jobs",
                        "analysis.tuning_archive", "analysis.tuning_halving"},
    "run.tuning_eval": {"run.evaluate", "run.compose", "analysis.tuning"} | LOWER,
    "analysis.fidelity_vs_gain": {"analysis.comparison", "analysis.comparison_runs"},
    "analysis.pilot": set(),
    "analysis.sweep_progress": set(),
    "analysis.critic_probe": {"analysis.comparison_stats"},
}
# The commands (agentcredit/cli/) are the entry points: they may import every area, and nothing imports them.
ALLOWED["cli"] = set(ALLOWED)
SPLIT = {"run", "checks", "analysis"}  # folders whose modules are areas of their own


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """module -> the agentcredit modules it imports anywhere in its body (lazy imports too)."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        found = graph.setdefault(module_name(path), set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                # `from agentcredit.run import evaluate` imports the module agentcredit.run.evaluate
                names = [f"{node.module}.{a.name}" if (SRC.parent / node.module.replace(".", "/") / f"{a.name}.py").exists()
                         else node.module for a in node.names]
            else:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found.update(n for n in names if n.split(".")[0] == "agentcredit")
    return graph


def area(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in SPLIT:
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else parts[0]


def test_imports_run_down_the_layers():
    wrong = sorted(f"{a} -> {b}" for a, targets in imports().items() for b in targets
                   if area(a) != area(b) and area(b) not in BASE | ALLOWED.get(area(a), set()))
    assert not wrong, "imports that run up a layer (docs/architecture.md):\n" + "\n".join(wrong)


def test_credit_imports_nothing_outside_itself():
    outside = sorted(f"{a} -> {b}" for a, targets in imports().items() if area(a) == "credit"
                     for b in targets if area(b) != "credit" and b != "agentcredit")
    assert not outside


def test_no_import_circles():
    graph = imports()
    known = set(graph)
    resolve = lambda name: name if name in known else name.rsplit(".", 1)[0]  # noqa: E731  (from pkg import mod)
    edges = {a: {resolve(b) for b in bs} - {a} for a, bs in graph.items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if nxt.endswith("__init__") or nxt == "agentcredit":
                continue
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, stack + [nxt]):
                return True
        state[node] = 2
        return False

    for module in sorted(edges):
        if state.get(module) is None and visit(module, [module]):
            break
    assert not cycle, "import circle: " + " -> ".join(cycle)


def test_the_checker_sees_a_circle_and_an_upward_import(tmp_path, monkeypatch):
    """The checks above can fail: a fake package where env imports agent, which imports env."""
    fake = tmp_path / "agentcredit"
    (fake / "env").mkdir(parents=True)
    (fake / "agent").mkdir()
    (fake / "env" / "browser.py").write_text("from agentcredit.agent.rollout import x\n")
    (fake / "agent" / "rollout.py").write_text("from agentcredit.env.browser import y\n")
    monkeypatch.setattr(__import__(__name__), "SRC", fake)
    graph = imports()
    assert graph["agentcredit.env.browser"] == {"agentcredit.agent.rollout"}
    with pytest.raises(AssertionError, match="agentcredit.env.browser -> agentcredit.agent.rollout"):
        test_imports_run_down_the_layers()
    with pytest.raises(AssertionError, match="import circle"):
        test_no_import_circles()
