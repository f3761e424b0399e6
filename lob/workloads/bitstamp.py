"""Real order flow: 30 minutes of Bitstamp BTC/USD market-by-order events as a lob workload.

Source: the sample capture in the PyPI wheel ``ob-analytics==0.1.0`` (GPL-2.0-or-later; the
data is Bitstamp's), fetched on demand into a cache outside the repo
(:mod:`lob.workloads.fetch`, ``lob data fetch``) and read straight from the wheel: lob ships
neither the data nor any ob-analytics code. Period: 2026-05-02 02:36:20 to 03:06:20 UTC.
Events: 314,057 (156,889 created / 266 changed / 156,902 deleted; 156,902 order ids), of which
rows 0..6511 are a REST snapshot taken just before the stream and the last 6,518 rows are
synthetic deletes closing every order at the end; 284 trades with buy and sell order ids.

Timestamps are the venue's (``exchange_timestamp``) in **milliseconds**: every rate or
inter-arrival time derived from them has millisecond resolution (many events share one ms).

Conversion rules (each is counted in :func:`conversion`'s ``counts``):

* prices are whole USD (lob ticks), quantities satoshi (1e-8 BTC); every order has owner 1 and
  the book's STP mode is NONE (the capture has no owners);
* the snapshot rows are an untimed pre-load of LIMIT orders (the snapshot is not crossed);
  snapshot bids at price 0 (below 1 USD, rounded down by the venue's ``group=2`` book) are
  dropped;
* a created order that trades as taker (its id is a taker's in trades.csv: the buyer of a
  ``buy`` trade, the seller of a ``sell`` one) is a LIMIT at its created price and volume;
  a created sell at price 0 is a MARKET sell; a created buy at 999999999 is a MARKET buy, or,
  with volume 0 (a buy by USD amount), a NOTIONAL order whose amount is the sum of price x
  quantity of its trades (USD x satoshi);
* every other created order is POST_ONLY. 64% of the created orders are deleted within the
  millisecond they were created, without trading, most of them priced across the touch: they
  behave like post-only orders the venue refused, and lob's POST_ONLY refuses them the same
  way. This intent is **inferred**, it is not in the data;
* ``changed`` rows are partial fills (every one belongs to an order that trades) and are left
  to the engine, as are deletes with volume 0 (filled orders);
* a delete with volume > 0 of an order resting in lob's book at that point is a CANCEL; the
  deletes of orders lob never rested (refused post-only orders, dropped orders, ids the
  capture never created) are dropped;
* a snapshot order that an incoming order crosses without trading with it at the venue (the
  taker's first real maker is another order, or a post-only order the venue kept would be
  refused by it) is stale (gone from the venue between the snapshot and the stream): an
  untimed CANCEL removes it just before;
* orders above ``MAX_QTY`` (10 BTC) are dropped (all far from the touch), and so are orders
  priced outside the band ``min_price..max_price`` (default 40,000..160,000 USD, about half
  to twice the touch of 78k: every lob engine holds it and it drops only far snapshot
  orders; ``max_price=0, min_price=1`` is the full range 1..483,980,000, which only
  ``reference`` holds); the cancels of dropped orders go with them. ``counts`` states the
  dropped orders and their share of the created ones;
* the synthetic closing deletes are not replayed (the book ends as the stream leaves it).

The stream keeps the venue's order of events. Replayed on any engine that holds the band it
gives every one of the 284 real trades (taker, maker, price, quantity) and no other fill:
:func:`validate` checks it, :func:`conversion` says how many.

The files users import (LOBSTER, ITCH, DBN: :mod:`lob.workloads.feed`) follow the same model
(resting orders as LIMIT submits keyed by venue id, every invented rule counted and printed
by ``describe``, the venue's trades compared fill by fill by the one
:func:`~lob.workloads.feed.compare_fills`); they carry no taker order, so their executions
become synthesised IOC takers where Bitstamp replays its real ones.
"""

from __future__ import annotations

import functools
import io
import json
from dataclasses import dataclass, field

import numpy as np

