"""``ForeignEngine``: a foreign library's book behind lob's ``Engine`` interface.

Every method is a batch call of the library: ``replay`` / ``replay_into`` / ``replay_timed``
pass the whole command array; the interactive API (``step``, ``execute``, ``submit``, ...)
replays a one-row array. The fill record is a growable guarded buffer; when the engine asks
for more fill space (``LOB_NEED_FILL_SPACE``) it is doubled and the call resumes where the
engine stopped.
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from lob.engines.base import EXEC_FIELDS, Interactive, ReplayResult, as_int, store_fills
from lob.engines.capabilities import Unsupported
from lob.engines.foreign import crash, watchdog
from lob.engines.foreign.library import (
    ERRORS,
    LEVEL_DTYPE,
    NEED_FILL_SPACE,
    OK,
    ORDER_DTYPE,
    UNSUPPORTED,
    Config,
    ForeignEngineError,
    GuardedArray,
    Library,
    load,
    message_buffer,
    message_text,
)
from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_QTY,
    OUTCOME_DTYPE,
    BookConfig,
    Kind,
    Reason,
    Status,
    as_commands,
    command_field,
)

TIMEOUT_ENV = "LOB_FOREIGN_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 600.0  # one library call (a whole replay); $LOB_FOREIGN_TIMEOUT_S
_N_STATUS, _N_REASON = len(Status), len(Reason)
_SUBMIT, _REJECTED = int(Kind.SUBMIT), int(Status.REJECTED)  # plain ints: enum lookups cost


def default_timeout() -> float | None:
    """Seconds one foreign library call may take (``$LOB_FOREIGN_TIMEOUT_S``, else 600);
    ``0`` gives None: calls made directly on the caller's thread, without the watchdog (no
    timeout, Ctrl-C waits for the call), for a measurement that wants no thread at all."""
    v = os.environ.get(TIMEOUT_ENV)
    try:
        t = float(v) if v else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"${TIMEOUT_ENV} must be a number of seconds, got {v!r}") from None
    if t < 0 or t != t:
        raise ValueError(f"${TIMEOUT_ENV} must be >= 0 (0: no watchdog), got {v!r}")
    return t or None


def command_text(row) -> str:
    """A command row as ``MODIFY id=7 qty=3 price=0`` (for error messages)."""
    from lob.semantics import Kind, OrderType, Scope

    k = int(row["kind"])
    try:
        kind = Kind(k).name
    except ValueError:
        return f"kind={k}"
    if k == Kind.SUBMIT:
        t = int(row["otype"])
        name = OrderType(t).name if 0 <= t < len(OrderType) else f"otype={t}"
        return (f"SUBMIT {name} side={int(row['side'])} owner={int(row['owner'])} "
                f"price={int(row['price'])} qty={int(row['qty'])}")
    if k == Kind.MASS_CANCEL:
        t = int(row["otype"])
        return f"MASS_CANCEL {Scope(t).name if 0 <= t < len(Scope) else t}"
    return f"{kind} id={int(row['id'])} qty={int(row['qty'])} price={int(row['price'])}"


class ForeignEngine(Interactive):
    """A book living in a foreign library (see ``lob_engine.h``); built as
    :class:`TimedForeignEngine` (clock = "engine": the library exports ``lob_replay_timed``
    and times each op with its own clock) or :class:`HarnessForeignEngine` (clock =
    "harness")."""

    clock = "harness"

    def __init__(self, lib: Library, config: BookConfig | None = None, name: str | None = None):
        if config is None:
            config = BookConfig()
        if not isinstance(config, BookConfig):
            raise TypeError(f"config must be a lob.BookConfig, got {type(config).__name__}")
        self._lib = lib
        self.name = name or lib.label
        self.config = config
        self._handle = None
        self._submits = 0  # SUBMITs run on this book: at most that many orders rest
        self.timeout = default_timeout()  # s per library call; None: no watchdog
        self.capabilities = lib.caps  # what lob_capabilities declares
        self.max_band_width = lib.caps.max_band_width  # `lob engines` shows it
        why = lib.caps.config_refusal(self.name, config)
        if why:
            raise Unsupported(why)
        cfg = Config(config.min_price, config.max_price, int(config.stp), 0)
        err = message_buffer(512)
        h, _ = self._invoke(lib.create, (ctypes.byref(cfg), err.addr, err.cap), "lob_create")
        msg = message_text(err, self.name, "lob_create message")  # its guard, checked
        if not h:
            msg = msg or "no reason given"
            raise ForeignEngineError(
                f"foreign engine {self.name!r} refused the book config {config.to_dict()}: "
                f"{msg} (lob_create returned NULL)")
        self._handle = h
        if lib.resting is not None:  # the optional per-order view
            self.resting = self._resting
        self._frec = GuardedArray(FILL_DTYPE, 1024)  # the fill record
        self._nf = 0
        self._scratch_fills = GuardedArray(FILL_DTYPE, 1024)  # replay_into without fills
        self._one = GuardedArray(COMMAND_DTYPE, 1)
        self._one_out = GuardedArray(OUTCOME_DTYPE, 1)
        self._done = ctypes.c_int64()
        self._k = ctypes.c_int64()
        self._pdone = ctypes.byref(self._done)
        self._pk = ctypes.byref(self._k)

    @property
    def library(self) -> dict:
        """Which library this book runs: ``{"path", "sha256"}``, the hash of the bytes loaded."""
        return self._lib.identity

    def __del__(self):
        h, self._handle = getattr(self, "_handle", None), None
        if h:
            try:
                m = crash.enter(self.name, "lob_destroy", 0, 0)  # a crash in it is named
                self._lib.destroy(h)
                crash.leave(m)
            except Exception:  # interpreter shutdown
                pass

    # --- the driver ---------------------------------------------------------------------
    def _invoke(self, fn, args, call: str, cmds: np.ndarray | None = None, first: int = 0,
                threaded: bool = True):
        """``fn(*args)`` on this thread with the crash marker set (:mod:`.crash`) and, when
        ``threaded`` (a whole replay, not one command), under the watchdog (:mod:`.watchdog`):
        Ctrl-C is honoured within 2 s and a call longer than ``self.timeout`` s ends the
        process, naming the engine and the command. Returns (result, ns inside the call)."""
        n = 0 if cmds is None else len(cmds) - first
        m = crash.enter(self.name, call, first, n,
                        command_text(cmds[first]) if crash.armed() and n > 0 else "")
        if not threaded or self.timeout is None:
            t0 = time.perf_counter_ns()
            rc = fn(*args)
            ns = time.perf_counter_ns() - t0
            crash.leave(m)
            return rc, ns
        where = call + (f" (commands {first}.. of this call: {command_text(cmds[first])})"
                        if n > 0 else "")
        with watchdog.watch(self.name, where, self.timeout, m):
            t0 = time.perf_counter_ns()
            rc = fn(*args)
            ns = time.perf_counter_ns() - t0
        crash.leave(m)
        return rc, ns

    def _validate(self, cmds: np.ndarray, i: int, out: np.ndarray, fills: np.ndarray) -> None:
        """Refuse impossible outputs of one call (commands ``cmds[i:i+len(out)]``): statuses,
        reasons, negative counts, fill counts that differ from the fills written, fills with
        an impossible quantity, price or ids. One :class:`ForeignEngineError` naming the
        engine and the command; nothing of the replay is kept. A fast pass of reductions
        first (a few ms per million commands); the failing row is looked for only then."""
        if len(out) == 0 and len(fills) == 0:
            return
        if len(out) == 1 and self._one_ok(int(cmds["kind"][i]), out[0].item(), fills):
            return  # the per-command path: plain-int checks (the numpy ones cost ~100 us)
        if self._all_ok(cmds, i, out, fills):
            return
        bad = None  # (row within out, what)
        st, rs = out["status"], out["reason"]
        checks = [
            (lambda: (st < 0) | (st >= _N_STATUS),
             lambda j: f"status {int(st[j])} is not a lob Status (0..{_N_STATUS - 1})"),
            (lambda: (rs < 0) | (rs >= _N_REASON),
             lambda j: f"reason {int(rs[j])} is not a lob Reason (0..{_N_REASON - 1})"),
        ]
        for f in ("remaining", "filled", "fills", "removed"):
            col = out[f]
            checks.append((lambda col=col: col < 0,
                           lambda j, f=f, col=col: f"{f} = {int(col[j])} is negative"))
        sub = cmds["kind"][i:i + len(out)] == _SUBMIT
        checks.append((lambda: sub & (st != _REJECTED) & (out["id"] < 1),
                       lambda j: f"an accepted SUBMIT got id {int(out['id'][j])} (ids are "
                                 f"1, 2, ...)"))
        for mask, what in checks:
            m = mask()
            if m.any():
                j = int(np.flatnonzero(m)[0])
                bad = (j, what(j))
                break
        if bad is None:
            counted = int(out["fills"].sum())
            if counted != len(fills):
                bad = (None, f"its outcomes count {counted} fills but it wrote {len(fills)}")
        if bad is None and len(fills):
            row = np.repeat(np.arange(len(out)), out["fills"])
            lo, hi = self.config.min_price, self.config.max_price
            fq, fp = fills["qty"], fills["price"]
            fchecks = [
                ((fq < 1) | (fq > MAX_QTY), lambda x: f"a fill of qty {int(fq[x])}"),
                ((fp < lo) | (fp > hi), lambda x: f"a fill at price {int(fp[x])}, outside "
                                                  f"the band {lo}..{hi}"),
                (fills["taker"] != out["id"][row],
                 lambda x: f"a fill with taker id {int(fills['taker'][x])}, not the command's "
                           f"order id {int(out['id'][row[x]])}"),
                ((fills["maker"] < 1) | (fills["maker"] == fills["taker"]),
                 lambda x: f"a fill with maker id {int(fills['maker'][x])}"),
            ]
            for mask, what in fchecks:
                if mask.any():
                    x = int(np.flatnonzero(mask)[0])
                    bad = (int(row[x]), what(x))
                    break
            if bad is None:
                wrong = self._filled_per_row(out, fq) != out["filled"]
                if wrong.any():
                    j = int(np.flatnonzero(wrong)[0])
                    bad = (j, f"filled = {int(out['filled'][j])} but its fills trade "
                              f"{int(self._filled_per_row(out, fq)[j])}")
        if bad is None:  # _all_ok and the detailed checks disagree: say so, never pass
            bad = (None, "an inconsistent result")
        j, what = bad
        at = (f"command {i + j} ({command_text(cmds[i + j])})" if j is not None
              else f"commands {i}..{i + len(out) - 1}")
        raise ForeignEngineError(f"foreign engine {self.name!r} returned an impossible "
                                 f"result for {at}: {what}. The engine is broken; "
                                 f"nothing of this replay is kept")

    @staticmethod
    def _filled_per_row(out: np.ndarray, fq: np.ndarray) -> np.ndarray:
        nf = out["fills"].astype(np.int64)
        per_row = np.zeros(len(out), dtype=np.int64)
        has = nf > 0
        if has.any():
            starts = np.cumsum(nf) - nf
            per_row[has] = np.add.reduceat(fq, starts[has])
        return per_row

    def _all_ok(self, cmds: np.ndarray, i: int, out: np.ndarray, fills: np.ndarray) -> bool:
        """Whether every check of :meth:`_validate` passes (reductions only; ``filled`` is
        compared with the fills' quantities in total here, per row by the slow path)."""
        if (out["status"].view(np.uint8).max(initial=0) >= _N_STATUS  # negative: >= 128
                or out["reason"].view(np.uint8).max(initial=0) >= _N_REASON):
            return False
        for f in ("remaining", "filled", "fills", "removed"):
            if out[f].min(initial=0) < 0:
                return False
        nf = out["fills"]
        if int(nf.sum(dtype=np.int64)) != len(fills):
            return False
        acc = (cmds["kind"][i:i + len(out)] == _SUBMIT) & (out["status"] != _REJECTED)
        if acc.any() and out["id"][acc].min() < 1:
            return False
        if len(fills) == 0:
            return not out["filled"].any()
        fq, fp, taker, maker = fills["qty"], fills["price"], fills["taker"], fills["maker"]
        if (fq.min() < 1 or fq.max() > MAX_QTY or fp.min() < self.config.min_price
                or fp.max() > self.config.max_price or maker.min() < 1
                or (maker == taker).any()):
            return False
        if not np.array_equal(taker, np.repeat(out["id"], nf)):
            return False
        # the traded quantity in total (per row only when looking for the failing row)
        return int(fq.sum()) == int(out["filled"].sum())

    def _one_ok(self, kind: int, o: tuple, fills: np.ndarray) -> bool:
        """Whether one outcome and its fills pass every check of :meth:`_validate` (which
        then says what failed); plain ints."""
        status, reason, oid, remaining, filled, nfills, removed = o
        if not (0 <= status < _N_STATUS and 0 <= reason < _N_REASON and remaining >= 0
                and filled >= 0 and removed >= 0 and nfills == len(fills)):
            return False
        if kind == _SUBMIT and status != _REJECTED and oid < 1:
            return False
        if nfills:
            lo, hi = self.config.min_price, self.config.max_price
            total = 0
            for taker, maker, price, qty in fills.tolist():
                if not (0 < qty <= MAX_QTY and lo <= price <= hi and taker == oid
                        and maker >= 1 and maker != taker):
                    return False
                total += qty
            return total == filled
        return filled == 0

    def _drive(self, cmds: np.ndarray, out: GuardedArray, fills: GuardedArray, nf: int,
               ns: GuardedArray | None = None, threaded: bool = True
               ) -> tuple[GuardedArray, int, int]:
        """Run ``cmds`` into ``out`` and ``fills[nf:]``, growing ``fills`` when asked.
        Returns (fills buffer, fills count, ns spent inside the library calls)."""
        n = len(cmds)
        base = cmds.ctypes.data
        isz = COMMAND_DTYPE.itemsize
        osz = OUTCOME_DTYPE.itemsize
        fsz = FILL_DTYPE.itemsize
        timed = ns is not None
        fn = self._lib.replay_timed if timed else self._lib.replay
        call = "lob_replay_timed" if timed else "lob_replay"
        i = elapsed = 0
        while True:
            cap = fills.cap - nf
            args = [self._handle, base + i * isz, n - i, out.addr + i * osz,
                    fills.addr + nf * fsz, cap, self._pdone, self._pk]
            if timed:
                args.append(ns.addr + i * 8)
            rc, spent = self._invoke(fn, args, call, cmds, i, threaded)
            elapsed += spent
            out.check(self.name, "outcome")
            fills.check(self.name, "fill")
            if timed:
                ns.check(self.name, "durations")
            done, k = self._done.value, self._k.value
            if not (0 <= done <= n - i and 0 <= k <= cap):
                raise ForeignEngineError(
                    f"foreign engine {self.name!r} reported {done} commands run of {n - i} and "
                    f"{k} fills written into room for {cap}: impossible counts")
            self._validate(cmds, i, out.arr[i:i + done], fills.arr[nf:nf + k])
            self._submits += (int(cmds["kind"][i] == _SUBMIT) if done == 1 else
                              int(np.count_nonzero(cmds["kind"][i:i + done] == Kind.SUBMIT)))
            i += done
            nf += k
            if rc == OK:
                if i != n:
                    raise ForeignEngineError(f"foreign engine {self.name!r} returned LOB_OK "
                                             f"after {i} of {n} commands")
                return fills, nf, elapsed
            if rc == UNSUPPORTED:
                msg = self._lib.error_message(self._handle) or "no reason given"
                raise Unsupported(f"foreign engine {self.name!r} cannot execute command {i} "
                                  f"({command_text(cmds[i])}): {msg} (LOB_UNSUPPORTED)")
            if rc != NEED_FILL_SPACE:
                msg = self._lib.error_message(self._handle)
                raise ForeignEngineError(
                    f"foreign engine {self.name!r}: lob_replay failed at command {i} with "
                    f"{ERRORS.get(rc, f'unknown code {rc}')}" + (f": {msg}" if msg else ""))
            # a command fills each resting order at most once, and at most every order
            # submitted so far rests: more room than that is never needed
            bound = self._submits + 1
            room = fills.cap - nf
            if room >= bound:
                if done == 0 and k == 0:
                    raise ForeignEngineError(
                        f"foreign engine {self.name!r} asked for more fill space "
                        f"(LOB_NEED_FILL_SPACE) before command {i} ({command_text(cmds[i])}) "
                        f"with room for {room} fills, more than the {self._submits} orders "
                        f"that can rest on its book (a command fills each resting order at "
                        f"most once): the engine is broken")
                continue  # it made progress: call again from where it stopped
            fills = fills.grown(max(2 * fills.cap, nf + bound, 1024), nf)

    def _cmds(self, commands) -> np.ndarray:
        """The command array, refused up front (:class:`Unsupported`) if it uses what the
        engine does not declare."""
        cmds = np.ascontiguousarray(as_commands(commands))
        why = self.capabilities.commands_refusal(self.name, cmds, self.config)
        if why:
            raise Unsupported(why)
        return cmds

    # --- batch ----------------------------------------------------------------------------
    def replay(self, commands: np.ndarray) -> ReplayResult:
        """Run every command in library calls; the fill record restarts first."""
        cmds = self._cmds(commands)
        out = GuardedArray(OUTCOME_DTYPE, len(cmds))
        self._frec, self._nf, elapsed = self._drive(cmds, out, self._frec, 0)
        self.check()  # lob_check, outside the timed calls
        return ReplayResult(self.name, out.arr, self.fills, elapsed, self)

    def replay_into(self, commands: np.ndarray, outcomes: np.ndarray,
                    fills: np.ndarray | None = None) -> int:
        """Run ``commands`` on the current book, outcomes into ``outcomes[:n]``; returns the
        number of fills k, copied to ``fills[:k]`` when given (ValueError if it is short)."""
        cmds = self._cmds(commands)
        n = len(cmds)
        if outcomes.dtype != OUTCOME_DTYPE or len(outcomes) < n:
            raise ValueError(f"outcomes must be an OUTCOME_DTYPE array of >= {n} rows")
        out = GuardedArray(OUTCOME_DTYPE, n)
        self._scratch_fills, k, _ = self._drive(cmds, out, self._scratch_fills, 0)
        outcomes[:n] = out.arr
        return store_fills(fills, self._scratch_fills.arr[:k])

    def clock_overhead(self) -> dict | None:
        """None: the caller's clock times this engine (``clock == "harness"``)."""
        return None

    # --- one command ------------------------------------------------------------------------
    def step(self, kind, otype, side, owner, price, qty, oid, price_hi) -> tuple:
        """One command as plain ints (EXEC_FIELDS order) -> outcome tuple; fills are appended
        to the fill record."""
        row = self._one.arr
        for f, v in zip(EXEC_FIELDS, (kind, otype, side, owner, price, qty, oid, price_hi),
                        strict=True):
            row[f] = command_field(f, v)
        row["timed"] = False
        if not self.capabilities.complete:
            row = self._cmds(row)
        self._frec, self._nf, _ = self._drive(row, self._one_out, self._frec, self._nf,
                                              threaded=False)  # one command: no thread hop
        return self._one_out.arr[0].item()

    # --- fills and views --------------------------------------------------------------------
    @property
    def fills(self) -> np.ndarray:
        return self._frec.arr[: self._nf].copy()

    def clear_fills(self) -> None:
        self._nf = 0

    def snapshot(self, depth: int = 10) -> dict:
        depth = as_int("depth", depth)
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        depth = min(depth, self.config.width)
        out = {}
        for side, key in ((0, "bids"), (1, "asks")):
            buf = GuardedArray(LEVEL_DTYPE, depth)
            k = int(self._lib.snapshot(self._handle, side, depth, buf.addr)) if depth else 0
            buf.check(self.name, "snapshot")
            if not 0 <= k <= depth:
                raise ForeignEngineError(f"foreign engine {self.name!r}: lob_snapshot "
                                         f"returned {k} levels for depth {depth}")
            out[key] = [tuple(int(x) for x in lv) for lv in buf.arr[:k].tolist()]
        return out

    def _resting(self) -> list[tuple]:
        """(id, owner, side, price, qty) of every resting order, in priority order per side;
        the engine's ``resting`` when the library exports ``lob_resting``."""
        n = int(self._lib.resting(self._handle, None, 0))
        buf = GuardedArray(ORDER_DTYPE, n)
        got = int(self._lib.resting(self._handle, buf.addr, n))
        buf.check(self.name, "resting-order")
        if got != n:
            raise ForeignEngineError(f"foreign engine {self.name!r}: lob_resting counted {n} "
                                     f"orders, then {got}")
        return [tuple(int(x) for x in r) for r in buf.arr.tolist()]

    def check(self) -> None:
        """The library's own invariant check (``lob_check``), if it exports one."""
        if self._lib.check is None:
            return
        msg = message_buffer(512)
        rc, _ = self._invoke(self._lib.check, (self._handle, msg.addr, msg.cap), "lob_check")
        text = message_text(msg, self.name, "lob_check message")
        if rc:
            raise AssertionError(f"{self.name}: {text}")

    def allocation_counter(self):
        """The library's own allocation counter (:mod:`.counting`), or None when it was not
        linked with one: :func:`lob.measure.alloc.count_allocations` then counts with
        CPython's allocator hook, which never sees the library's mallocs."""
        return self._lib.alloc_counter

    def __repr__(self) -> str:
        return f"<ForeignEngine {self.name!r} from {self._lib.path} clock={self.clock}>"


class TimedForeignEngine(ForeignEngine):
    """A foreign engine whose library exports ``lob_replay_timed`` (clock = "engine")."""

    clock = "engine"

    def replay_timed(self, commands: np.ndarray) -> tuple[ReplayResult, np.ndarray]:
        """``replay`` plus one duration (ns, the engine's own clock) per timed command."""
        cmds = self._cmds(commands)
        out = GuardedArray(OUTCOME_DTYPE, len(cmds))
        ns = GuardedArray(np.dtype(np.int64), len(cmds))
        self._frec, self._nf, elapsed = self._drive(cmds, out, self._frec, 0, ns)
        self.check()
        durs = ns.arr[cmds["timed"].astype(bool)].copy()
        return ReplayResult(self.name, out.arr, self.fills, elapsed, self), durs

    def clock_overhead(self, samples: int = 100_000) -> dict | None:
        """Cost of one read of the engine's own clock (back-to-back reads in the library)."""
        if self._lib.clock_samples is None:
            return None
        buf = GuardedArray(np.dtype(np.int64), samples)
        self._lib.clock_samples(buf.addr, samples)
        buf.check(self.name, "clock sample")
        d = buf.arr
        return {"source": f"{self.name}: the engine's clock (lob_clock_samples)",
                "min_ns": float(d.min()), "median_ns": float(np.median(d)),
                "p99_ns": float(np.percentile(d, 99)), "resolution_ns": 1.0,
                "samples": int(samples)}


class HarnessForeignEngine(ForeignEngine):
    """A foreign engine without ``lob_replay_timed`` (clock = "harness"): the caller times
    ``step``, one ctypes call per command (~1 us of crossing is then in every figure)."""


def open_engine(path, config: BookConfig | None = None,
                name: str | None = None) -> ForeignEngine:
    """An engine straight from a library file (no registration)."""
    lib = load(path, name)
    cls = TimedForeignEngine if lib.timed else HarnessForeignEngine
    return cls(lib, config, name or lib.label)
