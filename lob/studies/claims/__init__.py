"""The seeds' headline findings as claims, and verdicts computed from what lob measured.

Three modules, one job each:

* :mod:`~lob.studies.claims.model`: :class:`Claim`, :class:`RegimeCheck`, loading
  ``experiments/claims.yaml`` (:func:`load`, :func:`get`, :func:`for_experiment`) and its
  ``published`` section, the one home of the seeds' figures (:func:`published`);
* :mod:`~lob.studies.claims.judging`: a notebook's measurement record (:func:`measurement`),
  the verdict on one claim (:func:`judge`, :class:`Verdict`), the notebook's verdict table
  (:func:`verdict_table`) and the report's (:func:`reproduction_markdown`);
* :mod:`~lob.studies.claims.collecting`: measurements read back from the runs of an
  artifacts folder (:func:`collect`, :func:`verdicts`, :func:`pipeline_claims`).

``from lob.studies import claims as C`` gives every public name of the three.
``C.median_interval`` (now :func:`lob.measure.stats.median_interval`) and the stream
diagnostics ``C.stream_diagnostics`` / ``C.resting_series`` / ``C.levels_walked`` (now in
:mod:`lob.workloads.diagnostics`) are kept as aliases for notebooks not yet moved to their
homes; new code imports them from there.
"""

from lob.measure.stats import median_interval
from lob.studies.claims.collecting import collect, pipeline_claims, verdicts
from lob.studies.claims.judging import (
    VERDICTS,
    Verdict,
    judge,
    measurement,
    reproduction_markdown,
    verdict_table,
)
from lob.studies.claims.model import (
    FIELDS,
    KINDS,
    REQUIRED,
    Claim,
    RegimeCheck,
    claims_path,
    figure,
    for_experiment,
    get,
    load,
    published,
    read,
    show_figure,
)
from lob.workloads.diagnostics import levels_walked, resting_series, stream_diagnostics

__all__ = ["FIELDS", "KINDS", "REQUIRED", "VERDICTS", "Claim", "RegimeCheck", "Verdict",
           "claims_path", "collect", "figure", "for_experiment", "get", "judge",
           "levels_walked", "load", "measurement", "median_interval", "pipeline_claims",
           "published", "read", "reproduction_markdown", "resting_series", "show_figure",
           "stream_diagnostics", "verdict_table", "verdicts"]
