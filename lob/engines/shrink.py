"""When two engines disagree: find where, and shrink the stream to a minimal reproducer.

:func:`divergence` replays a stream on two engines and names the first disagreement: its
*kind* (``outcome`` with the command's kind / order type and the outcome fields that differ,
``fills``, ``book`` for the final book, or ``error`` when an engine raised) and the command
where it shows. :func:`shrink` reduces a stream that diverges to a small one that diverges
the same way (same kind): first the commands after the divergence are dropped, then delta
debugging (Zeller's ddmin, complements first) removes commands, then each remaining
command's fields are simplified (quantities to 1 or halved, prices moved toward one
another, owners to 1) while the divergence keeps its kind.

lob ids are implicit (every valid submit takes the next id), so removing a submit would
make every later cancel or modify target another order. The shrinker keeps the targets:
whether a submit takes an id is decided by its fields alone (validation is stateless), so
each candidate's cancels and modifies are renumbered to the ids their original orders get
in it, and those whose order was removed target an id no stream issues.

:func:`save_reproducer` writes the result as JSON (engines, config, divergence, commands by
field name); :func:`load_reproducer` reads it back (``lob replay --commands FILE``, a pytest
regression test).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lob.semantics import COMMAND_DTYPE, OUTCOME_DTYPE, BookConfig, Kind, OrderType, Reason, Status

__all__ = ["Divergence", "Shrunk", "divergence", "load_reproducer", "save_reproducer",
           "shrink", "table"]

DEAD_ID = 2**62  # a target no stream issues (its order was removed from the candidate)
FORMAT = "lob-reproducer"


@dataclass(frozen=True)
class Divergence:
    """The first disagreement of two engines on a stream."""

    kind: tuple  # what differs (compared when shrinking)
    at: int  # the command where it shows (len(stream) for the final book)
    detail: str

    def __str__(self) -> str:
        return f"{' / '.join(map(str, self.kind))} at command {self.at}: {self.detail}"


def _replay(engine: str, config: BookConfig, cmds: np.ndarray):
    from lob.engines import get_engine

    eng = get_engine(engine, config)
    r = eng.replay(cmds)
    return r.outcomes, r.fills, eng.snapshot(10**6)


def divergence(a: str, b: str, config: BookConfig, cmds: np.ndarray) -> Divergence | None:
    """Replay ``cmds`` on engines ``a`` and ``b``; the first disagreement, or None."""
    res = []
    for e in (a, b):
        try:
            res.append(_replay(e, config, cmds))
        except Exception as ex:  # a foreign engine's error or crash is a divergence too
            return Divergence(("error", e, type(ex).__name__), len(cmds),
                              f"{e} raised {type(ex).__name__}: {ex}".splitlines()[0])
    (oa, fa, sa), (ob, fb, sb) = res
    if len(oa) != len(ob) or not np.array_equal(oa, ob):
        n = min(len(oa), len(ob))
        diff = np.zeros(n, bool)
        for f in OUTCOME_DTYPE.names:
            diff |= oa[f][:n] != ob[f][:n]
        i = int(np.argmax(diff)) if diff.any() else n
        if i == n:
            return Divergence(("outcome", "count"), n, f"{len(oa)} vs {len(ob)} outcomes")
        c = cmds[i]
        what = Kind(int(c["kind"])).name
        if c["kind"] == Kind.SUBMIT and 0 <= c["otype"] < len(OrderType):
            what += " " + OrderType(int(c["otype"])).name
        fields = tuple(f for f in OUTCOME_DTYPE.names if oa[f][i] != ob[f][i])
        return Divergence(("outcome", what, fields), i,
                          f"{a} {_row(oa[i])} vs {b} {_row(ob[i])}")
    if len(fa) != len(fb) or not np.array_equal(fa, fb):
        # the command whose fills differ: fills are in command order, outcome["fills"] each
        ends = np.cumsum(oa["fills"])
        n = min(len(fa), len(fb))
        j = int(np.argmax(fa[:n] != fb[:n])) if n and (fa[:n] != fb[:n]).any() else n
        i = int(np.searchsorted(ends, j, side="right"))
        return Divergence(("fills",), min(i, len(cmds) - 1),
                          f"fill {j}: {a} {_fill(fa, j)} vs {b} {_fill(fb, j)}")
    if sa != sb:
        return Divergence(("book",), len(cmds), f"final books differ: {_book_diff(sa, sb, a, b)}")
    return None


def _name(enum, v: int) -> str:
    return enum(v).name if 0 <= v < len(enum) else str(v)


def _row(o) -> str:
    return (f"{_name(Status, int(o['status']))}/{_name(Reason, int(o['reason']))} "
            f"filled={int(o['filled'])} remaining={int(o['remaining'])} "
            f"fills={int(o['fills'])} removed={int(o['removed'])} id={int(o['id'])}")


def _fill(f, j) -> str:
    if j >= len(f):
        return "none"
    return "taker={} maker={} price={} qty={}".format(*(int(x) for x in f[j]))


def _book_diff(sa: dict, sb: dict, a: str, b: str) -> str:
    """The first level (side, depth) whose (price, quantity, count) differs."""
    for side in ("bids", "asks"):
        la, lb = sa.get(side, []), sb.get(side, [])
        for k in range(max(len(la), len(lb))):
            x = la[k] if k < len(la) else None
            y = lb[k] if k < len(lb) else None
            if x != y:
                return (f"{side} level {k + 1} (price, qty, orders): {a} {x} vs {b} {y}")
    return "snapshots differ"


class _Stream:
    """The original stream with its id references made explicit, so that any subset can be
    rebuilt with the same orders targeted."""

    def __init__(self, config: BookConfig, cmds: np.ndarray, engine: str = "reference"):
        from lob.engines import get_engine

        self.cmds = np.array(cmds, dtype=COMMAND_DTYPE)
        out = get_engine(engine, config).replay(self.cmds).outcomes
        sub = self.cmds["kind"] == Kind.SUBMIT
        self.takes = sub & (out["status"] != Status.REJECTED)  # static: fields alone
        issued = np.flatnonzero(self.takes)  # id k+1 -> command issued[k]
        ref = (self.cmds["kind"] == Kind.CANCEL) | (self.cmds["kind"] == Kind.MODIFY)
        tid = self.cmds["id"]
        inside = ref & (tid >= 1) & (tid <= len(issued))
        self.target = np.full(len(self.cmds), -1, np.int64)  # command that issued the id
        self.target[inside] = issued[tid[inside] - 1]

    def build(self, keep: np.ndarray, cmds: np.ndarray | None = None) -> np.ndarray:
        """The commands at ``keep`` (sorted indices), targets renumbered."""
        c = (self.cmds if cmds is None else cmds)[keep].copy()
        new_id = np.full(len(self.cmds), DEAD_ID, np.int64)
        kt = self.takes[keep]
        new_id[keep[kt]] = np.arange(1, int(kt.sum()) + 1)
        t = self.target[keep]
        has = t >= 0
        c["id"][has] = new_id[t[has]]
        return c


@dataclass
class Shrunk:
    """A minimal reproducer: its commands, the divergence it shows, how it was found."""

    commands: np.ndarray
    divergence: Divergence
    original: Divergence
    tests: int
    seconds: float
    start_len: int


def _ddmin(items: np.ndarray, test, deadline: float) -> np.ndarray:
    """Zeller's ddmin over the sorted indices ``items`` (complements first): a smaller
    list on which ``test`` still holds, 1-minimal unless ``deadline`` passes."""
    n = 2
    while len(items) >= 2 and time.perf_counter() < deadline:
        chunk = -(-len(items) // n)
        reduced = False
        for s in range(0, len(items), chunk):
            cand = np.concatenate([items[:s], items[s + chunk:]])
            if len(cand) and test(cand):
                items = cand
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


def shrink(a: str, b: str, config: BookConfig, cmds: np.ndarray, *,
           first: Divergence | None = None, time_limit: float = 60.0, log=None) -> Shrunk:
    """Reduce ``cmds`` (on which ``a`` and ``b`` diverge: ``first``, found here if not
    given) to a small stream on which they diverge the same way; ValueError if they agree.
    ``time_limit`` bounds the search (the result is then smaller, not minimal)."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    first = first or divergence(a, b, config, cmds)
    if first is None:
        raise ValueError(f"{a} and {b} agree on these {len(cmds):,} commands: nothing to shrink")
    start_len = len(cmds)
    if first.at < len(cmds):  # nothing after the divergence matters
        cmds = cmds[:first.at + 1]
    st = _Stream(config, cmds, a)  # which submits take an id: any engine that runs them
    tests = 0

    def same(c: np.ndarray) -> bool:
        nonlocal tests
        tests += 1
        d = divergence(a, b, config, c)
        return d is not None and d.kind == first.kind

    keep = np.arange(len(st.cmds))
    if log:
        log(f"divergence: {first}; shrinking {len(keep):,} commands")
    keep = _ddmin(keep, lambda k: same(st.build(k)), deadline)
    out = st.build(keep)
    if log:
        log(f"  commands: {len(out)} after {tests} replays ({time.perf_counter() - t0:.1f} s)")
    out = _simplify(out, same, deadline)
    st2 = _Stream(config, out, a)  # simpler values may free more commands
    out = st2.build(_ddmin(np.arange(len(out)), lambda k: same(st2.build(k)), deadline))
    d = divergence(a, b, config, out)
    assert d is not None and d.kind == first.kind
    return Shrunk(out, d, first, tests, time.perf_counter() - t0, start_len)


