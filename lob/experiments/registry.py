"""The experiment registry: one ``experiments/<name>.yaml`` per experiment.

A definition names its notebook, a description, tags and three parameter presets:
``quick`` (CI, seconds; equal to the notebook's own defaults so nbval runs it), ``default``
(the README's main batch) and ``full`` (the seeds' sizes). Parameters are checked against
the notebook's ``parameters`` cell (papermill's ``inspect_notebook``) before anything runs.

A preset may hold a ``grid``: parameter -> list of values. It expands into one run per point
of the cartesian product, each point on top of the preset's other parameters::

    presets:
      quick:
        scale: 0.002
        grid: {engine: [v1, v2], workload: [mixed_70_20_10, stp_sweep]}   # 4 runs

``timing: false`` declares an experiment that measures no latency; by default every
experiment is a timing run, which the Dask executor never overlaps with another timing run
on the same host. ``batch: false`` keeps an experiment out of the default batch (``lob main``,
``run_batch()`` without names); it still runs by name or with ``--all``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from lob.paths import experiments_dir

PRESETS = ("quick", "default", "full")
# parameters the runner sets itself; a preset or -p may not override them
RESERVED = ("out_dir",)


@dataclass(frozen=True)
class Experiment:
    """One experiment definition, as read from its YAML file."""

    name: str
    notebook: Path
    description: str = ""
    tags: tuple[str, ...] = ()
    presets: dict[str, dict] = field(default_factory=dict)
    timeout: int | None = None  # per-cell execution timeout in seconds (None: no limit)
    grids: dict[str, dict[str, list]] = field(default_factory=dict)  # preset -> axis -> values
    timing: bool = True  # measures latency: never run beside another timing run on a host
    batch: bool = True  # part of the default batch (lob main)

    def param_sets(self, preset: str, overrides: dict | None = None) -> list[dict]:
        """One parameter dict per run of the preset: its grid expanded (cartesian product, in
        the YAML's axis order) on top of its parameters, ``overrides`` on top of each point.

        An override of a grid axis pins that axis to the one value. Every set is validated
        against the notebook (``ValueError`` naming the parameter).
        """
        if preset not in self.presets:
            raise ValueError(f"experiment {self.name!r} has no preset {preset!r}; "
                             f"presets: {', '.join(self.presets)}")
        overrides = overrides or {}
        axes = {k: v for k, v in self.grids.get(preset, {}).items() if k not in overrides}
        sets = []
        for point in itertools.product(*axes.values()):
            merged = {**self.presets[preset], **dict(zip(axes, point, strict=True)),
                      **overrides}
            validate_params(self, merged)
            sets.append(merged)
        return sets

    def params(self, preset: str, overrides: dict | None = None) -> dict:
        """The preset's parameters with ``overrides`` on top, validated against the notebook
        (a preset whose grid has more than one point: ``ValueError``, see :meth:`param_sets`)."""
        sets = self.param_sets(preset, overrides)
        if len(sets) != 1:
            raise ValueError(f"experiment {self.name!r}: preset {preset!r} is a grid of "
                             f"{len(sets)} runs; use param_sets()")
        return sets[0]


def load(path: Path) -> Experiment:
    """Read one definition; the notebook path is relative to the YAML file's directory."""
    data = yaml.safe_load(path.read_text()) or {}
    unknown = set(data) - {"notebook", "description", "tags", "presets", "timeout", "timing",
                           "batch"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
    if "notebook" not in data:
        raise ValueError(f"{path}: missing key 'notebook'")
    presets = data.get("presets") or {}
    missing = [p for p in PRESETS if p not in presets]
    if missing:
        raise ValueError(f"{path}: missing presets {missing} (need {', '.join(PRESETS)})")
    presets = {k: dict(v or {}) for k, v in presets.items()}
    grids = {k: _grid(path, k, v.pop("grid")) for k, v in presets.items() if "grid" in v}
    for preset, grid in grids.items():
        both = sorted(set(grid) & set(presets[preset]))
        if both:
            raise ValueError(f"{path}: preset {preset!r} sets {both} both as a parameter "
                             "and as a grid axis")
    timing = data.get("timing", True)
    if not isinstance(timing, bool):
        raise ValueError(f"{path}: 'timing' must be true or false, got {timing!r}")
    batch = data.get("batch", True)
    if not isinstance(batch, bool):
        raise ValueError(f"{path}: 'batch' must be true or false, got {batch!r}")
    return Experiment(
        name=path.stem,
        notebook=(path.parent / data["notebook"]).resolve(),
        description=str(data.get("description", "")).strip(),
        tags=tuple(data.get("tags") or ()),
        presets=presets,
        timeout=data.get("timeout"),
        grids=grids,
        timing=timing,
        batch=batch,
    )


def _grid(path: Path, preset: str, grid) -> dict[str, list]:
    """A preset's ``grid``, checked: each axis a non-empty list of distinct values."""
    if not isinstance(grid, dict) or not grid:
        raise ValueError(f"{path}: preset {preset!r}: 'grid' must map parameters to lists")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}: preset {preset!r}: grid axis {key!r} must be a "
                             f"non-empty list, got {values!r}")
        if any(values.index(v) != i for i, v in enumerate(values)):
            raise ValueError(f"{path}: preset {preset!r}: grid axis {key!r} repeats a value")
    return dict(grid)