from lob.semantics import (
    COMMAND_DTYPE,
    FILL_DTYPE,
    MAX_PRICE,
    MAX_QTY,
    BookConfig,
    Kind,
    OrderType,
    Reason,
    StpMode,
)
from lob.workloads.diagnostics import BookShape
from lob.workloads.feed import compare_fills, describe_counts
from lob.workloads.fetch import OB_ANALYTICS, DataFetchError, ensure, read_member

__all__ = ["BAND", "RULES", "Capture", "Conversion", "arrival_ms", "band_for", "conversion",
           "due_offsets_ns", "load_capture", "replay_band", "validate"]

SUBMIT, CANCEL = int(Kind.SUBMIT), int(Kind.CANCEL)
LIMIT, POST_ONLY, MARKET, NOTIONAL = (int(OrderType.LIMIT), int(OrderType.POST_ONLY),
                                      int(OrderType.MARKET), int(OrderType.NOTIONAL))
MARKET_BUY_PRICE = 999_999_999
SAT = 100_000_000
CONVERTER_VERSION = 1
_ORDER_COLS = ["id", "timestamp", "exchange_timestamp", "price", "volume", "action",
               "direction"]
_TRADE_COLS = ["trade_id", "timestamp", "exchange_timestamp", "price", "amount",
               "buy_order_id", "sell_order_id", "side"]
_ACTIONS = {"created": 0, "changed": 1, "deleted": 2}
CREATED, CHANGED, DELETED = 0, 1, 2


@dataclass
class Capture:
    """The capture as integer arrays (prices USD, quantities satoshi, times ms)."""

    oid: np.ndarray  # venue order id per event
    exch_ms: np.ndarray  # exchange timestamp (ms), non-decreasing
    price: np.ndarray  # whole USD
    sat: np.ndarray  # open volume after the event, satoshi
    action: np.ndarray  # CREATED / CHANGED / DELETED
    side: np.ndarray  # 0 bid (BUY), 1 ask (SELL)
    n_snapshot: int  # leading rows: the REST snapshot
    n_closing: int  # trailing rows: synthetic deletes
    trades: dict  # columns of trades.csv: trade_id, exch_ms, price, sat, taker, maker, side
    meta: dict

    def __len__(self) -> int:
        return len(self.oid)


def _to_sat(v: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(v, dtype=np.float64) * SAT).astype(np.int64)


def _csv(data: bytes, cols: list[str], what: str, **kw):
    import pandas as pd

    try:
        df = pd.read_csv(io.BytesIO(data), **kw)
    except Exception as e:
        raise DataFetchError(f"{what}: unreadable CSV ({type(e).__name__}: {e})") from None
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataFetchError(f"{what}: columns {missing} missing (has {list(df.columns)})")
    return df


@functools.lru_cache(maxsize=2)
def load_capture(path: str | None = None) -> Capture:
    """Read the capture from the wheel at ``path`` (default: the cached, verified one,
    fetched first if missing)."""
    from pathlib import Path

    p = Path(path) if path else ensure(OB_ANALYTICS)
    orders_m, trades_m, meta_m = OB_ANALYTICS.members
    o = _csv(read_member(p, orders_m), _ORDER_COLS, orders_m, compression="gzip")
    t = _csv(read_member(p, trades_m), _TRADE_COLS, trades_m)
    meta = json.loads(read_member(p, meta_m))
    action = o["action"].map(_ACTIONS)
    if action.isna().any():
        bad = sorted(set(o["action"]) - set(_ACTIONS))
        raise DataFetchError(f"{orders_m}: unknown actions {bad}")
    side = o["direction"].map({"bid": 0, "ask": 1})
    if side.isna().any():
        raise DataFetchError(f"{orders_m}: a direction other than bid / ask")
    price = o["price"].to_numpy(np.float64)
    if not np.array_equal(price, np.round(price)):
        raise DataFetchError(f"{orders_m}: prices are not whole USD")
    exch = o["exchange_timestamp"].to_numpy(np.int64)
    if np.any(np.diff(exch) < 0):
        raise DataFetchError(f"{orders_m}: exchange_timestamp decreases")
    tside = t["side"].map({"buy": 0, "sell": 1})
    if tside.isna().any():
        raise DataFetchError(f"{trades_m}: a side other than buy / sell")
    buy = t["buy_order_id"].to_numpy(np.int64)
    sell = t["sell_order_id"].to_numpy(np.int64)
    tb = tside.to_numpy(np.int64)
    trades = {"trade_id": t["trade_id"].to_numpy(np.int64),
              "exch_ms": t["exchange_timestamp"].to_numpy(np.int64),
              "price": np.rint(t["price"].to_numpy(np.float64)).astype(np.int64),
              "sat": _to_sat(t["amount"]), "side": tb,
              "taker": np.where(tb == 0, buy, sell), "maker": np.where(tb == 0, sell, buy)}
    return Capture(o["id"].to_numpy(np.int64), exch, price.astype(np.int64),
                   _to_sat(o["volume"]), action.to_numpy(np.int8), side.to_numpy(np.int8),
                   int(meta.get("synthetic_created", 0)), int(meta.get("synthetic_deleted", 0)),
                   trades, meta)


