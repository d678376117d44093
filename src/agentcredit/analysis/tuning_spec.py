"""A tuning sweep's plan: which arms, which grid of settings each, which seeds, and the jobs that follow.

The spec is a YAML file (conf/tuning/long.yaml is the long-horizon comparison's):

    experiment: tune_long        # the training settings every job shares (conf/experiment/<name>.yaml)
    tuning_set: 512              # questions at the val split's end that score a job (world/splits.py)
    seeds: [10, 11]
    halving: {keep: 2}           # optional: later seeds run only each arm's 2 best points (analysis/tuning_halving.py)
    arms:
      trace:
        why: one line: why these knobs
        grid:                    # the arm's current setting first: ties go to the point listed first
          - {credit.alpha_turn: 0.2, credit.K: 3}
          - {credit.alpha_turn: 1.0, credit.K: 3}

Every arm must have the same number of grid points (an equal tuning budget), and every point of an arm sets
the same knobs. A job is (seed, arm, point); jobs run seed by seed, so a sweep cut short holds whole seeds.
Its folder is `<sweep>/<arm>/<point>_seed<k>`, the point named by its overrides with `@` between key and value
(`credit.K@3+credit.alpha_turn@0.2`: a name Windows can hold and a Hydra override can carry unquoted); reports
name it with `:` (`credit.K:3+credit.alpha_turn:0.2`).
`jobs` lists every job the grid allows; with `halving`, which of the later seeds' jobs run is decided as the
earlier seeds' scores come in (`analysis/tuning_halving.py`). `refuse_untrainable_points` asks of each point's
training overrides whether train.py would refuse them, so that a value no job can train with is refused before any runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")  # a dotted config key: credit.K, train.lr
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_TEXT_VALUE = re.compile(r"^[A-Za-z0-9_.\-]+$")  # a string knob value, part of a folder name on every system


class SpecError(ValueError):
    """A tuning spec that cannot be run as written (one line)."""


def format_value(value) -> str:
    """A knob value as a Hydra override writes it (true/false for booleans, repr for floats)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class GridPoint:
    settings: tuple[tuple[str, object], ...]  # (dotted key, value), in the spec's order

    @property
    def name(self) -> str:
        return "+".join(f"{key}:{format_value(value)}" for key, value in self.settings)

    @property
    def folder_name(self) -> str:
        """`name` with `@` for `:`, which Windows cannot hold in a file name (the archive is committed)."""
        return "+".join(f"{key}@{format_value(value)}" for key, value in self.settings)

    @property
    def overrides(self) -> list[str]:
        return [f"{key}={format_value(value)}" for key, value in self.settings]


@dataclass(frozen=True)
class ArmGrid:
    arm: str  # a file of conf/arm/
    why: str
    points: tuple[GridPoint, ...]  # the first is the arm's current setting

    @property
    def knobs(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.points[0].settings)


@dataclass(frozen=True)
class Job:
    arm: str
    point: GridPoint
    seed: int
    folder: Path

    def train_overrides(self, experiment: str) -> list[str]:
        """`python train.py` overrides of this job; resume=true continues it (or starts it: an empty folder)."""
        return [f"experiment={experiment}", f"arm={self.arm}", *self.point.overrides, f"seed={self.seed}",
                f"hydra.run.dir={self.folder}", "resume=true"]


@dataclass(frozen=True)
class TuningSpec:
    experiment: str
    tuning_set: int
    seeds: tuple[int, ...]
    arms: tuple[ArmGrid, ...]
    keep: int | None = None  # halving: on each seed after the first, only each arm's `keep` best points; None: all

    def grid(self, arm: str) -> ArmGrid:
        for grid in self.arms:
            if grid.arm == arm:
                return grid
        raise SpecError(f"arm {arm!r} is not in the tuning spec; its arms: {', '.join(g.arm for g in self.arms)}")

    def jobs(self, sweep_dir: str | Path) -> list[Job]:
        sweep = Path(sweep_dir)
        return [Job(grid.arm, point, seed, sweep / grid.arm / f"{point.folder_name}_seed{seed}")
                for seed in self.seeds for grid in self.arms for point in grid.points]


