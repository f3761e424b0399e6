"""The parts of a command that both compiled layouts run alike, whatever their memory: the
outcome row, the validation of a submit, a modify or a mass cancel, the outcome of a match,
and the owner slots of the per-level owner sums. Every function is inlined at numba IR
level into the kernel that calls it (no call at run time); the layouts pass the values
they hold (in registers or in their state array), so none of these reads a layout's
memory beyond the arrays it is given."""

from __future__ import annotations

from numba import njit

from lob.engines.compiled.bitmap import u
from lob.engines.compiled.codes import (
    ACCEPTED,
    CANCELLED,
    FILLED,
    LIMIT,
    MARKET,
    NOTIONAL,
    PARTIAL,
    POST_ONLY,
    R_BAD_OWNER,
    R_BAD_PRICE,
    R_BAD_QTY,
    R_BAD_SCOPE,
    R_BAD_SIDE,
    R_BAD_TYPE,
    R_NO_LIQUIDITY,
    R_POOL_FULL,
    R_SELF_TRADE,
    REJECTED,
    SCOPE_ALL,
    SCOPE_OWNER,
    SCOPE_RANGE,
    SCOPE_SIDE,
)
from lob.engines.compiled.state import NSLOTS, OSLOT_SIZE, K
from lob.semantics import MAX_NOTIONAL, MAX_QTY


@njit(cache=True, _nrt=False, inline="always")
def put(out, i, status, reason, oid, remaining, filled, fills, removed):
    """Write outcome row ``i``."""
    r = out[i]
    r.status = status
    r.reason = reason
    r.id = oid
    r.remaining = remaining
    r.filled = filled
    r.fills = fills
    r.removed = removed


@njit(cache=True, _nrt=False, inline="always")
def fill(F, k, taker, maker, price, qty):
    """Write fill row ``k`` (taker id, maker id, price, quantity) of the fill buffer ``F``."""
    F[u(k), 0] = taker
    F[u(k), 1] = maker
    F[u(k), 2] = price
    F[u(k), 3] = qty


@njit(cache=True, _nrt=False, inline="always")
def crosses(side, market, limit, p):
    """Whether a taker on ``side`` (limit ``limit``, or a market order) trades at ``p``."""
    return market or (p <= limit if side == 0 else p >= limit)


@njit(cache=True, _nrt=False, inline="always")
def refuse_submit(out, i, otype, side, owner, price, qty, lo, hi, free):
    """Write the REJECTED row of an invalid submit (or one a full fixed pool cannot rest) and
    return True; False (nothing written) when the submit goes on."""
    if otype < 0 or otype > NOTIONAL:
        put(out, i, REJECTED, R_BAD_TYPE, 0, 0, 0, 0, 0)
    elif side != 0 and side != 1:
        put(out, i, REJECTED, R_BAD_SIDE, 0, 0, 0, 0, 0)
    elif owner <= 0:
        put(out, i, REJECTED, R_BAD_OWNER, 0, 0, 0, 0, 0)
    elif qty <= 0 or (qty > MAX_QTY and (otype != NOTIONAL or qty > MAX_NOTIONAL)):
        put(out, i, REJECTED, R_BAD_QTY, 0, 0, 0, 0, 0)
    elif otype < MARKET and (price < lo or price > hi):
        put(out, i, REJECTED, R_BAD_PRICE, 0, 0, 0, 0, 0)
    elif free < 0 and (otype == LIMIT or otype == POST_ONLY):
        put(out, i, REJECTED, R_POOL_FULL, 0, 0, 0, 0, 0)  # fixed-capacity mode only
    else:
        return False
    return True


@njit(cache=True, _nrt=False, inline="always")
def refuse_modify(out, i, qty, price, lo, hi):
    """Write the REJECTED row of a modify with a bad quantity or price and return True."""
    if qty <= 0 or qty > MAX_QTY:
        put(out, i, REJECTED, R_BAD_QTY, 0, 0, 0, 0, 0)
        return True
    if price != 0 and (price < lo or price > hi):
        put(out, i, REJECTED, R_BAD_PRICE, 0, 0, 0, 0, 0)
        return True
    return False


