"""Shared fixtures: every registered engine, and an ABIDES-style ``book_with`` builder.

The engine list is read from the registry at collection time, so engines registered later
(the ladder lineage, the numba backend) are covered by every test without edits here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import lob

# the differential tests' stream generators and published counters are reused by other kinds
# (the plugin and foreign engines' fuzz, the diagnostics' cross-check): importable by name
sys.path.insert(0, str(Path(__file__).resolve().parent / "differential"))
from lob.semantics import BookConfig, OrderType, Outcome, Reason, Side, Status, StpMode

# lob's own engines: an engine of another installed package (the example of examples/py_engine,
# once tests/engines/test_plugin.py has installed it) is tested by its own tests
ENGINES: list[str] = [e for e in lob.engine_names() if lob.engines.engine_spec(e).source == "lob"]
OTHER_ENGINES: list[str] = [e for e in ENGINES if e != "reference"]



def boundscheck_cache() -> str:
    """numba's on-disk cache for the bounds-checked builds (NUMBA_BOUNDSCHECK=1), one folder
    per version of the compiled sources (engines/compiled, pipeline, semantics): a warm
    machine loads the checked build instead of compiling it again (~3 minutes of CPU), and a
    source change gets a fresh folder, so a stale build is never used. Older folders are
    removed."""
    import hashlib
    import shutil

    from lob.paths import cache_dir

    root = Path(lob.__file__).resolve().parent
    files = sorted([*root.glob("engines/compiled/*.py"), *root.glob("pipeline/*.py"),
                    root / "semantics.py"])
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()[:16]
    base = cache_dir("numba-boundscheck")
    for old in base.glob("*"):
        if old.name != digest:
            shutil.rmtree(old, ignore_errors=True)
    return str(base / digest)


@pytest.fixture(autouse=True)
def _own_probe_record(tmp_path_factory, request, monkeypatch):
    """The machine's quiet-width record (lob.diagnose.probes.machine_width) in a file of the
    test's own: scripted probe widths never reach the user's cache, and no test reads another
    test's widths."""
    from lob.diagnose import probes

    name = "".join(c if c.isalnum() else "_" for c in request.node.nodeid)[-120:] + ".json"
    root = tmp_path_factory.getbasetemp() / "probe-records"
    monkeypatch.setattr(probes, "_record_path", lambda: root / name)


def pytest_configure(config):
    """Under xdist, load or build numba's on-disk cache once, in the controller, before the
    workers start: otherwise every worker compiles the same ~80 s kernel at the same time."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        from lob.engines.compiled import warm

        warm()  # the two kernels side by side, one process each (`lob engines warm`)


BUY, SELL = int(Side.BUY), int(Side.SELL)
LIMIT, IOC, FOK, POST_ONLY, MARKET, NOTIONAL = (int(t) for t in OrderType)


@pytest.fixture(params=ENGINES)
def engine_name(request) -> str:
    """Each registered engine in turn (the reference oracle included)."""
    return request.param


def book_with(engine_name: str, bids=(), asks=(), stp: StpMode = StpMode.NONE,
              band: tuple[int, int] = (1, 10_000)):
    """A fresh engine holding the given resting orders.

    ``bids`` and ``asks`` are ``(price, qty, owner)`` triples submitted as LIMIT orders in
    the order given, bids first: the bids get ids 1..len(bids), the asks the ids after.
    The book must not cross (each order must rest untouched), which is asserted.
    """
    eng = lob.get_engine(engine_name, BookConfig(band[0], band[1], stp))
    n = 0
    for side, orders in ((BUY, bids), (SELL, asks)):
        for price, qty, owner in orders:
            n += 1
            out = eng.submit(owner, side, LIMIT, price, qty)
            assert out == Outcome(Status.ACCEPTED, Reason.NONE, n, qty), out
    return eng


def l2(eng, depth: int = 100) -> dict:
    """The L2 snapshot as plain ints: {"bids": [(price, qty, count), ...], "asks": [...]}."""
    snap = eng.snapshot(depth)
    return {k: [tuple(int(x) for x in lvl) for lvl in snap[k]] for k in ("bids", "asks")}


def fills(eng, since: int = 0) -> list[tuple]:
    """(taker, maker, price, qty) of every fill recorded by ``eng`` from index ``since`` on."""
    return [tuple(int(x) for x in f) for f in eng.fills[since:]]


def state(eng) -> tuple:
    """Everything observable about the book: deep L2 snapshot plus per-order detail if any."""
    detail = eng.resting() if hasattr(eng, "resting") else None
    return (l2(eng, 1_000_000), detail)


def out(status: Status, id: int, remaining: int, filled: int = 0, fills: int = 0,
        removed: int = 0, reason: Reason = Reason.NONE) -> Outcome:
    """An expected outcome, spelled in the order tests usually think of it."""
    return Outcome(status, reason, id, remaining, filled, fills, removed)
