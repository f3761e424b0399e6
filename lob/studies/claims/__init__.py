"""The seeds' headline findings as claims, and verdicts computed from what lob measured.

Three modules, one job each:

* :mod:`~lob.studies.claims.model`: :class:`Claim`, :class:`RegimeCheck`, loading
  ``experiments/claims.yaml`` (:func:`load`, :func:`get`, :func:`for_experiment`), the
  mechanisms of a lineage step from the engines' toggles (:func:`step_mechanisms`) and its
  ``published`` section, the one home of the seeds' figures (:func:`published`);
* :mod:`~lob.studies.claims.judging`: a notebook's measurement record (:func:`measurement`,
  with :func:`clock_record` for the clock-floor check), the verdict on one claim
  (:func:`judge`, :class:`Verdict`: regime, mechanism, clock floor, single point, then the
  figure), the notebook's verdict table (:func:`verdict_table`) and the report's
  (:func:`reproduction_markdown`);
* :mod:`~lob.studies.claims.collecting`: measurements read back from the runs of an
  artifacts folder (:func:`collect`, :func:`verdicts`; the pipeline's claims are
  :func:`lob.studies.pipeline_latency.claims`).

``from lob.studies import claims as C`` gives every public name of the three. Intervals
are :mod:`lob.measure.stats`'s (``median_interval``), the regime diagnostics of a replay
:mod:`lob.workloads.diagnostics`'s (``stream_diagnostics``, ``resting_series``,
``levels_walked``): this package keeps no copy of either.
"""

from lob.studies.claims.collecting import collect, verdicts
from lob.studies.claims.judging import (
    VERDICTS,
    Verdict,
    clock_record,
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
    engine_mechanisms,
    figure,
    for_experiment,
    get,
    load,
    published,
    read,
    show_figure,
    step_mechanisms,
)

__all__ = ["FIELDS", "KINDS", "REQUIRED", "VERDICTS", "Claim", "RegimeCheck", "Verdict",
           "claims_path", "clock_record", "collect", "figure", "for_experiment", "get", "judge",
           "load", "measurement", "published", "read", "reproduction_markdown",
           "show_figure", "engine_mechanisms", "step_mechanisms", "verdict_table", "verdicts"]
