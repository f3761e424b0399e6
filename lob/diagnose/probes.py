"""Yardsticks measured beside an engine in the same interleaved rounds (``lob profile``).

* :func:`core_clock_ghz`: the rate at which this core retires dependent one-cycle
  instructions while the round runs: a chain of xorshift steps (shift, xor: one cycle of
  latency each on every x86-64 and ARM64 core of the last decade, and nothing a compiler can
  fold), timed by the same clock as the engines. With it a kernel's ns/op becomes cycles/op,
  and a reader can tell whether a slow round ran on a slower clock (the chain slows too) or
  on a contended core or memory system (the chain does not).
* :func:`core_probe`: that clock and the core's issue width: four independent xorshift
  chains retire more operations a cycle on a core that is ours alone than when another
  hardware thread shares the core's issue slots. Whether a kernel's time follows the width
  on a host is measured per stream (:func:`width_follows`), not assumed; the runs behind
  this design are in ``docs/decisions/shared-core-width-probe.md``.
  :func:`shared_replays` marks the replays measured on a shared core: those whose width fell
  below :data:`SHARED_BELOW` of the stream's widest probe or of this machine's quiet width
  (:func:`machine_width`), whichever is wider. The machine's is remembered from earlier
  streams (the upper quartile of the widest probe of its last :data:`WIDTH_RECORD` streams,
  in lob's cache): without it a stream run wholly on a shared core had nothing wider to
  compare with and was called quiet throughout.
* :func:`stream_floor`: the replay contract's own cost with no book: read every command
  record (40 bytes) and write every outcome record (34 bytes) from it. It is the part of any
  engine's kernel time that no change to the book can remove (a replay must read its
  commands and write its outcomes), so ``lob profile`` reports it beside the engines: of a
  kernel's ns/op, this much is the stream.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence

import numpy as np
from numba import njit

from lob.engines.compiled.kernel import put

CHAIN_OPS = 6  # dependent one-cycle operations a chain step
CHAINS = 4  # independent chains of the width probe
SHARED_BELOW = 0.85  # a probe's width below this share of the stream's widest: a shared core
PROBE_STEPS = 250_000  # ~1.7 ms a probe at 3 GHz: widths 3.2-3.4 quiet, 2.1-2.2 shared here
WIDTH_RECORD = 32  # streams whose widest probe a machine's record keeps (the newest)
WIDTH_RECORD_MIN = 4  # streams on record before the machine's quiet width is used
WIDTH_MACHINES = 16  # machines a record file keeps (a shared cache seen by changing hosts)
_SEED = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, _nrt=False)
def _chain(steps, x):
    for _ in range(steps):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
    return x


@njit(cache=True, _nrt=False)
def _chains(steps, a, b, c, d):
    for _ in range(steps):
        a ^= a << np.uint64(13)
        b ^= b << np.uint64(13)
        c ^= c << np.uint64(13)
        d ^= d << np.uint64(13)
        a ^= a >> np.uint64(7)
        b ^= b >> np.uint64(7)
        c ^= c >> np.uint64(7)
        d ^= d >> np.uint64(7)
        a ^= a << np.uint64(17)
        b ^= b << np.uint64(17)
        c ^= c << np.uint64(17)
        d ^= d << np.uint64(17)
    return a ^ b ^ c ^ d


@njit(cache=True, _nrt=False)
def _floor(cmds, out):
    for i in range(cmds.size):
        c = cmds[np.uint64(i)]
        put(out, np.uint64(i), c.kind, c.otype + c.side, c.id, c.qty, c.price, c.owner, 0)


def core_clock_ghz(steps: int = 2_000_000, now=time.thread_time_ns) -> float:
    """Dependent one-cycle operations retired per ns (~ the core's clock in GHz) over a chain
    of ``steps`` xorshift steps timed by ``now`` (the measuring clock: by default the thread's
    CPU clock). 2M steps are 12M cycles, ~4 ms at 3 GHz."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    _chain(1, _SEED)  # compiled (or loaded) before the clock starts
    t0 = now()
    x = _chain(steps, _SEED)
    dt = now() - t0
    if x == 0:  # never (xorshift keeps a non-zero state): keeps the result live
        raise AssertionError("xorshift chain reached 0")
    return CHAIN_OPS * steps / max(dt, 1)


def core_probe(steps: int = 1_000_000, now=time.thread_time_ns) -> dict:
    """``{"core_ghz", "width"}``: :func:`core_clock_ghz` over ``2 * steps`` chain steps, then
    the operations a cycle of :data:`CHAINS` independent chains of ``steps`` steps each (their
    operations per ns over the clock's), both timed by ``now``. ~7 ms at 3 GHz."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    ghz = core_clock_ghz(2 * steps, now=now)
    seeds = [_SEED + np.uint64(i) for i in range(CHAINS)]
    _chains(1, *seeds)
    t0 = now()
    x = _chains(steps, *seeds)
    dt = now() - t0
    if x == 0:  # never: keeps the result live
        raise AssertionError("xorshift chains reached 0")
    return {"core_ghz": ghz, "width": CHAIN_OPS * CHAINS * steps / max(dt, 1) / ghz}


def _record_path():
    from lob.paths import cache_dir

    return cache_dir("probes", f"quiet-width-{PROBE_STEPS}.json")


def _machine() -> str:
    from lob.measure.conditions import machine, machine_key

    return machine_key(machine())


def machine_width(record: Sequence[float] = (), *, path=None) -> float | None:
    """This machine's quiet issue width as remembered from earlier streams: the upper
    quartile of the widest :func:`core_probe` width of each of its last :data:`WIDTH_RECORD`
    streams (None before :data:`WIDTH_RECORD_MIN` streams are on record). A widest that came
    from a shared stretch sits below it, a lone spurious high one above it. ``record``: this
    stream's widths, added to the record after the reading (so a stream never judges itself
    by its own figure twice). The record is a small JSON file in lob's cache
    (``$LOB_CACHE/probes``), one list per machine identity
    (:func:`lob.measure.conditions.machine_key`); a file that cannot be read or written is
    ignored."""
    path = path or _record_path()
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    key = _machine()
    mine = [float(x) for x in data.get(key, []) if isinstance(x, (int, float))]
    ref = float(np.percentile(mine, 75)) if len(mine) >= WIDTH_RECORD_MIN else None
    widths = [float(w) for w in record if np.isfinite(w) and w > 0]
    if widths:
        data.pop(key, None)  # this machine's list last: the file keeps the newest machines
        data[key] = (mine + [max(widths)])[-WIDTH_RECORD:]
        data = dict(list(data.items())[-WIDTH_MACHINES:])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(path)  # whole or not at all, also beside another process
        except OSError:
            pass
    return ref


def shared_replays(probes: list[dict], below: float = SHARED_BELOW) -> dict[str, np.ndarray]:
    """Per engine, whether each of its replays ran on a shared core: the width probed just
    before or just after it fell below ``below`` times the widest probe of all ``probes``
    (:func:`lob.diagnose.profile.measure`'s, one dict a round with the engines' ``order`` and
    ``len(order) + 1`` ``width`` probes) or the machine's quiet width a round carries as
    ``machine_width`` (:func:`machine_width`), whichever is wider. A stream probed only on a
    shared core on a machine with no record has nothing wider to compare with, and no replay
    is marked."""
    widths = [w for p in probes for w in p["width"]]
    if not widths:
        return {}
    cut = below * max([p.get("machine_width") or 0.0 for p in probes] + widths)
    return {k: np.asarray(v) < cut for k, v in _narrower(probes).items()}


def _narrower(probes: list[dict]) -> dict[str, list[float]]:
    """Per engine, the narrower of the two width probes around each of its replays."""
    out: dict[str, list[float]] = {}
    for p in probes:
        if len(p["width"]) != len(p["order"]) + 1:
            raise ValueError("a round needs one width probe before each replay and one after "
                             "the last")
        for j, name in enumerate(p["order"]):
            out.setdefault(name, []).append(min(p["width"][j], p["width"][j + 1]))
    return out


def width_follows(probes: list[dict], engine: str, kernel: Sequence[float]) -> dict | None:
    """Whether ``engine``'s kernel time follows the core's issue width on this stream: the
    correlation (Pearson's r) between its per-round ``kernel`` ns/op and the narrower probe
    around each of its replays (as :func:`shared_replays` pairs them). Strongly negative
    where a neighbour on the core's other hardware thread slows the kernel, so the
    shared-core marks are evidence there; near 0 where the probe moves and the kernel does
    not, so the marks leave out replays for nothing. ``{"r", "n"}``, or None from fewer than
    5 replays or with no spread in either."""
    k = np.asarray(kernel, dtype=float)
    w = np.asarray(_narrower(probes).get(engine, []), dtype=float)
    if len(w) != len(k):
        raise ValueError(f"{len(k)} kernel times for {len(w)} replays of {engine!r} probed")
    if len(k) < 5 or np.ptp(k) == 0 or np.ptp(w) == 0:
        return None
    return {"r": float(np.corrcoef(k, w)[0, 1]), "n": len(k)}


def quiet_rounds(probes: list[dict], below: float = SHARED_BELOW) -> np.ndarray:
    """Per round of ``probes`` (as :func:`shared_replays` reads them), whether every replay
    in it ran on a quiet core."""
    flags = shared_replays(probes, below)
    if not flags:
        return np.zeros(len(probes), dtype=bool)
    return ~np.any(np.vstack(list(flags.values())), axis=0)


def stream_floor(cmds: np.ndarray, out: np.ndarray, now=time.thread_time_ns) -> float:
    """ns per command to read every record of ``cmds`` and write an outcome record for each
    into ``out`` (at least as long as ``cmds``), with no book: the floor of any replay."""
    from lob.semantics import COMMAND_DTYPE, OUTCOME_DTYPE

    if cmds.dtype != COMMAND_DTYPE or out.dtype != OUTCOME_DTYPE or len(out) < len(cmds):
        raise ValueError("stream_floor takes COMMAND_DTYPE commands and an OUTCOME_DTYPE "
                         "array at least as long")
    _floor(cmds[:0], out)
    t0 = now()
    _floor(cmds, out)
    return (now() - t0) / max(1, len(cmds))
