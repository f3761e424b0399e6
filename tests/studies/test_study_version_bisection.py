"""lob.studies.version_bisection on a synthetic search result: the tables, the conclusion
(every number shown by its table or the note under it) and the target's checks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lob.studies import version_bisection as vb
from lob.studies.gitbisect import Revision, Step


def _result(first_change=True):
    revs = [Revision(i, f"{'ab' * 3}{i:034d}", f"commit {i} " + "x" * 80, status=st,
                     values=[(r, 100.0 + 50 * (i >= 1)) for r in range(n)])
            for i, (st, n) in enumerate([("ok", 4), ("ok", 3), ("skipped", 0), ("ok", 4)])]
    steps = [Step(1, revs[1].sha, revs[1].subject, 150.0, 100.0, 1.5, 1.4, 1.6, "slower", 3)]
    line = ("first change: " + revs[1].sha if first_change else "no change beyond noise")
    return SimpleNamespace(revisions=revs, steps=steps, metric="ns_per_op", engine="demo",
                           workload="w", wall_s=12.3, measured=[r for r in revs if r.values],
                           line=lambda: line)


@pytest.mark.parametrize("first_change", [True, False])
def test_the_steps_conclusion_quotes_only_its_table_and_note(first_change):
    res = _result(first_change)
    c = vb.steps_table(res)
    assert c.check() == [] and c.name == "steps"
    assert c.rows[0]["sha"] == res.steps[0].sha[:vb.SHA]
    assert len(c.rows[0]["subject"]) == vb.SUBJECT
    assert c.text.startswith("ns/op of demo on w: 3 commits, ")
    assert "3 revisions measured in 11 processes, 1 skipped, 12 s." in c.text
    assert ("first change" in c.text) is first_change


def test_every_revision_is_listed():
    r = vb.revisions_table(_result())
    assert [x["status"] for x in r.rows] == ["ok", "ok", "skipped", "ok"]
    assert [x["n"] for x in r.rows] == [4, 3, 0, 4] and r.rows[2]["median"] is None
    assert r.check() == []


def test_a_real_repository_needs_good_bad_and_engine():
    with pytest.raises(ValueError, match="give good, bad and engine"):
        vb.target("lob", "", "HEAD", "v1")
    t = vb.target("/some/repo", "a", "b", "v1")
    assert t["cache"] is None and str(t["repo"]) == "/some/repo"
