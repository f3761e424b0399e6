"""The engine registry, the toggle vocabulary and the Engine protocol on every engine."""

from __future__ import annotations

import ast
import importlib

import numpy as np
import pytest

import lob
from lob.engines import toggles as tg
from lob.engines.base import EXEC_FIELDS, Engine, EngineSpec
from lob.engines.driver import PyEngine
from lob.engines.reference import ReferenceEngine
from lob.engines.registry import engine_names, engine_spec, get_engine, register_engine
from lob.semantics import COMMAND_DTYPE, FILL_DTYPE, OUTCOME_DTYPE, BookConfig


def test_every_version_differs_from_its_parent():
    """A registered version runs code that differs from its parent's: its effective toggles
    (what the backend really runs) are not its parent's, and the parent is registered on the
    same backend."""
    with_parent = [engine_spec(n) for n in engine_names() if engine_spec(n).parent]
    assert len(with_parent) >= 8
    for spec in with_parent:
        parent = engine_spec(spec.parent)
        assert parent.backend == spec.backend, spec.name
        assert spec.toggles != parent.toggles, f"{spec.name} runs what {parent.name} runs"
        if spec.backend in tg.VALUES:  # lob's Python and numba lineages
            assert tg.implements(spec.backend, spec.toggles)
        changed = [k for k in {*spec.toggles, *parent.toggles}
                   if spec.toggles.get(k) != parent.toggles.get(k)]
        if spec.name.removesuffix("@numba") in tg.CHAIN or spec.backend == "cpp":
            assert len(changed) == 1, f"{spec.name}: a chain step changes one toggle"


def test_bisection_chains_change_something_at_every_step():
    for backend in tg.VALUES:
        names = tg.chain(backend)
        assert len(names) >= 4
        for a, b in zip(names, names[1:], strict=False):
            assert tg.version_toggles(a) != tg.version_toggles(b), (a, b)
    assert tg.chain("numba")[0] == "v0+pool@numba"


def test_a_backend_refuses_toggle_values_it_does_not_implement():
    from lob.engines.compiled.engine import CompiledEngine
    from lob.engines.ladder import LadderEngine

    with pytest.raises(ValueError, match=r"implements levels = pool \| packed, not 'deque'"):
        CompiledEngine(BookConfig(1, 10), levels="deque")
    with pytest.raises(ValueError, match="best = scan | bitmap, not 'sorted'"):
        CompiledEngine(BookConfig(1, 10), best="sorted")
    with pytest.raises(ValueError, match="python backend implements fok"):
        LadderEngine(BookConfig(1, 10), fok="psychic")
    with pytest.raises(ValueError, match="unknown toggle 'colour'"):
        tg.check("python", colour="red")
    assert {"v0@numba", "v0+bitmap@numba"}.isdisjoint(engine_names())


def test_unknown_engine_lists_the_names():
    with pytest.raises(ValueError, match="unknown engine 'v9'; registered engines: reference, v0"):
        get_engine("v9")
    with pytest.raises(TypeError, match="engine name must be a str"):
        get_engine(3)


def test_register_engine_interactively():
    class Mine(ReferenceEngine):
        pass

    spec = register_engine(EngineSpec("mine-test", Mine, "a notebook's engine"))
    assert spec.source == "interactive" and "mine-test" in lob.engine_names()
    eng = lob.get_engine("mine-test", BookConfig(1, 10))
    assert isinstance(eng, Mine) and eng.name == "mine-test"
    with pytest.raises(ValueError, match="already registered"):
        register_engine(EngineSpec("mine-test", Mine, "again"))
    register_engine(EngineSpec("mine-test", Mine, "again"), replace=True)
    assert engine_spec("mine-test").description == "again"
    with pytest.raises(ValueError, match="'v2' from interactive is already registered"):
        register_engine(EngineSpec("v2", Mine, "shadowing a built-in"), replace=True)
    with pytest.raises(TypeError, match="expected a lob.engines.registry.EngineSpec"):
        register_engine(("mine2", Mine, "not a spec"))


