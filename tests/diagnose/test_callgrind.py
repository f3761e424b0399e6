"""lob.diagnose.callgrind: the callgrind output parser, the refusals, and (where valgrind is
installed) exact, repeatable counts per command."""

import pytest

from lob import cli
from lob.diagnose import callgrind as cg

SAMPLE = """# callgrind format
version: 1
positions: instr line
events: Ir Dr Dw Bc Bcm
summary: 1000 300 200 150
fn=(1) 0x1000
0x1000 0 5 1
totals: 999 1 1 1 1
"""


def test_parse_reads_the_summary_by_event_name(tmp_path):
    p = tmp_path / "callgrind.out.1"
    p.write_text(SAMPLE)
    got = cg.parse(p)
    # a trailing event left out of the line counts 0, not a shifted column
    assert got == {"Ir": 1000, "Dr": 300, "Dw": 200, "Bc": 150, "Bcm": 0}


def test_parse_falls_back_to_totals_and_refuses_other_files(tmp_path):
    p = tmp_path / "t.out"
    p.write_text(SAMPLE.replace("summary: 1000 300 200 150\n", ""))
    assert cg.parse(p)["Ir"] == 999
    q = tmp_path / "not.out"
    q.write_text("hello\n")
    with pytest.raises(ValueError, match="not a callgrind output file"):
        cg.parse(q)


def test_without_valgrind_every_entry_point_says_why(monkeypatch, capsys):
    monkeypatch.setattr(cg.shutil, "which", lambda name: None)
    why = cg.available()
    assert "valgrind is not installed" in why
    with pytest.raises(RuntimeError, match="valgrind is not installed"):
        cg.counts(["v4@numba"], "lobster_replay", scale=0.01)
    assert cli.main(["callgrind", "v4@numba", "--scale", "0.01"]) == 2
    assert "valgrind is not installed" in capsys.readouterr().err


def test_bad_arguments_are_refused_before_any_run():
    with pytest.raises(ValueError, match="at least one engine"):
        cg.counts([], "lobster_replay")
    with pytest.raises(ValueError, match="base 'v1@numba' is not one of"):
        cg.counts(["v4@numba"], "lobster_replay", base="v1@numba")


@pytest.mark.extended  # 2-3 min of valgrind and compiles: `make test-extended`
@pytest.mark.skipif(cg.available() is not None, reason=f"callgrind: {cg.available()}")
def test_counts_are_exact_per_command_and_repeat():
    df = cg.counts(["v4@numba", "v2@numba", "v4@numba"], "lobster_replay", scale=0.01)
    assert list(df.engine) == ["v4@numba", "v2@numba", "v4@numba"]
    assert df.same_work.all() and (df.commands == 10_000).all()
    first, older, again = (df.iloc[k] for k in range(3))
    # the same stream on the same engine: the same counts, to the instruction
    for col in cg.COLUMNS:
        assert first[col] == again[col], col
    # every command costs instructions, loads, stores and branches; mispredicts are a
    # share of the branches
    assert first.instructions > first.branches > first.mispredicts > 0
    assert first.loads > 0 and first.stores > 0
    assert 0 < first.mispredict_rate < 1
    # v4's packed records and register-held state: fewer instructions a command than v2
    assert older.instructions_vs_base > 1.2
    assert first.instructions_vs_base == 1.0


def test_counts_per_command_ratios_and_refusals_without_valgrind(monkeypatch):
    """counts()' own arithmetic, with the valgrind child replaced by fixed totals: per
    command, against the base, the same-work check, and an engine that refuses the book."""
    from lob.engines.capabilities import Unsupported
    from lob.engines.registry import get_engine

    monkeypatch.setattr(cg, "available", lambda: None)
    totals = {"v4@numba": 100, "v3@numba": 250}
    seen = []

    def fake_one(engine, workload, scale, timeout, tomls):
        seen.append((engine, list(tomls)))
        if engine == "picky":  # refuses a command of the stream, in the child
            raise cg.Refused("no MODIFY here")
        n = 10_000
        ev = {e: 0 for e in cg.EVENTS}
        ev.update(Ir=totals[engine] * n, Bc=10 * n, Bcm=n // (1 if engine == "v4@numba" else 2),
                  D1mr=3 * n, D1mw=n)
        return {"events": ev, "commands": n, "checksum": 1 if engine != "v3@numba" else 2,
                "target": "haswell"}

    def refuses(name, cfg):  # a config refusal, as a foreign engine's constructor raises it
        raise Unsupported("no STP here")

    monkeypatch.setattr(cg, "_count_one", fake_one)
    real = get_engine
    monkeypatch.setattr("lob.engines.registry.get_engine",
                        lambda name, cfg: refuses(name, cfg) if name == "fussy" else
                        real("v4@numba" if name == "picky" else name, cfg))
    df = cg.counts(["v4@numba", "v3@numba", "fussy", "picky"], "lobster_replay", scale=0.01,
                   tomls=["/x/engine.toml"]).set_index("engine")
    assert [e for e, _ in seen] == ["v4@numba", "v3@numba", "picky"]  # fussy never ran
    assert seen[0][1] == ["/x/engine.toml"]
    assert df.loc["v4@numba", "target"] == "haswell"
    assert df.loc["v4@numba", "instructions"] == 100 and df.loc["v4@numba", "d1_misses"] == 4
    assert df.loc["v3@numba", "instructions_vs_base"] == 2.5
    assert df.loc["v3@numba", "mispredicts_vs_base"] == 0.5
    assert df.loc["v4@numba", "mispredict_rate"] == 0.1
    assert not df.loc["v3@numba", "same_work"]  # another checksum: not the same work
    assert df.loc["fussy", "note"] == "no STP here"
    assert df.loc["picky", "note"] == "no MODIFY here"
    with pytest.raises(Unsupported):  # the base itself refusing is an error, not a row
        cg.counts(["fussy", "v4@numba"], "lobster_replay", scale=0.01)
