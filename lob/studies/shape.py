"""The shape every study module declares, and the parameter rules its checks use.

Each study module ``lob.studies.<experiment>`` declares ``SHAPE = Shape(parameters=Parameters,
measure=(...), tables=(...), claims=claims, plots=(...))`` (:class:`Shape`): its parameters
dataclass (a :class:`Parameters` whose fields are the notebook parameters it checks, with the
notebook's defaults; an instance that exists is valid), the procedures that measure (plain
data out), the builders of its tables (:class:`~lob.studies.conclude.Conclusion` out),
``claims`` (claim id -> measurement; ``{}`` for a study no seed claim rests on) and its plots.
The experiment runner validates a run's parameters by building the dataclass before anything
runs (:func:`check_study_parameters`); the notebook builds it too, so both refuse the same
input with the same line. ``tests/studies/test_study_shape.py`` holds every study to it.

This module imports nothing of lob's, so any study may import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

__all__ = ["Parameters", "Shape", "check_study_parameters", "need", "one_of", "at_least_one",
           "at_least_zero"]


# --- the parameter rules every study checks --------------------------------------------------

def need(values, name: str, what: str) -> None:
    """ValueError unless ``values`` is non-empty (``what``: what to name instead)."""
    if not values:
        raise ValueError(f"{name} is empty: name at least one {what}")


def one_of(value, options, name: str, options_name: str) -> None:
    """ValueError unless ``value`` is one of ``options``."""
    if value not in options:
        raise ValueError(f"{name} {value!r} must be one of {options_name} {list(options)!r}")


def at_least_one(value, name: str) -> None:
    """ValueError unless ``value`` is an int >= 1 (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be >= 1, got {value!r}")


def at_least_zero(value, name: str) -> None:
    """ValueError unless ``value`` is a number >= 0 (0: the section measures nothing)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


class Parameters:
    """Base of a study's parameters dataclass: subclass it with ``@dataclass(frozen=True)``,
    one field per notebook parameter the study checks (same name, the notebook's default), and
    override :meth:`check` (one clear ValueError). Building one checks it."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise one ValueError naming what is wrong (the base accepts everything)."""

    @classmethod
    def of(cls, params: Mapping):
        """The dataclass from a run's parameters (keys it has no field for are ignored; a field
        the run does not set keeps the notebook's default)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})


@dataclass(frozen=True)
class Shape:
    """What a study module declares as its module-level ``SHAPE`` (see the module docstring):
    its :class:`Parameters` dataclass, the procedures that measure, the table builders, the
    claims and the plots."""

    parameters: type[Parameters]
    measure: tuple[Callable, ...]
    tables: tuple[Callable, ...]
    claims: Callable[..., dict]
    plots: tuple[Callable, ...] = ()


def check_study_parameters(module, params: Mapping) -> None:
    """Build ``module.SHAPE.parameters`` from ``params`` (ValueError when they are invalid)."""
    module.SHAPE.parameters.of(params)
