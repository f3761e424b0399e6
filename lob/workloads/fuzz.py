"""Differential fuzz streams, generated inside what an engine declares.

The streams lob's differential fuzz replays through every engine and ``reference``: seeded
random command arrays that mix every order type, cancels and modifies of live, dead and
never-issued ids, mass cancels of every scope, ~5% invalid commands, and a share of values
at and around the bounds of :mod:`lob.semantics` and the ends of the field types (a pure
function of the arguments: same seed, same bytes).

An engine that declares only part of lob's semantics (:class:`~lob.engines.capabilities.
Capabilities`: STP modes, order types, kinds, scopes, a price range and a band width) gets
streams drawn *inside* that declaration rather than cases skipped: the draw probabilities of
what it lacks are set to zero and the rest renormalised, a profile's band is moved and
narrowed into the prices it can hold (:func:`fit`), and its STP modes take the STP slots in
turn (:func:`stp_for`). Invalid commands stay in (every engine rejects them alike; a row
that validation rejects needs no capability). For an engine of every capability the streams
are the ones lob has always fuzzed with, byte for byte.

>>> from lob.workloads import fuzz
>>> c = fuzz.case("narrow", slot=1, seed=0, caps=engine_capabilities("v2@cpp"))
>>> c.config, len(c.commands(2_000))

Public API: :data:`PROFILES`, :func:`fit`, :func:`stp_for`, :func:`case` (a
:class:`FuzzCase`: config + stream), :func:`cases`, :func:`stream`, :func:`gen_stream` /
:func:`gen_stream_marked` (the raw generator), and the replay helpers that compare two
engines outcome by outcome, fill by fill and L2 level by level at checkpoints
(:func:`replay_checkpoints`, :func:`first_difference`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lob.engines.capabilities import ALL, Capabilities
from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_NOTIONAL,
    MAX_PRICE,
    MAX_QTY,
    OUTCOME_DTYPE,
    BookConfig,
    Kind,
    OrderType,
    Outcome,
    Scope,
    StpMode,
)


class Profile(NamedTuple):
    """A kind of book: band ``lo..hi``, the width of the price window orders are drawn
    from (None: the whole band), the quantity unit, the share of commands at the bounds,
    and the seeds per STP slot as a fraction of the default."""

    lo: int
    hi: int
    window: int | None
    unit: int
    extreme: float
    stp_share: float


PROFILES: dict[str, Profile] = {
    "narrow": Profile(100, 111, None, 1, 0.04, 1),  # every price in the band: deep levels
    "words": Profile(40, 230, None, 1, 0.04, 1),  # crosses bitmap words (64, 128, 192)
    "wide": Profile(1_000, 6_000, 24, 1, 0.04, 1),  # a sparse book, moving window
    # the top of the price range, quantities up to MAX_QTY, a quarter of bound values
    "top": Profile(MAX_PRICE - 200, MAX_PRICE, None, MAX_QTY // 8, 0.25, 1 / 3),
}
STP_SLOTS = len(StpMode)  # a case's STP slot: StpMode(slot), or the engine's modes in turn
DEFAULT_LEN = 2_000

KIND_P = (0.68, 0.14, 0.165, 0.015)  # SUBMIT CANCEL MODIFY MASS_CANCEL
KIND_CUTS = (0.68, 0.82, 0.985)  # their running sums
OTYPE_P = (0.45, 0.10, 0.12, 0.13, 0.10, 0.10)  # LIMIT IOC FOK POST_ONLY MARKET NOTIONAL
SCOPE_P = (0.1, 0.3, 0.3, 0.3)  # ALL SIDE OWNER PRICE_RANGE


# --- fitting a case to an engine's declaration ------------------------------------------------

def fit(profile: str | Profile, caps: Capabilities = ALL) -> Profile:
    """``profile`` with its band moved and narrowed into the prices ``caps`` can hold.

    Its width becomes at most the widest band the engine accepts; a band that reaches (or
    passes) the engine's highest price is anchored there (so ``top`` stays at the top and
    ``narrow`` keeps a full band), any other is clamped into range. Unchanged when the
    engine can hold it."""
    p = PROFILES[profile] if isinstance(profile, str) else profile
    a, b = caps.price_range
    width = min(p.hi - p.lo + 1, caps.widest_band())
    if p.lo >= a and p.hi <= b and p.hi - p.lo + 1 <= width:
        return p
    lo = b - width + 1 if p.hi >= b else min(max(p.lo, a), b - width + 1)
    window = None if p.window is None else min(p.window, width)
    return p._replace(lo=lo, hi=lo + width - 1, window=window)


def stp_for(slot: int, caps: Capabilities = ALL) -> StpMode:
    """The STP mode of STP slot ``slot`` for an engine: ``StpMode(slot)`` when declared,
    else its declared modes in turn (an engine of one mode runs every slot in it)."""
    modes = sorted(caps.stp_modes)
    if not modes:
        raise ValueError("the engine declares no STP mode: no book can be built for it")
    return StpMode(slot) if StpMode(slot) in caps.stp_modes else modes[slot % len(modes)]


@dataclass(frozen=True)
class FuzzCase:
    """One fuzz case fitted to an engine: its book config and its stream."""

    name: str  # profile-STP-sSEED, e.g. "narrow-CANCEL_MAKER-s0"
    profile: Profile  # fitted
    config: BookConfig
    stream_seed: int
    caps: Capabilities

    def commands(self, n: int = DEFAULT_LEN) -> np.ndarray:
        p = self.profile
        return gen_stream(self.stream_seed, n, p.lo, p.hi, p.window, p.unit, p.extreme,
                          self.caps)

    def bound_rows(self, n: int = DEFAULT_LEN) -> np.ndarray:
        """Indices of the commands drawn at the bounds."""
        p = self.profile
        return gen_stream_marked(self.stream_seed, n, p.lo, p.hi, p.window, p.unit,
                                 p.extreme, self.caps)[1]


def case(profile: str, slot: int, seed: int, caps: Capabilities = ALL) -> FuzzCase:
    """Case (``profile``, STP slot, ``seed``) for an engine declaring ``caps``; its stream
    seed is ``4 * seed + slot`` (the STP mode changes the book, not the stream)."""
    p = fit(profile, caps)
    stp = stp_for(slot, caps)
    return FuzzCase(f"{profile}-{stp.name}-s{seed}", p, BookConfig(p.lo, p.hi, stp),
                    seed * STP_SLOTS + slot, caps)


def cases(seeds: int = 6) -> list[tuple[str, int, int]]:
    """(profile, STP slot, seed) of every case of a run with ``seeds`` seeds per slot (a
    profile's ``stp_share`` scales them, at least one)."""
    return [(p, slot, s) for p, spec in PROFILES.items() for slot in range(STP_SLOTS)
            for s in range(max(1, round(seeds * spec.stp_share)))]


def stream(seed: int, n: int = DEFAULT_LEN, profile: str | Profile = "narrow",
           caps: Capabilities = ALL) -> np.ndarray:
    """``n`` fuzz commands of ``profile`` (fitted to ``caps``) from ``seed``; the band they
    are for is ``fit(profile, caps)``'s ``lo..hi``."""
    p = fit(profile, caps)
    return gen_stream(seed, n, p.lo, p.hi, p.window, p.unit, p.extreme, caps)


# --- the generator ------------------------------------------------------------------------

class _Allowed:
    """What a stream may use, from a declaration (priced types, kinds, scopes)."""

    def __init__(self, caps: Capabilities):
        self.caps = caps
        self.full = caps.complete
        self.kinds = caps.kinds
        self.types = sorted(int(t) for t in caps.order_types)
        self.priced = [t for t in self.types if t < OrderType.MARKET] or self.types
        self.market = [t for t in self.types if t >= OrderType.MARKET]
        self.scopes = sorted(int(s) for s in caps.scopes)
        self.modify = Kind.MODIFY in caps.kinds
        self.cancel = Kind.CANCEL in caps.kinds
        self.mass = Kind.MASS_CANCEL in caps.kinds and bool(self.scopes)
        # the bound-value forms (see _extreme) that use only declared things
        need = {0: True, 1: bool(self.market), 2: True, 3: self.cancel, 4: self.modify,
                5: self.mass and Scope.PRICE_RANGE in caps.scopes,
                6: OrderType.LIMIT in caps.order_types, 7: True,
                8: OrderType.FOK in caps.order_types}
        self.extreme_forms = [r for r in range(9) if need[r]]


def _renorm(p, keep) -> np.ndarray:
    q = np.where(keep, p, 0.0)
    if q.sum() == 0:
        raise ValueError("nothing left to draw from")
    return q / q.sum()


def gen_stream(seed: int, n: int, lo: int, hi: int, window: int | None, unit: int = 1,
               extreme: float = 0.0, caps: Capabilities = ALL) -> np.ndarray:
    """``n`` fuzz commands for a book with band [lo, hi] that use only what ``caps``
    declares; a pure function of its arguments.

    ``unit`` scales quantities (1..8 units); a share ``extreme`` of the commands is then
    replaced by commands at the bounds.
    """
    return gen_stream_marked(seed, n, lo, hi, window, unit, extreme, caps)[0]


def gen_stream_marked(seed, n, lo, hi, window, unit=1, extreme=0.0, caps=ALL):
    """:func:`gen_stream` and the indices of the commands it drew at the bounds."""
    al = _Allowed(caps)
    rng = np.random.default_rng([seed, lo, hi, window or 0])
    c = np.zeros(n, COMMAND_DTYPE)
    c["timed"] = True
    u = rng.random(n)
    kp = KIND_CUTS if al.full else np.cumsum(_renorm(
        KIND_P, [k in al.kinds and (k != Kind.MASS_CANCEL or al.mass) for k in Kind]))
    kind = np.select([u < kp[0], u < kp[1], u < kp[2]], [Kind.SUBMIT, Kind.CANCEL, Kind.MODIFY],
                     Kind.MASS_CANCEL)
    c["kind"] = kind
    if window is None:
        base = np.full(n, lo)
        span = hi - lo + 1
    else:  # a window of prices that jumps to a random place every ~300 commands
        starts = rng.integers(lo, hi - window + 2, size=n // 300 + 1)
        base = starts[np.arange(n) // 300]
        span = window
    side = rng.integers(0, 2, n)
    # most buys in the lower part of the window and most sells in the upper part, so that
    # books build some depth; the rest are uniform, and many of those cross
    frac = rng.random(n)
    skew = rng.random(n) < 0.75
    frac = np.where(skew, frac * 0.6 + np.where(side == 1, 0.4, 0.0), frac)
    price = base + (frac * span).astype(np.int64)
    c["price"] = price
    c["side"] = side
    c["owner"] = rng.integers(1, 4, n)  # three owners: self-trades are frequent
    c["qty"] = rng.integers(1, 9, n) * unit
    sub = kind == Kind.SUBMIT
    otype = rng.choice(6, size=n, p=OTYPE_P if al.full else
                       _renorm(OTYPE_P, [t in al.types for t in range(6)]))
    c["otype"] = np.where(sub, otype, 0)
    mkt = sub & (otype >= 4)
    c["price"][mkt] = rng.integers(-5, hi + 5, int(mkt.sum()))  # ignored for market orders
    notional = sub & (otype == 5)
    c["qty"][notional] = price[notional] * rng.integers(0, 7, int(notional.sum())) * unit + \
        rng.integers(1, price[notional] + 1)
    mod = kind == Kind.MODIFY
    c["price"][mod & (rng.random(n) < 0.4)] = 0  # keep the price
    mass = kind == Kind.MASS_CANCEL
    scope = rng.choice(4, size=n, p=SCOPE_P if al.full or not al.mass else
                       _renorm(SCOPE_P, [s in al.scopes for s in range(4)]))
    c["otype"][mass] = scope[mass]
    c["price_hi"] = np.where(mass & (scope == Scope.PRICE_RANGE),
                             price + rng.integers(0, 5, n), 0)

    bad = rng.random(n) < 0.05
    _corrupt(c, np.nonzero(bad)[0], rng, lo, hi, al)

    # ids: the target of a cancel / modify is mostly a recent id (often still resting),
    # sometimes any earlier id (often dead), sometimes one never issued
    valid_sub = (c["kind"] == Kind.SUBMIT) & ~bad
    issued = np.cumsum(valid_sub) - valid_sub  # ids issued before each command
    pick = rng.random(n)
    recent = issued - rng.integers(0, 10, n)
    anywhere = (rng.random(n) * issued).astype(np.int64) + 1
    never = np.where(rng.random(n) < 0.5, issued + rng.integers(1, 4, n), -rng.integers(0, 3, n))
    target = np.select([pick < 0.6, pick < 0.88], [recent, anywhere], never)
    targeted = np.isin(c["kind"], (Kind.CANCEL, Kind.MODIFY))
    c["id"] = np.where(targeted, target, 0)
    edge = np.nonzero(rng.random(n) < extreme)[0] if extreme else np.zeros(0, np.int64)
    _extreme(c, edge, rng, lo, hi, np.maximum(recent, 1), al)
    return c, edge


I64_MIN, I64_MAX = -(2**63), 2**63 - 1
ID_ENDS = [I64_MIN, I64_MIN + 1, -1, 2**31 - 1, 2**31, 2**32, 2**62, I64_MAX - 1, I64_MAX]
QTY_EDGES = [MAX_QTY - 1, MAX_QTY, MAX_QTY + 1, 2**62, I64_MAX, I64_MIN, I64_MIN + 1]
NOTIONAL_EDGES = [MAX_NOTIONAL - 1, MAX_NOTIONAL, MAX_NOTIONAL + 1, I64_MAX]
OWNER_ENDS = [2**31 - 1, -(2**31)]
I8_ENDS = [127, -128]


def _price_ends(lo: int, hi: int) -> list[int]:
    return [I64_MIN, I64_MIN + 1, -1, lo - 1, lo, hi, hi + 1, MAX_PRICE, MAX_PRICE + 1,
            I64_MAX - 1, I64_MAX]


def _extreme(c, idx, rng, lo: int, hi: int, recent, al: _Allowed) -> None:
    """Replace each command at ``idx`` by one carrying values at the bounds (or the ends of
    its field's type); a third of them are still valid (they rest, trade, cancel). Only the
    forms that use what the engine declares are drawn."""
    prices = _price_ends(lo, hi)
    forms = al.extreme_forms

    def pick(xs):
        return xs[int(rng.integers(0, len(xs)))]

    for i in idx.tolist():
        r = pick(forms)
        c[i] = np.zeros(1, COMMAND_DTYPE)[0]
        c["timed"][i] = True
        c["owner"][i] = int(rng.integers(1, 4))
        c["side"][i] = int(rng.integers(0, 2))
        in_band = int(rng.integers(lo, hi + 1))
        if r == 0:  # a priced order of a quantity at the bound (valid up to MAX_QTY)
            c["otype"][i], c["price"][i] = pick(al.priced), in_band
            c["qty"][i] = pick(QTY_EDGES[:3] * 3 + QTY_EDGES[3:])
        elif r == 1:  # a market / notional order: ignored price at the ends, big amounts
            c["otype"][i] = int(rng.choice(al.market))
            c["price"][i] = pick(prices)
            c["qty"][i] = pick(QTY_EDGES[:3] if c["otype"][i] == 4 else NOTIONAL_EDGES)
        elif r == 2:  # a priced order at or beyond the band's ends and MAX_PRICE
            c["otype"][i], c["price"][i] = pick(al.priced), pick(prices)
            c["qty"][i] = int(rng.integers(1, 9))
        elif r == 3:  # cancel of an id at the ends of int64
            c["kind"][i], c["id"][i] = Kind.CANCEL, pick(ID_ENDS)
        elif r == 4:  # modify: a live-ish or an extreme id, a bound quantity, an end price
            c["kind"][i] = Kind.MODIFY
            c["id"][i] = int(recent[i]) if rng.random() < 0.6 else pick(ID_ENDS)
            c["qty"][i] = pick(QTY_EDGES[:3] + [1])
            c["price"][i] = pick(prices + [0, 0, in_band])
        elif r == 5:  # mass cancel over a price range with ends anywhere in int64
            a, b = pick(prices), pick(prices)
            c["kind"][i], c["otype"][i] = Kind.MASS_CANCEL, Scope.PRICE_RANGE
            c["price"][i], c["price_hi"][i] = (min(a, b), max(a, b)) if rng.random() < 0.9 \
                else (max(a, b), min(a, b))
        elif r == 6:  # owners at the ends of int32 (submit, or mass cancel by owner)
            if rng.random() < 0.5 or not (al.mass and Scope.OWNER in al.scopes):
                c["otype"][i], c["price"][i], c["qty"][i] = 0, in_band, MAX_QTY
            else:
                c["kind"][i], c["otype"][i] = Kind.MASS_CANCEL, Scope.OWNER
            c["owner"][i] = pick(OWNER_ENDS)
        elif r == 7:  # kind, type, side or scope at the ends of int8
            c["price"][i], c["qty"][i] = in_band, 1
            c["otype"][i] = al.priced[0]
            which = int(rng.integers(0, 4))
            if which == 0:
                c["kind"][i] = pick(I8_ENDS)
            elif which == 1:
                c["otype"][i] = pick(I8_ENDS)
            elif which == 2 or not (al.mass and Scope.SIDE in al.scopes):
                c["side"][i] = pick(I8_ENDS)
            else:
                c["kind"][i], c["otype"][i] = Kind.MASS_CANCEL, Scope.SIDE
                c["side"][i] = pick(I8_ENDS)
        else:  # a FOK for exactly MAX_QTY (valid: fillable only against a deep book)
            c["otype"][i], c["price"][i], c["qty"][i] = 2, pick([lo, hi, in_band]), MAX_QTY


def _corrupt(c: np.ndarray, idx: np.ndarray, rng: np.random.Generator, lo: int, hi: int,
             al: _Allowed) -> None:
    """Make each command at ``idx`` invalid in one of the ways its kind can be (a form
    that would still need an undeclared capability is replaced by a bad kind)."""
    for i in idx.tolist():
        k, r = int(c["kind"][i]), int(rng.integers(0, 6))
        if r == 0:
            c["kind"][i] = int(rng.choice([4, 5, -1]))
        elif k == Kind.SUBMIT:
            if r == 1:
                c["otype"][i] = int(rng.choice([6, 7, -1]))
            elif r == 2:
                c["side"][i] = int(rng.choice([2, -1]))
            elif r == 3:
                c["owner"][i] = int(rng.choice([0, -1]))
            elif r == 4:
                c["qty"][i] = int(rng.choice([0, -3]))
            else:
                c["otype"][i] = int(rng.integers(0, 4))  # a priced type, out of the band
                c["price"][i] = int(rng.choice([lo - 1 - rng.integers(0, 3), hi + 1, 0]))
        elif k in (Kind.CANCEL, Kind.MODIFY):
            # cancels have no invalid form beyond the kind: a MODIFY of a bad quantity
            # (rejected before anything else, so it needs no capability) or bad price
            bad_price = r % 2 == 0
            if bad_price and not al.modify:
                c["kind"][i] = int(rng.choice([4, 5, -1]))
                continue
            c["kind"][i] = Kind.MODIFY
            if not bad_price:
                c["qty"][i] = int(rng.choice([0, -2]))
            else:
                c["qty"][i] = int(rng.integers(1, 5))
                c["price"][i] = int(rng.choice([lo - 1, hi + 1, -7]))
        else:  # mass cancel
            if r == 1:
                c["otype"][i] = int(rng.choice([4, -1]))
            elif r == 2 and Scope.SIDE in al.scopes:
                c["otype"][i], c["side"][i] = Scope.SIDE, 3
            elif r == 3 and Scope.OWNER in al.scopes:
                c["otype"][i], c["owner"][i] = Scope.OWNER, 0
            elif r > 3 and Scope.PRICE_RANGE in al.scopes:
                c["otype"][i] = Scope.PRICE_RANGE
                c["price"][i], c["price_hi"][i] = hi, hi - 1 - int(rng.integers(0, 3))
            else:
                c["otype"][i] = int(rng.choice([4, -1]))


# --- replaying and comparing ---------------------------------------------------------------

CHECKPOINTS = 8  # L2 snapshots compared per replay (and the final book)


@dataclass
class Run:
    """A replay cut at checkpoints: outcomes and fills of the whole stream, and the full L2
    book ({"bids": [(price, qty, count), ...], "asks": [...]}) after each chunk."""

    outcomes: np.ndarray
    fills: np.ndarray
    books: list[tuple[int, dict]]  # (commands run, L2 after them)


def l2(eng, depth: int = 1_000_000) -> dict:
    """An engine's L2 snapshot as plain ints."""
    snap = eng.snapshot(depth)
    return {k: [tuple(int(x) for x in lvl) for lvl in snap[k]] for k in ("bids", "asks")}


def replay_checkpoints(eng, cmds: np.ndarray, checkpoints: int = CHECKPOINTS,
                       per_op: bool = False) -> Run:
    """Replay ``cmds`` through ``eng`` (a fresh engine) in ``checkpoints`` chunks, taking the
    whole L2 book after each; ``per_op``: command by command through ``execute`` with the
    engine's ``check()`` after each (lob's Python engines)."""
    n = len(cmds)
    cuts = sorted({*np.linspace(0, n, checkpoints + 1).astype(int).tolist()} - {0}) or [0]
    outs, fills, books, start = [], [], [], 0
    for end in cuts:
        chunk = cmds[start:end]
        if per_op:
            rows = []
            for row in chunk:
                o = eng.execute(row)
                rows.append((o.status, o.reason, o.id, o.remaining, o.filled, o.fills,
                             o.removed))
                eng.check()
            outs.append(np.array(rows, OUTCOME_DTYPE).reshape(len(chunk)))
        else:
            res = eng.replay(chunk)  # the book carries on; the fill record restarts
            outs.append(res.outcomes)
            fills.append(np.asarray(res.fills, FILL_DTYPE))
            if hasattr(eng, "check"):
                eng.check()
        books.append((end, l2(eng)))
        start = end
    allf = np.asarray(eng.fills, FILL_DTYPE) if per_op else \
        (np.concatenate(fills) if fills else np.zeros(0, FILL_DTYPE))
    return Run(np.concatenate(outs) if outs else np.zeros(0, OUTCOME_DTYPE), allf, books)


def _command_text(cmds, i) -> str:
    return str({f: int(cmds[i][f]) for f in ("kind", "otype", "side", "owner", "price", "qty",
                                              "id", "price_hi")})


def first_difference(cmds: np.ndarray, ref: Run, got: Run) -> str | None:
    """Where ``got`` first departs from ``ref`` (outcome, fill, or an L2 level at a
    checkpoint), as a few lines; None when they agree everywhere."""
    ro, go = ref.outcomes, got.outcomes
    if go.shape != ro.shape:
        return f"{len(go)} outcomes for {len(ro)} commands"
    diff = np.nonzero(ro != go)[0]
    if diff.size:
        i = int(diff[0])
        return (f"first divergence at command {i}: {_command_text(cmds, i)}\n"
                f"  reference: {Outcome.from_tuple(tuple(ro[i].tolist()))}\n"
                f"  engine:    {Outcome.from_tuple(tuple(go[i].tolist()))}")
    rf, gf = ref.fills, got.fills
    n = min(len(rf), len(gf))
    fdiff = np.nonzero(rf[:n] != gf[:n])[0]
    if fdiff.size or len(rf) != len(gf):
        k = int(fdiff[0]) if fdiff.size else n
        i = int(np.searchsorted(np.cumsum(ro["fills"]), k, side="right"))
        return (f"fill {k} differs (command {i}: {_command_text(cmds, i)}): reference "
                f"{rf[k].tolist() if k < len(rf) else None}, engine "
                f"{gf[k].tolist() if k < len(gf) else None}")
    for (at, rb), (at2, gb) in zip(ref.books, got.books, strict=True):
        assert at == at2
        for side in ("bids", "asks"):
            a, b = rb[side], gb[side]
            for j in range(max(len(a), len(b))):
                x = a[j] if j < len(a) else None
                y = b[j] if j < len(b) else None
                if x != y:
                    return (f"L2 after {at} commands, {side} level {j} (price, qty, count): "
                            f"reference {x}, engine {y}")
    return None


__all__ = ["CHECKPOINTS", "DEFAULT_LEN", "I64_MAX", "I64_MIN", "PROFILES", "STP_SLOTS",
           "FuzzCase", "Profile", "Run", "case", "cases", "first_difference", "fit",
           "gen_stream", "gen_stream_marked", "l2", "replay_checkpoints", "stp_for", "stream"]