def _int(value, what: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(f"{what} must be an integer >= {low}, got {value!r}")
    return value


def _point(arm: str, index: int, raw) -> GridPoint:
    if not isinstance(raw, dict) or not raw:
        raise SpecError(f"arm {arm}: grid point {index + 1} must be a mapping of knob: value, got {raw!r}")
    for key, value in raw.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise SpecError(f"arm {arm}: grid point {index + 1}: {key!r} is not a dotted config key such as credit.K")
        if not isinstance(value, (bool, int, float, str)):
            raise SpecError(f"arm {arm}: grid point {index + 1}: {key} must be a number, a string or true/false")
        if isinstance(value, str) and not _TEXT_VALUE.match(value):
            raise SpecError(f"arm {arm}: grid point {index + 1}: {key}: {value!r} must be letters, digits, '_', '-' or "
                            "'.': it names the job's folder")
    return GridPoint(tuple(raw.items()))


def _arm(arm, raw) -> ArmGrid:
    if not isinstance(arm, str) or not _NAME.match(arm):
        raise SpecError(f"arm names are conf/arm/ file names (letters, digits, _), got {arm!r}")
    if not isinstance(raw, dict) or not isinstance(raw.get("grid"), list) or not raw["grid"]:
        raise SpecError(f"arm {arm}: needs a non-empty grid: list")
    points = tuple(_point(arm, i, p) for i, p in enumerate(raw["grid"]))
    knobs = {key for key, _ in points[0].settings}
    for i, point in enumerate(points):
        if {key for key, _ in point.settings} != knobs:
            raise SpecError(f"arm {arm}: grid point {i + 1} sets {sorted(k for k, _ in point.settings)}, "
                            f"the first sets {sorted(knobs)}; every point must set the same knobs")
    if len({p.name for p in points}) != len(points):
        raise SpecError(f"arm {arm}: a grid point is listed twice")
    return ArmGrid(arm, str(raw.get("why", "")), points)


def parse_spec(raw) -> TuningSpec:
    if not isinstance(raw, dict):
        raise SpecError("a tuning spec is a mapping with experiment, tuning_set, seeds and arms")
    unknown = sorted(set(raw) - {"experiment", "tuning_set", "seeds", "halving", "arms"})
    if unknown:
        raise SpecError(f"unknown key(s) {', '.join(map(str, unknown))}; known: experiment, tuning_set, seeds, halving, arms")
    experiment = raw.get("experiment")
    if not isinstance(experiment, str) or not _NAME.match(experiment):
        raise SpecError(f"experiment must name a file of conf/experiment/, got {experiment!r}")
    seeds = raw.get("seeds")
    if not isinstance(seeds, list) or not seeds:
        raise SpecError("seeds must be a non-empty list of integers")
    seeds = tuple(_int(s, "a seed", 0) for s in seeds)
    if len(set(seeds)) != len(seeds):
        raise SpecError("a seed is listed twice")
    arms = raw.get("arms")
    if not isinstance(arms, dict) or not arms:
        raise SpecError("arms must map each arm to its grid")
    grids = tuple(_arm(arm, grid) for arm, grid in arms.items())
    sizes = {grid.arm: len(grid.points) for grid in grids}
    if len(set(sizes.values())) > 1:
        raise SpecError("every arm needs the same number of grid points (an equal tuning budget); got "
                        + ", ".join(f"{arm} {n}" for arm, n in sizes.items()))
    return TuningSpec(experiment, _int(raw.get("tuning_set"), "tuning_set", 1), seeds, grids,
                      _keep(raw["halving"], len(grids[0].points)) if "halving" in raw else None)


def _keep(raw, points: int) -> int:
    """halving: {keep: k}, 1 <= k < the points of an arm (keeping all of them would halve nothing)."""
    if not isinstance(raw, dict) or set(raw) != {"keep"}:
        raise SpecError(f"halving must be a mapping {{keep: <points kept after the first seed>}}, got {raw!r}")
    keep = _int(raw["keep"], "halving.keep", 1)
    if keep >= points:
        raise SpecError(f"halving.keep must be below the {points} grid points of an arm (keeping all halves nothing), got {keep}")
    return keep


def refuse_untrainable_points(spec: TuningSpec, extra: list[str], problem: Callable[[list[str]], str | None]) -> None:
    """SpecError naming the first grid point whose training overrides (its job's, with the `extra` ones) `problem`
    finds a fault with (scripts/tune.py's: the config train.py would compose refused, in one line): each of its jobs
    would fail with a config error that no rerun fixes, and with halving the later seeds would wait on them for ever."""
    for grid in spec.arms:
        for point in grid.points:
            job = Job(grid.arm, point, spec.seeds[0], Path("."))
            overrides = [o for o in job.train_overrides(spec.experiment) if not o.startswith("hydra.")]
            why = problem([*overrides, *extra])
            if why:
                raise SpecError(f"arm {grid.arm}: grid point {point.name} cannot train: {why}")


def load_spec(path: str | Path) -> TuningSpec:
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise SpecError(f"{path} cannot be read as YAML ({type(err).__name__})") from None
    try:
        return parse_spec(raw)
    except SpecError as err:
        raise SpecError(f"{path}: {err}") from None