def test_the_registry_follows_lob_cache(monkeypatch, tmp_path):
    """The adapters registered are the ones built in the cache in force: a registry collected
    under another $LOB_CACHE (a test's, a notebook's) is collected again, interactive
    registrations kept (a test that moved the cache once hid orderly_chaos from later ones)."""
    from lob.engines.foreign.adapters import ADAPTERS

    adapter = ADAPTERS["orderly_chaos"]
    monkeypatch.setenv("LOB_CACHE", str(tmp_path / "empty"))
    assert "orderly_chaos" not in engine_names()
    register_engine(EngineSpec("kept-across-caches", ReferenceEngine, "interactive"),
                    replace=True)
    monkeypatch.setenv("LOB_CACHE", str(tmp_path / "built"))
    adapter.library.parent.mkdir(parents=True)
    adapter.library.write_bytes(b"")  # built there (listed, never loaded by this test)
    names = engine_names()
    assert "orderly_chaos" in names and "kept-across-caches" in names
    monkeypatch.setenv("LOB_CACHE", str(tmp_path / "empty"))
    assert "orderly_chaos" not in engine_names()


def test_public_names_do_not_shadow_subpackages():
    importlib.import_module("lob.engines.reference")
    importlib.import_module("lob.workloads.rng")
    assert lob.engines.reference.ReferenceEngine is ReferenceEngine
    assert lob.engines.registry.engine_names() == lob.engine_names()
    assert lob.workloads.workload_names() == lob.workload_names()


def _stream(n=400, seed=3):
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 10, n)
    c = np.zeros(n, COMMAND_DTYPE)
    c["kind"], c["otype"] = np.where(k == 9, 1, 0), np.where(k == 8, 2, 0)
    c["side"], c["owner"] = rng.integers(0, 2, n), rng.integers(1, 4, n)
    c["price"], c["qty"], c["id"] = rng.integers(40, 60, n), rng.integers(1, 9, n), \
        rng.integers(1, n, n)
    c["timed"] = True
    return c


def _timed_cold(name: str) -> bool:
    """A compiled engine whose timed replay `lob engines warm` leaves cold: its first
    replay_timed is a numba compile of its own (~15-25 s of one core), so `make test` leaves
    that call to CI (`test_timed_replay_of_every_compiled_engine`, `make test-ci`)."""
    from lob.engines.compiled import WARM_TIMED

    return engine_spec(name).backend == "numba" and name not in WARM_TIMED


@pytest.mark.ci
@pytest.mark.parametrize("name", [n for n in lob.engine_names() if _timed_cold(n)])
def test_timed_replay_of_every_compiled_engine(name):
    cmds = _stream()
    want = get_engine(name, BookConfig(1, 99)).replay(cmds)
    res, durs = get_engine(name, BookConfig(1, 99)).replay_timed(cmds)
    assert len(durs) == len(cmds) and (durs >= 0).all()
    assert np.array_equal(res.outcomes, want.outcomes)


