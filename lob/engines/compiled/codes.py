"""The semantics' codes as plain module-level ints, shared by both compiled kernels (numba
freezes module globals as compile-time constants): statuses, reasons, order types, STP modes,
command kinds, mass-cancel scopes, and what a kernel call asks Python to do next."""

from __future__ import annotations

from lob.semantics import Kind, OrderType, Reason, Scope, Status, StpMode

# status / reason / enum values from lob.semantics, as plain module-level ints (numba
# freezes them as compile-time constants)
FILLED, PARTIAL, ACCEPTED, CANCELLED, REJECTED, NOT_FOUND = (
    int(Status.FILLED), int(Status.PARTIALLY_FILLED), int(Status.ACCEPTED),
    int(Status.CANCELLED), int(Status.REJECTED), int(Status.NOT_FOUND))
R_BAD_KIND, R_BAD_TYPE, R_BAD_SIDE, R_BAD_OWNER, R_BAD_QTY, R_BAD_PRICE = (
    int(Reason.BAD_KIND), int(Reason.BAD_TYPE), int(Reason.BAD_SIDE), int(Reason.BAD_OWNER),
    int(Reason.BAD_QTY), int(Reason.BAD_PRICE))
R_BAD_SCOPE, R_UNKNOWN_ID, R_NO_LIQUIDITY, R_FOK_UNFILLABLE = (
    int(Reason.BAD_SCOPE), int(Reason.UNKNOWN_ID), int(Reason.NO_LIQUIDITY),
    int(Reason.FOK_UNFILLABLE))
R_WOULD_CROSS, R_SELF_TRADE, R_POOL_FULL = (
    int(Reason.WOULD_CROSS), int(Reason.SELF_TRADE), int(Reason.POOL_FULL))
LIMIT, IOC, FOK, POST_ONLY, MARKET, NOTIONAL = (int(t) for t in OrderType)
STP_NONE, STP_MAKER, STP_TAKER = (
    int(StpMode.NONE), int(StpMode.CANCEL_MAKER), int(StpMode.CANCEL_TAKER))
SUBMIT, CANCEL, MODIFY, MASS_CANCEL = (int(k) for k in Kind)
SCOPE_ALL, SCOPE_SIDE, SCOPE_OWNER, SCOPE_RANGE = (int(x) for x in Scope)

# what a kernel call asks Python to do
DONE, GROW_POOL, GROW_FILLS, GROW_INDEX = 0, 1, 2, 3