@dataclass
class Conversion:
    """The command stream of one band, with what every rule did."""

    commands: np.ndarray
    config: BookConfig
    arrival_ms: np.ndarray  # per command: venue ms since the stream's first event (0: snapshot)
    venue_id: np.ndarray  # per command: the venue order id it submits or cancels
    expected_fills: np.ndarray  # FILL_DTYPE: the venue's trades in lob ids
    counts: dict = field(default_factory=dict)


def _band(cap: Capture, min_price: int, max_price: int) -> BookConfig:
    priced = cap.price[(cap.action == CREATED) & (cap.price != MARKET_BUY_PRICE)]
    hi = int(priced.max()) if max_price == 0 else int(max_price)
    return BookConfig(max(1, int(min_price)), min(hi, MAX_PRICE), StpMode.NONE)


def _convert(cap: Capture, config: BookConfig) -> Conversion:
    from lob.engines import get_engine

    eng = get_engine("reference", config)
    book = BookShape()  # lob's book, followed from the engine's public outputs
    index, sides = book.orders, book.sides

    def step(*cmd) -> tuple:
        """One command on the engine; the followed book updated from its outcome and fills."""
        out = eng.step(*cmd)
        fl = ()
        if out[5]:
            fl = eng.fills.tolist()[-out[5]:]
            eng.clear_fills()
        book.apply(cmd, out, fl)
        return out
    lo, hi = config.min_price, config.max_price
    n = len(cap)
    oid, exch, price, sat = (a.tolist() for a in (cap.oid, cap.exch_ms, cap.price, cap.sat))
    action, side = cap.action.tolist(), cap.side.tolist()
    tr = cap.trades
    taker_trades, traded, kept, first_ms = _venue_facts(cap)
    body_end = n - cap.n_closing
    t0 = exch[cap.n_snapshot] if cap.n_snapshot < n else 0

    rows: list[tuple] = []  # (kind, otype, side, price, qty, target venue id, timed, ms)
    lob_id: dict[int, int] = {}  # venue id -> lob id
    snap_lob: set[int] = set()
    c = dict.fromkeys(RULES, 0)  # every count, in the order RULES documents them
    dropped: set[int] = set()
    refused: set[int] = set()
    keys = {LIMIT: "limit_takers", POST_ONLY: "post_only", NOTIONAL: "notional_buys",
            MARKET: "market_sells"}
    maker_of = tr["maker"].tolist()

    def first_crossing(s: int, limit: int | None):
        """The first resting order an incoming order of side ``s`` would meet, if it
        crosses ``limit`` (None: any price)."""
        opp = sides[1 - s]
        if not opp:
            return None
        p, level = opp.peekitem(0 if s == 0 else -1)
        if limit is not None and (p > limit if s == 0 else p < limit):
            return None
        return next(iter(level))  # the id first in time priority

    for i in range(n):
        v, a, s = oid[i], action[i], side[i]
        timed = i >= cap.n_snapshot
        ms = exch[i] - t0 if timed else 0
        if a == CHANGED:
            c["changed_rows"] += 1
            c["changed_without_trade"] += v not in traded
            continue
        if a == DELETED:
            if i >= body_end:
                c["closing_deletes_not_replayed"] += 1
                continue
            lid = lob_id.get(v)
            if sat[i] == 0:
                c["fill_deletes"] += 1
                c["fill_deletes_still_resting_in_lob"] += lid is not None and lid in index
                continue
            if lid is not None and lid in index:
                step(CANCEL, 0, 0, 0, 0, 0, lid, 0)
                rows.append((CANCEL, 0, 0, 0, 0, v, True, ms))
                c["cancels"] += 1
            elif v in refused:
                c["deletes_of_refused_post_only"] += 1
            elif v in dropped:
                c["deletes_of_dropped_orders"] += 1
            elif v not in first_ms:
                c["deletes_never_created"] += 1
            continue
        # created
        p = price[i]
        otype, q = _order_type(v, s, p, sat[i], timed, taker_trades, tr, lo, hi, c)
        if otype < 0:
            dropped.add(v)
            continue
        ks = taker_trades.get(v) if timed else None
        if ks or (timed and otype == POST_ONLY and v in kept):
            # stale snapshot orders: crossed by an order the venue did not match with them
            limit = None if otype in (MARKET, NOTIONAL) else p
            first_maker = lob_id.get(maker_of[ks[0]]) if ks else None
            while True:
                o = first_crossing(s, limit)
                if o is None or o not in snap_lob or o == first_maker:
                    break
                step(CANCEL, 0, 0, 0, 0, 0, o, 0)
                rows.append((CANCEL, 0, 0, 0, 0, -o, False, ms))
                c["stale_snapshot_cancelled"] += 1
        out = step(SUBMIT, otype, s, 1, p if otype != MARKET else 0, q, 0, 0)
        rows.append((SUBMIT, otype, s, p if otype in (LIMIT, POST_ONLY) else 0, q, v, timed, ms))
        lob_id[v] = out[2]
        if not timed:
            snap_lob.add(out[2])
        else:
            c[keys[otype] if otype != MARKET or s == 1 else "market_buys"] += 1
        if out[1] == int(Reason.WOULD_CROSS):
            c["post_only_refused"] += 1
            refused.add(v)
            c["post_only_refused_but_kept_by_venue"] += v in kept

    return _assemble(cap, config, rows, lob_id, len(dropped), c, t0)


