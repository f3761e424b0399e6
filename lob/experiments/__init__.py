"""Experiments: parameterised notebooks run by papermill into ``artifacts/``.

>>> from lob.experiments import experiment_names, run_batch
>>> experiment_names()                      # one per experiments/<name>.yaml
>>> run_batch(["tail_analysis"], preset="quick")   # 0 when every run completed
"""

from __future__ import annotations

from lob.experiments.job import (
    MANIFEST,
    MARKER,
    Job,
    RunRecord,
    execute_notebook,
    run_id,
    run_job,
)
from lob.experiments.registry import (
    PRESETS,
    Experiment,
    experiment_names,
    get_experiment,
    notebook_parameters,
    validate_params,
)
from lob.experiments.runner import plan, run_batch

__all__ = ["MANIFEST", "MARKER", "PRESETS", "Experiment", "Job", "RunRecord",
           "execute_notebook", "experiment_names", "get_experiment", "notebook_parameters",
           "plan", "run_batch", "run_id", "run_job", "validate_params"]