@njit(cache=True, _nrt=False, inline="always")
def mass_cancel_span(out, i, scope, side, owner, plo, phi, lo, hi, w):
    """Validate a mass cancel; returns ``(ok, xa, xb)``: the levels ``xa..xb`` it sweeps
    (the band for every scope but a range), or ``ok`` False with its REJECTED row written."""
    if scope < SCOPE_ALL or scope > SCOPE_RANGE:
        put(out, i, REJECTED, R_BAD_SCOPE, 0, 0, 0, 0, 0)
        return False, 0, -1
    if scope == SCOPE_SIDE and side != 0 and side != 1:
        put(out, i, REJECTED, R_BAD_SIDE, 0, 0, 0, 0, 0)
        return False, 0, -1
    if scope == SCOPE_OWNER and owner <= 0:
        put(out, i, REJECTED, R_BAD_OWNER, 0, 0, 0, 0, 0)
        return False, 0, -1
    if scope == SCOPE_RANGE and plo > phi:
        put(out, i, REJECTED, R_BAD_PRICE, 0, 0, 0, 0, 0)
        return False, 0, -1
    xa = 0
    xb = w - 1
    if scope == SCOPE_RANGE:  # clamp to the band without forming plo - lo near -2**63
        if plo > lo:
            xa = plo - lo
        if phi < lo:
            xb = -1
        elif phi < hi:
            xb = phi - lo
    return True, xa, xb


@njit(cache=True, _nrt=False, inline="always")
def settle(out, i, otype, stopped, too_dear, oid, left, filled, nfills, removed):
    """Write the outcome row of a matched order; returns True when its remainder ``left``
    rests (a LIMIT or POST_ONLY not stopped by self-trade prevention): the caller rests it."""
    reason = R_SELF_TRADE if stopped else 0
    if otype == NOTIONAL:
        if filled == 0:
            put(out, i, CANCELLED, reason or R_NO_LIQUIDITY, oid, left, 0, 0, removed)
        else:
            done = (too_dear or left == 0) and not stopped
            put(out, i, FILLED if done else PARTIAL, reason, oid, left, filled, nfills, removed)
    elif left == 0:
        put(out, i, FILLED, 0, oid, 0, filled, nfills, removed)
    elif (otype == LIMIT or otype == POST_ONLY) and not stopped:
        put(out, i, PARTIAL if filled else ACCEPTED, 0, oid, left, filled, nfills, removed)
        return True
    elif filled:
        put(out, i, PARTIAL, reason, oid, left, filled, nfills, removed)
    else:
        put(out, i, CANCELLED, reason or R_NO_LIQUIDITY, oid, left, 0, 0, removed)
    return False


@njit(cache=True, _nrt=False, inline="always")
def owner_slot(A, at, S, owner):
    """The owner's slot in the per-level owner sums (assigned on first sight), or -1. The
    owner map is ``A[at + owner]`` for owners below ``S[OSLOT_SIZE]`` (-1 never seen, -2 no
    slot left: sticky, so an owner never gains a slot while it may have resting orders)."""
    if owner >= S[OSLOT_SIZE]:
        return -1
    s = A[u(at + owner)]
    if s == -1:
        if S[NSLOTS] < S[K]:
            s = S[NSLOTS]
            S[NSLOTS] += 1
        else:
            s = -2
        A[u(at + owner)] = s
    return s if s >= 0 else -1


@njit(cache=True, _nrt=False, inline="always")
def own_in_table(A, at, sums_at, S, row, owner):
    """``owner``'s open quantity at level ``row`` from the owner sums (``A[sums_at + row * k
    + slot]``), 0 for an owner never seen, or -1 when only a walk of the level can tell."""
    if owner < S[OSLOT_SIZE]:
        s = A[u(at + owner)]
        if s >= 0:
            return A[u(sums_at + row * S[K] + s)]
        if s == -1:
            return 0  # never rested an order
    return -1