def _order_type(v, s, p, q, timed, taker_trades, tr, lo, hi, c) -> tuple[int, int]:
    """The order type a created order is replayed as, and its quantity (a notional buy: its
    trades' USD x satoshi); type -1: dropped (the rule counted in ``c``)."""
    if not timed:
        otype = LIMIT
        c["snapshot_orders"] += 1
        if p < 1:
            c["snapshot_dropped_price_below_1"] += 1
            return -1, q
    elif s == 1 and p == 0:
        otype = MARKET
    elif s == 0 and p == MARKET_BUY_PRICE:
        otype = MARKET if q > 0 else NOTIONAL
        if otype == NOTIONAL:
            ks = taker_trades.get(v, [])
            q = sum(int(tr["price"][k]) * int(tr["sat"][k]) for k in ks)  # USD x sat
            if q == 0:
                c["notional_without_trades_dropped"] += 1
                return -1, q
    elif v in taker_trades:
        otype = LIMIT
    else:
        otype = POST_ONLY
    if otype != NOTIONAL and q > MAX_QTY:
        c["dropped_above_max_qty"] += 1
        return -1, q
    if otype in (LIMIT, POST_ONLY) and not lo <= p <= hi:
        c["dropped_outside_band"] += 1
        return -1, q
    return int(otype), q


def _venue_facts(cap: Capture):
    """What the capture says of its orders: each taker's trades (their rows in trades.csv),
    the ids that traded, the ids the venue kept (traded as maker, or outlived their
    creation millisecond) and each id's creation millisecond."""
    tr = cap.trades
    oid, exch, action = cap.oid.tolist(), cap.exch_ms.tolist(), cap.action.tolist()
    taker_trades: dict[int, list[int]] = {}
    for k, v in enumerate(tr["taker"].tolist()):
        taker_trades.setdefault(v, []).append(k)
    traded = set(tr["taker"].tolist()) | set(tr["maker"].tolist())
    first_ms: dict[int, int] = {}
    kept: set[int] = set(tr["maker"].tolist())
    body_end = len(cap) - cap.n_closing
    for i in range(len(cap)):
        v = oid[i]
        if action[i] == CREATED:
            first_ms[v] = exch[i]
        elif v in first_ms and (exch[i] > first_ms[v] or i >= body_end):
            kept.add(v)
    return taker_trades, traded, kept, first_ms


