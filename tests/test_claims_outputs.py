"""The executed notebooks at the quick preset, read as a reader would: every conclusion's
numbers come from the table it sits under, no tail percentile is shown from fewer samples
than it needs, no table holds absolute figures of two machines, run conditions (with the
load after the run) are at the top, and the claims each notebook measures get verdicts.

fok_scan_bottleneck runs in CI; the others under ``-m extended`` (each is a papermill run).
"""

from __future__ import annotations

import json

import nbformat
import pytest

from lob.experiments import run_batch
from lob.studies import claims as C
from lob.studies import conclude as K

MINE = ["alloc_profile", "bisection", "evolution_stress", "fok_scan_bottleneck", "pipeline_latency",
        "tail_analysis"]


def _outputs_text(nb) -> list[str]:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            data = o.get("data") or {}
            out.append(data.get("text/markdown", "") + data.get("text/plain", "")
                       + o.get("text", ""))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == "fok_scan_bottleneck"
                                               else pytest.mark.extended) for n in MINE])
def test_quick_outputs_are_signable(name, tmp_path):
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

    # the conclusions are rendered under their tables in the executed notebook
    nb = nbformat.read(run / f"{name}.ipynb", as_version=4)
    texts = _outputs_text(nb)
    for r in s["conclusions"]:
        if r["text"]:
            md = [t for t in texts if r["text"] in t]
            assert md, f"{r['table']}: its conclusion is not shown in the notebook"
            assert md[0].index("| ") < md[0].index(r["text"]), "conclusion above its table"

    # run conditions at the top, completed with the load after the run
    first = next(t for t in texts if t)
    assert "**Run conditions**" in first and "still going" not in first
    assert "load average" in first and "numba" in first and "GC" in first
    assert s["conditions"]["load_avg_before"] and s["conditions"]["load_avg_after"]

    # the notebook's claims have computed verdicts
    mine = [c for c in C.load() if c.experiment == name]
    vs = [v for v in C.verdicts(tmp_path, mine)]
    assert any(v.verdict != "not measured" for v in vs), [v.verdict for v in vs]
    for v in vs:
        assert v.verdict in C.VERDICTS