def _simplify(c: np.ndarray, same, deadline: float) -> np.ndarray:
    """Field values made simpler, one at a time, while the divergence keeps its kind: every
    change is strictly simpler (a smaller quantity or owner, a price nearer the median
    price, untimed to timed), so the loop ends."""
    prices = [int(p) for p in c["price"] if p]
    anchor = int(np.median(prices)) if prices else 0
    changed = True
    while changed and time.perf_counter() < deadline:
        changed = False
        for i in range(len(c)):
            for f, values in (("owner", [1, 2]), ("qty", [1, 2, int(c["qty"][i]) // 2]),
                              ("price", [anchor, (int(c["price"][i]) + anchor) // 2]),
                              ("timed", [True])):
                for v in values:
                    cur = int(c[f][i])
                    simpler = (abs(v - anchor) < abs(cur - anchor) if f == "price"
                               else v > 0 and v < cur if f in ("qty", "owner") else v != cur)
                    if not simpler or (f == "price" and not cur):
                        continue
                    cand = c.copy()
                    cand[f][i] = v
                    if same(cand):
                        c = cand
                        changed = True
                        break
    return c


# --- showing and keeping a reproducer -------------------------------------------------------

def table(cmds: np.ndarray, engines: tuple[str, str] = (), config: BookConfig | None = None
          ) -> str:
    """The commands as a short table; with ``engines`` and ``config``, each engine's outcome
    beside them and the diverging row marked."""
    outs = []
    for e in engines:
        try:
            outs.append(_replay(e, config, cmds)[0])
        except Exception as ex:
            outs.append(f"{type(ex).__name__}")
    head = f"{'#':>3} {'kind':<11} {'type':<9} {'side':<4} {'owner':>5} {'price':>10} " \
           f"{'qty':>10} {'id':>6}"
    head += "".join(f"  {e[:40]:<40}" for e in engines)
    lines = [head]
    for i, r in enumerate(cmds):
        k = int(r["kind"])
        kind = Kind(k).name if 0 <= k < len(Kind) else str(k)
        ot = int(r["otype"])
        typ = (OrderType(ot).name if k == Kind.SUBMIT and 0 <= ot < len(OrderType)
               else str(ot) if k == Kind.MASS_CANCEL else "")
        side = ("BUY", "SELL")[r["side"]] if k == Kind.SUBMIT and r["side"] in (0, 1) else ""
        idv = int(r["id"])
        line = (f"{i:>3} {kind:<11} {typ:<9} {side:<4} {int(r['owner']):>5} "
                f"{int(r['price']):>10} {int(r['qty']):>10} "
                f"{'dead' if idv == DEAD_ID else idv:>6}")
        cells = []
        for o in outs:
            if isinstance(o, str):
                cells.append(o)
            else:
                cells.append(f"{_name(Status, int(o[i]['status']))}/"
                             f"{_name(Reason, int(o[i]['reason']))} "
                             f"f={int(o[i]['filled'])} r={int(o[i]['remaining'])} "
                             f"rm={int(o[i]['removed'])}")
        mark = " <" if len(cells) == 2 and cells[0] != cells[1] else ""
        lines.append(line + "".join(f"  {x:<40}" for x in cells) + mark)
    return "\n".join(lines)


def save_reproducer(path: str | Path, shrunk: Shrunk, engines: tuple[str, str],
                    config: BookConfig) -> Path:
    """Write the reproducer as JSON (what :func:`load_reproducer` reads)."""
    path = Path(path)
    doc = {"format": FORMAT, "version": 1, "engines": list(engines),
           "config": config.to_dict(), "divergence": str(shrunk.divergence),
           "kind": [list(k) if isinstance(k, tuple) else k for k in shrunk.divergence.kind],
           "shrunk_from": shrunk.start_len,
           "commands": [{f: (bool(r[f]) if f == "timed" else int(r[f]))
                         for f in COMMAND_DTYPE.names} for r in shrunk.commands]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)
    return path


def load_reproducer(path: str | Path) -> tuple[list[str], BookConfig, np.ndarray, dict]:
    """(engines, config, commands, the whole document) of a reproducer file; ValueError
    (one line) if it is not one."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict):
            raise ValueError(f"a JSON {type(doc).__name__}, not an object")
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT!r}")
        cmds = np.zeros(len(doc["commands"]), COMMAND_DTYPE)
        for i, row in enumerate(doc["commands"]):
            for f in COMMAND_DTYPE.names:
                cmds[f][i] = row.get(f, 0)
        return list(doc["engines"]), BookConfig.from_dict(doc["config"]), cmds, doc
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, ValueError, KeyError, TypeError, OverflowError, AttributeError) as e:
        raise ValueError(f"{path}: not a lob reproducer ({e})".splitlines()[0]) from None