def _assemble(cap: Capture, config: BookConfig, rows: list, lob_id: dict, n_dropped: int,
              c: dict, t0: int) -> Conversion:
    """The commands of the converted ``rows``, the venue's trades in lob ids and the
    closing counts."""
    tr = cap.trades
    n, body_end = len(cap), len(cap) - cap.n_closing
    cmds = np.zeros(len(rows), dtype=COMMAND_DTYPE)
    cols = list(zip(*rows, strict=True)) if rows else [()] * 8
    cmds["kind"], cmds["otype"], cmds["side"] = cols[0], cols[1], cols[2]
    cmds["price"], cmds["qty"], cmds["timed"] = cols[3], cols[4], cols[6]
    cmds["owner"] = np.where(cmds["kind"] == SUBMIT, 1, 0)
    target = np.array(cols[5], dtype=np.int64)
    # cancels target lob ids: venue ids mapped, stale ones carry -(lob id)
    cmds["id"] = [(-t if t < 0 else lob_id[t]) if k == CANCEL else 0
                  for k, t in zip(cols[0], target.tolist(), strict=True)]
    venue = np.where(target < 0, 0, target)
    expected = np.zeros(len(tr["taker"]), dtype=FILL_DTYPE)
    missing = 0
    for k, (tk, mk) in enumerate(zip(tr["taker"].tolist(), tr["maker"].tolist(), strict=True)):
        if tk in lob_id and mk in lob_id:
            expected[k] = (lob_id[tk], lob_id[mk], tr["price"][k], tr["sat"][k])
        else:
            missing += 1
    n_created = int(np.count_nonzero(cap.action == CREATED))
    c["created_orders"] = n_created
    c["dropped_orders"] = n_dropped
    c["dropped_share_pct"] = round(100.0 * n_dropped / max(1, n_created), 3)
    c["trades_venue"] = len(expected)
    c["trades_of_dropped_orders"] = missing
    c["events"] = n
    c["commands"] = len(cmds)
    c["timed_commands"] = int(np.count_nonzero(cmds["timed"]))
    c["span_ms"] = int(cap.exch_ms[body_end - 1] - t0) if body_end > cap.n_snapshot else 0
    return Conversion(cmds, config, np.array(cols[7], dtype=np.int64), venue,
                      expected, c)


RULES = {  # count -> the rule it counts (printed by `lob workloads describe`)
    "snapshot_orders": "REST snapshot rows: an untimed pre-load of LIMIT orders (not crossed)",
    "snapshot_dropped_price_below_1": "snapshot bids at price 0 (under 1 USD): dropped",
    "limit_takers": "created orders that trade as taker in trades.csv: LIMIT at created price",
    "market_sells": "created sells at price 0: MARKET",
    "market_buys": "created buys at 999999999 with a volume: MARKET",
    "notional_buys": "created buys at 999999999 with volume 0 (by USD amount): NOTIONAL, "
                     "amount = sum of price x satoshi of its trades",
    "notional_without_trades_dropped": "buys by amount that never traded: dropped",
    "post_only": "every other created order: POST_ONLY (inferred intent, not in the data)",
    "post_only_refused": "of which lob refused (WOULD_CROSS), as the venue did",
    "post_only_refused_but_kept_by_venue": "refused by lob but kept by the venue (should be 0)",
    "dropped_above_max_qty": "orders above MAX_QTY (10 BTC): dropped",
    "dropped_outside_band": "orders priced outside the band: dropped",
    "stale_snapshot_cancelled": "snapshot orders crossed by an order the venue did not match "
                                "with them: stale, an untimed CANCEL just before",
    "cancels": "deletes (volume > 0) of orders resting in lob: CANCEL",
    "deletes_of_refused_post_only": "deletes of refused post-only orders: dropped",
    "deletes_of_dropped_orders": "deletes of dropped orders: dropped",
    "deletes_never_created": "deletes of ids the capture never created: dropped",
    "fill_deletes": "deletes with volume 0 (filled): left to the engine",
    "fill_deletes_still_resting_in_lob": "filled at the venue but resting in lob (should be 0)",
    "changed_rows": "changed rows (partial fills): left to the engine",
    "changed_without_trade": "changed rows of orders that never trade (should be 0)",
    "closing_deletes_not_replayed": "synthetic deletes closing every order at the end: "
                                    "not replayed",
    "created_orders": "created rows in the capture",
    "dropped_orders": "created orders dropped by the rules above",
    "dropped_share_pct": "their share of the created orders, %",
    "trades_venue": "trades in trades.csv",
    "trades_of_dropped_orders": "trades whose taker or maker was dropped (not replayable)",
    "events": "rows of orders.csv",
    "commands": "lob commands",
    "timed_commands": "of which timed (the stream after the snapshot)",
    "span_ms": "venue time from the first to the last replayed event, ms",
}

