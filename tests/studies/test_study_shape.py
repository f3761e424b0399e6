"""Every study declares its shape (lob.studies.study.Shape): a parameters dataclass whose fields
are notebook parameters with the notebook's defaults, which the notebook builds and the runner
validates, and its measure / table / claims / plot hooks."""

from __future__ import annotations

import ast
import dataclasses
import importlib

import nbformat
import pytest

from lob.experiments import experiment_names, get_experiment, notebook_parameters
from lob.experiments.runner import check_values
from lob.studies.shape import Parameters, Shape

# one input per study that its parameters dataclass refuses (and what the error names)
BAD = {
    "alloc_profile": ({"claim_engine": "v9"}, "claim_engine"),
    "bisection": ({"runs": 2}, "runs must be >= 3"),
    "compiled_lineage": ({"hotspots_seconds": -1.0}, "hotspots_seconds"),
    "evolution_stress": ({"bitmap_pair": ["v2@numba"]}, "bitmap_pair"),
    "fok_scan_bottleneck": ({"limit_pair": ["v0"]}, "limit_pair"),
    "pipeline_latency": ({"mode": "batch"}, "mode"),
    "real_flow": ({"real_scale": 2.0}, "real_scale"),
    "tail_analysis": ({"tail_scenario": "no_such_scenario"}, "tail_scenario"),
    "version_bisection": ({"max_runs": 1}, "max_runs"),
}


def _module(name: str):
    return importlib.import_module(f"lob.studies.{name}")


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()


def _plain(v):
    """Lists and tuples alike (a frozen dataclass holds a list default as a tuple)."""
    return list(v) if isinstance(v, list | tuple) else v


def test_every_experiment_has_a_study_in_its_shape():
    assert set(BAD) == set(experiment_names())  # a new study gets a refused input here too
    for name in experiment_names():
        shape = getattr(_module(name), "SHAPE", None)
        assert isinstance(shape, Shape), name
        p = shape.parameters
        assert dataclasses.is_dataclass(p) and issubclass(p, Parameters), name
        assert shape.measure and shape.tables, name
        for hook in (*shape.measure, *shape.tables, shape.claims, *shape.plots):
            assert callable(hook), (name, hook)


def test_a_study_no_claim_rests_on_records_none():
    from lob.studies.claims import for_experiment

    for name in ("compiled_lineage", "real_flow", "version_bisection"):
        assert _module(name).SHAPE.claims() == {} and not for_experiment(name), name
    for name in set(BAD) - {"compiled_lineage", "real_flow", "version_bisection"}:
        assert for_experiment(name), name


@pytest.mark.parametrize("name", sorted(BAD))
def test_parameters_are_the_notebooks_with_its_defaults(name):
    shape = _module(name).SHAPE
    declared = notebook_parameters(get_experiment(name).notebook)
    for f in dataclasses.fields(shape.parameters):
        assert f.name in declared, f"{name}: {f.name} is no parameter of the notebook"
        nb_default = ast.literal_eval(declared[f.name]["default"])
        assert _plain(_default(f)) == _plain(nb_default), (name, f.name)
    shape.parameters()  # the notebook's defaults pass


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_notebook_builds_its_parameters(name):
    nb = nbformat.read(get_experiment(name).notebook, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert ".Parameters(" in code, f"{name}: its notebook does not check its parameters"


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_runner_refuses_what_the_parameters_refuse(name):
    bad, says = BAD[name]
    with pytest.raises(ValueError, match=f"^{name}: .*{says}"):
        check_values(name, bad)
    with pytest.raises(ValueError, match=says):
        _module(name).SHAPE.parameters.of(bad)
    check_values(name, {})  # the defaults pass