@pytest.mark.parametrize("name", lob.engine_names())
def test_engine_protocol(name):
    from lob.engines.registry import engine_capabilities
    from lob.workloads import fuzz

    cfg = BookConfig(1, 99)
    cmds = _stream()
    caps = engine_capabilities(name)
    if not caps.complete:  # a partial engine: a stream inside what it declares
        c = fuzz.case("words", 0, 3, caps)
        cfg, cmds = c.config, c.commands(400)
    eng = get_engine(name, cfg)
    assert isinstance(eng, Engine)
    if eng.clock == "harness":
        assert isinstance(eng, PyEngine) and eng.clock_overhead() is None
        with pytest.raises(NotImplementedError, match="clock='harness'"):
            eng.replay_timed(cmds)
    else:
        assert eng.clock == "engine"
        o = eng.clock_overhead()
        assert 0 <= o["min_ns"] <= o["median_ns"] < 10_000
        if not _timed_cold(name):  # else test_timed_replay_of_every_compiled_engine (CI)
            res, durs = get_engine(name, cfg).replay_timed(cmds)
            assert len(durs) == len(cmds) and (durs >= 0).all()
    want = get_engine(name, cfg).replay(cmds)
    # replay_into in two halves on one book = one replay
    outs = np.zeros(len(cmds), OUTCOME_DTYPE)
    fills = np.zeros(len(want.fills), FILL_DTYPE)
    k1 = eng.replay_into(cmds[:200], outs, fills)
    k2 = eng.replay_into(cmds[200:], outs[200:], fills[k1:])
    assert np.array_equal(outs, want.outcomes) and k1 + k2 == len(want.fills)
    assert np.array_equal(fills, want.fills) and len(eng.fills) == 0
    eng.check()
    with pytest.raises(ValueError, match="do not fit"):
        get_engine(name, cfg).replay_into(cmds, outs, fills[:1])
    # step: plain ints in, outcome tuple out, fills into the record
    eng = get_engine(name, cfg)
    rows = [tuple(int(c[f]) for f in EXEC_FIELDS) for c in cmds]
    got = np.array([eng.step(*r) for r in rows], OUTCOME_DTYPE)
    assert np.array_equal(got, want.outcomes) and np.array_equal(eng.fills, want.fills)
    eng.clear_fills()
    assert len(eng.fills) == 0


def test_presets_and_notebook_defaults_name_registered_engines():
    """Every engine an experiment preset or a notebook default names is registered (a
    removed engine, such as v0@numba, would fail a batch only when it reaches that run)."""
    from lob.experiments import experiment_names, get_experiment, notebook_parameters

    names = set(lob.engine_names())
    seen = set()
    for exp_name in experiment_names():
        exp = get_experiment(exp_name)
        params = {k: s["default"] for k, s in notebook_parameters(exp.notebook).items()}
        sets = [{k: ast.literal_eval(v) for k, v in params.items()}]
        sets += [p for preset in exp.presets for p in exp.param_sets(preset)]
        for p in sets:
            if p.get("repo", "lob") != "lob":  # names an engine of another repository
                continue
            for key in ("engines", "engine", "counters_engine"):
                v = p.get(key)
                for e in ([v] if isinstance(v, str) else v or []):
                    if e:
                        seen.add(e)
                        assert e in names, f"{exp_name}: {key} names {e!r}, not registered"
    assert {"v0", "v3", "v2@numba", "v0+pool@numba"} <= seen


def test_lob_engines_lists_every_toggle_and_warms_the_kernels(capsys):
    """`lob engines` names the four toggles; `lob engines warm` loads (or compiles) the two
    kernels, one process each, and an engine that cannot be built fails it with its name."""
    from lob.cli import main
    from lob.engines.compiled import WARM_GROUPS, WARM_TIMED, warm

    assert main(["engines"]) == 0
    out = capsys.readouterr().out
    assert "toggles are levels,best,fok,stream" in out
    assert "packed,bitmap,level_sums,prefetch" in out  # v5@numba's row
    # no engine in two groups (one specialisation compiled twice, at once)
    warmed = [n for g in WARM_GROUPS for n in g]
    assert len(warmed) == len(set(warmed))
    assert {"v2@numba", "v4@numba", "v5@numba"} <= set(warmed)
    # the timed replays warmed: the pool kernel's and v5's (latency captured in the batch)
    assert set(WARM_TIMED) == {"v2@numba", "v5@numba"} and set(WARM_TIMED) <= set(warmed)
    assert main(["engines", "warm"]) == 0  # the cache is warm here (conftest): a load
    assert "numba kernels ready" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="nosuch@numba: exit 1: ValueError: unknown engine"):
        warm((("nosuch@numba",),))
