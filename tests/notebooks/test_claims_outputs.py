"""The notebooks' quick-preset outputs, read as a reader would: every conclusion's numbers come
from the table it sits under, no tail percentile is shown from fewer samples than it needs, no
table holds absolute figures of two machines, the run conditions carry the load after the run,
and the claims each notebook measures get verdicts.

Each notebook runs once per ``make test``: nbval executes it (its defaults are the quick preset)
with ``LOB_ARTIFACTS`` pointing at a temporary folder, and these tests read what it wrote there
(``LOB_NB_OUTPUTS``). Outside ``make test`` they run the notebook through the runner instead,
under ``-m extended``, and also check the executed notebook (each conclusion rendered under its
table, the run conditions at the top).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from lob.experiments import experiment_names, get_experiment, run_batch
from lob.studies import claims as C
from lob.studies import conclude as K
from lob.studies.pipeline_latency import claims as _pipeline_claims


def pl_claims(tables, cpu_count=None):
    """The pipeline's claims as read back from a summary (no cpu count: none recorded)."""
    return _pipeline_claims(tables, cpu_count, here=False)

OUTPUTS = os.environ.get("LOB_NB_OUTPUTS")
MINE = [n for n in experiment_names() if get_experiment(n).batch]


def _nbval_run(name: str) -> Path:
    """The folder the nbval run of ``name`` wrote (one ``interactive-*`` folder)."""
    runs = sorted((Path(OUTPUTS) / name).glob("interactive-*"))
    assert runs, f"nbval left no run of {name} in {OUTPUTS}: did the notebook run?"
    return runs[-1]


def _outputs_text(nb) -> list[str]:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            data = o.get("data") or {}
            out.append(data.get("text/markdown", "") + data.get("text/plain", "")
                       + o.get("text", ""))
    return out


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if OUTPUTS else pytest.mark.extended)
                                  for n in MINE])
def test_quick_outputs_are_signable(name, tmp_path):
    if OUTPUTS:
        run = _nbval_run(name)
    else:
        assert run_batch([name], "quick", artifacts=tmp_path, progress=False) == 0
        (run,) = (tmp_path / name).iterdir()
    s = json.loads((run / "summary.json").read_text())

    # every number of every conclusion is in its table; percentiles need their samples;
    # one machine's absolute figures per table
    assert s["conclusions"], "no conclusion recorded"
    assert K.check_summary(s) == []
    recorded = {r["table"] for r in s["conclusions"]}
    for table, rows in s["tables"].items():  # a seed's figures only in a checked table
        cols = {k for r in rows for k in r}
        if any("seed" in str(c) for c in cols):
            assert table in recorded, f"{table} shows a seed's figures unchecked"

    assert s["conditions"]["load_avg_before"] and s["conditions"]["load_avg_after"]

    # the notebook's claims have computed verdicts
    mine = [c for c in C.load() if c.experiment == name]
    measured = s.get("claims") or {}
    if name == "pipeline_latency":  # judged from its tables, as the report does
        measured.update(pl_claims(s["tables"], s["conditions"].get("cpu_count")))
    vs = [C.judge(c, measured.get(c.id)) for c in mine]
    if mine:
        assert any(v.verdict != "not measured" for v in vs), [v.verdict for v in vs]
    for v in vs:
        assert v.verdict in C.VERDICTS

    if OUTPUTS:
        return  # nbval keeps no executed notebook; the runner's run (extended) does
    # the conclusions are rendered under their tables in the executed notebook
    nb = nbformat.read(run / f"{name}.ipynb", as_version=4)
    texts = _outputs_text(nb)
    for r in s["conclusions"]:
        if r["text"]:
            md = [t for t in texts if r["text"] in t]
            assert md, f"{r['table']}: its conclusion is not shown in the notebook"
            shown = [md[0].find(m) for m in ("| ", "_(empty table)_") if m in md[0]]
            assert shown, f"{r['table']}: its conclusion is not under a table"
            assert min(shown) < md[0].index(r["text"]), "conclusion above its table"
    # run conditions at the top, completed with the load after the run
    first = next(t for t in texts if t)
    assert "**Run conditions**" in first and "still going" not in first
    assert "load average" in first and "numba" in first and "GC" in first