BAND = (40_000, 160_000)  # the default band: every lob engine holds it; drops far orders only


@functools.lru_cache(maxsize=4)
def conversion(min_price: int = BAND[0], max_price: int = BAND[1]) -> Conversion:
    """The converted stream for the band ``min_price..max_price`` USD (``max_price`` 0: up
    to the highest price in the data, which only ``reference`` holds), with its rule counts;
    computed once per process and band (a reference replay, about 2 s)."""
    cap = load_capture()
    return _convert(cap, _band(cap, int(min_price), int(max_price)))


def band_for(engine: str) -> tuple[int, int]:
    """The band to replay on ``engine``: the full price range (``(1, 0)``) when the engine
    can hold it (``reference``: memory independent of the band), else :data:`BAND`
    (:func:`conversion`'s ``counts`` state what the cut drops)."""
    from lob.engines import get_engine

    cap = load_capture()
    full = _band(cap, 1, 0)
    w = getattr(get_engine(engine, BookConfig(1, 1)), "max_band_width", None)
    return (1, 0) if w is None or w >= full.width else BAND


def _band_of(wl) -> tuple[int, int]:
    return (int(wl.params.get("min_price", BAND[0])), int(wl.params.get("max_price", BAND[1])))


def _of(wl) -> Conversion:
    return conversion(*_band_of(wl))


def arrival_ms(wl) -> np.ndarray:
    """Venue arrival time of each command of a ``bitstamp_btcusd`` workload, in **ms** since
    the stream's first event (0 for the untimed snapshot pre-load); inter-arrival times are
    ``np.diff`` of it (millisecond resolution: many commands share one ms)."""
    return _of(wl).arrival_ms[:len(wl)]


def due_offsets_ns(wl, speedup: float = 1.0) -> np.ndarray:
    """When each command of ``wl`` is due, in ns after the first timed command, replaying
    the venue's inter-arrival times (ms resolution) ``speedup`` times faster: the input an
    open-loop sender needs to drive the real flow at 1x or accelerated (untimed commands
    are due at 0)."""
    if not speedup > 0:
        raise ValueError(f"speedup must be > 0, got {speedup!r}")
    return np.rint(arrival_ms(wl) * (1e6 / speedup)).astype(np.int64)


@functools.lru_cache(maxsize=4)
def replay_band(engine: str, band: tuple[int, int] = BAND):
    """The :class:`~lob.engines.base.ReplayResult` of the whole stream of ``band`` on
    ``engine`` (cached: the describe text, the tests and :func:`validate` share one replay)."""
    from lob.engines import get_engine

    conv = conversion(*band)
    return get_engine(engine, conv.config).replay(conv.commands)