def experiment_names() -> list[str]:
    """Names of every defined experiment, sorted (``claims.yaml`` defines claims, not an
    experiment: see :mod:`lob.studies.claims`)."""
    return sorted(p.stem for p in experiments_dir().glob("*.yaml") if p.stem != "claims")


def batch_names() -> list[str]:
    """The default batch: every experiment not marked ``batch: false``."""
    return [n for n in experiment_names() if get_experiment(n).batch]


def get_experiment(name: str) -> Experiment:
    """The definition of ``name``; an unknown name is an error listing the known ones."""
    # only a registered name: an absolute path or ``../x`` must not pick a YAML elsewhere
    # (its runs would be written outside the artifacts folder)
    path = experiments_dir() / f"{name}.yaml"
    if not isinstance(name, str) or name not in experiment_names():
        raise ValueError(f"unknown experiment {name!r}; experiments: "
                         f"{', '.join(experiment_names()) or '(none)'}")
    return load(path)


@cache
def _inspect(notebook: str, mtime: float) -> dict:
    import papermill as pm

    return pm.inspect_notebook(notebook)


def notebook_parameters(notebook: Path) -> dict[str, dict]:
    """The notebook's ``parameters`` cell: name -> {inferred_type_name, default, help}."""
    if not notebook.exists():
        raise FileNotFoundError(f"notebook {notebook} does not exist")
    return _inspect(str(notebook), notebook.stat().st_mtime)


def _type_ok(type_name: str, value) -> bool:
    t = type_name.replace(" ", "").lower()
    base = t.split("[", 1)[0]
    if t in ("none", "any", ""):
        return True
    if "|" in t or base in ("optional", "union"):  # unions: accept None or any listed type
        parts = t.replace("optional[", "").rstrip("]").replace("union[", "").replace(",", "|")
        return any(_type_ok(p, value) for p in parts.split("|")) or value is None
    if base == "bool":
        return isinstance(value, bool)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    if base in ("list", "tuple"):
        if not isinstance(value, list | tuple):
            return False
        inner = t[len(base) + 1:-1] if "[" in t else ""
        return not inner or all(_type_ok(inner, v) for v in value)
    if base == "dict":
        return isinstance(value, dict)
    return True  # a type we do not model: papermill passes it through


def validate_params(exp: Experiment, params: dict) -> None:
    """Raise ``ValueError`` naming the key when a parameter is unknown or mistyped."""
    declared = notebook_parameters(exp.notebook)
    for key, value in params.items():
        if key in RESERVED:
            raise ValueError(f"{exp.name}: parameter {key!r} is set by the runner")
        if key not in declared:
            raise ValueError(f"{exp.name}: unknown parameter {key!r}; the notebook's "
                             f"parameters: {', '.join(sorted(declared))}")
        tname = declared[key]["inferred_type_name"]
        if not _type_ok(tname, value):
            raise ValueError(f"{exp.name}: parameter {key!r} must be {tname}, "
                             f"got {type(value).__name__} {value!r}")