def validate(engine: str = "reference", band: tuple[int, int] = BAND, *, wl=None) -> dict:
    """Replay the stream of ``band`` (or the workload ``wl``, a prefix when its scale < 1)
    on ``engine``; compare its fills with the venue's trades.

    Returns ``{"engine", "fills", "trades", "matched", "extra", "missing", "ok"}``: ``ok``
    when every real trade (of the takers the stream submits) is reproduced fill by fill
    (taker, maker, price, quantity) in the venue's order and there is no other fill.
    """
    from lob.engines import get_engine

    conv = conversion(*band) if wl is None else _of(wl)
    cmds = conv.commands if wl is None else wl.commands
    if len(cmds) == len(conv.commands) and np.array_equal(cmds, conv.commands):
        got = replay_band(engine, band if wl is None else _band_of(wl)).fills
    else:
        got = get_engine(engine, conv.config).replay(cmds).fills
    want = conv.expected_fills[conv.expected_fills["taker"] > 0]
    if wl is not None:  # a prefix (scale < 1): the trades of the takers it submits
        n_sub = int(np.count_nonzero(cmds["kind"] == SUBMIT))
        want = want[want["taker"] <= n_sub]
    return {"engine": engine, **compare_fills(got, want)}


def _build(*, scale: float, seed: int, min_price: int, max_price: int):
    if scale > 1:
        raise ValueError("bitstamp_btcusd is a recorded stream: scale must be <= 1 (a prefix)")
    if max_price and max_price < min_price:
        raise ValueError(f"max_price ({max_price}) must be >= min_price ({min_price}), "
                         "or 0 (the highest price in the data)")
    conv = conversion(min_price, max_price)
    cmds = conv.commands
    n_pre = int(np.argmax(cmds["timed"])) if cmds["timed"].any() else len(cmds)
    end = n_pre + max(1, round(scale * (len(cmds) - n_pre)))
    return cmds[:end].copy(), conv.config


def describe_conversion(wl) -> str:
    """The rule counts of a ``bitstamp_btcusd`` workload, as text (``lob workloads
    describe``)."""
    conv = _of(wl)
    c = conv.counts
    lines = [f"  conversion (band {conv.config.min_price:,}..{conv.config.max_price:,} USD; "
             f"venue times in ms, span {c['span_ms'] / 1000:,.1f} s; counts over the whole "
             "stream):"]
    lines += describe_counts(c, RULES)
    v = validate("reference", wl=wl)
    lines.append(f"  validation against the venue (reference replay of these {len(wl):,} "
                 f"commands): {v['matched']:,} of {v['trades']:,} real trades reproduced "
                 f"fill by fill, {v['extra']:,} extra fills, {v['missing']:,} missing: "
                 f"{'OK' if v['ok'] else 'MISMATCH'} (the capture has {c['trades_venue']:,} "
                 f"trades; {c['trades_of_dropped_orders']:,} involve a dropped order)")
    return "\n".join(lines)


_PROV = ("Bitstamp BTC/USD market-by-order capture, 2026-05-02 02:36-03:06 UTC, from the sample "
         "data of the PyPI package ob-analytics 0.1.0 (GPL-2.0-or-later; the data is "
         "Bitstamp's). Fetched on demand (`lob data fetch`, pinned sha256), never shipped; "
         "lob's own converter (lob.workloads.bitstamp).")

WORKLOADS = {
    "bitstamp_btcusd": dict(
        build=_build,
        defaults={"seed": 0, "min_price": BAND[0], "max_price": BAND[1]},
        description=(
            "Real order flow: 30 minutes of Bitstamp BTC/USD (314,057 events: 156,889 "
            "created / 266 changed / 156,902 deleted; 284 trades) converted to lob commands: "
            "a 6.5k-order snapshot pre-load, then POST_ONLY quotes (most refused: inferred "
            "intent), their cancels, and LIMIT / MARKET / NOTIONAL takers; whole-USD ticks, "
            "satoshi lots, ms timestamps. Replayed, it reproduces every real trade fill by "
            "fill. Band min_price..max_price USD (default 40k..160k: every engine holds it, "
            "it drops only far snapshot orders; max_price=0 min_price=1: the full range, reference "
            "only); scale < 1 replays a prefix; seed is unused. Rules and counts: "
            "lob.workloads.bitstamp."),
        provenance=_PROV,
        describe=describe_conversion),
}

