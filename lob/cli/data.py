"""``lob data fetch|status|clear`` (the real data fetched on demand: :mod:`lob.workloads.fetch`)
and ``lob data import|remove`` (a user's file as a named workload:
:mod:`lob.workloads.imported`)."""

from __future__ import annotations

import sys
import time

from lob.workloads.fetch import ENV, OB_ANALYTICS, DataFetchError, clear, fetch, status


def _cmd_fetch(args) -> int:
    try:
        fetch(force=args.force)
    except DataFetchError as e:
        print(f"lob data fetch: {e}", file=sys.stderr)
        return 1
    return 0


def _cmd_status(args) -> int:
    print(status())
    return 0


def _cmd_clear(args) -> int:
    try:
        print(clear())
    except DataFetchError as e:
        print(f"lob data clear: {e}", file=sys.stderr)
        return 1
    return 0


def _cmd_import(args) -> int:
    from lob.workloads.feed import FeedError
    from lob.workloads.imported import import_file

    t0 = time.perf_counter()
    last = [t0]

    def progress(n, done=None, size=None):  # on a terminal, every 2 s
        now = time.perf_counter()
        if now - last[0] >= 2 and sys.stderr.isatty():
            last[0] = now
            pct = f" ({100 * done / size:.0f}% of the file)" if size else ""
            print(f"  {n:,} messages read{pct}, {n / (now - t0):,.0f}/s", file=sys.stderr,
                  flush=True)
    try:
        wl = import_file(args.format, args.file, name=args.name, symbol=args.symbol,
                         book=args.book, t_from=args.t_from, t_to=args.t_to, progress=progress)
    except FeedError as e:
        print(f"lob data import: {e}", file=sys.stderr)
        return 1
    import json

    prov = json.loads(wl.provenance)
    c = prov["counts"]
    took = time.perf_counter() - t0
    print(f"imported {wl.name}: {prov['messages_in_file']:,} messages read in {took:.1f} s "
          f"({prov['messages_in_file'] / max(took, 1e-9):,.0f}/s), {c['events']:,} of "
          f"{prov['symbol']} -> {len(wl):,} commands ({wl.n_timed:,} timed), "
          f"{c['trades_reproduced']:,} executions to reproduce; config {wl.config}")
    if c["book_checks"]:
        print(f"  venue book compared after {c['book_checks']:,} events: "
              f"{c['book_mismatches']:,} differed")
    print(f"  use it: lob bench --workload {wl.name} | lob.workload({wl.name!r}) | "
          f"lob workloads describe {wl.name}")
    return 0


def _cmd_remove(args) -> int:
    from lob.workloads.imported import remove

    print(f"removed {args.name}" if remove(args.name) else f"no imported workload {args.name}")
    return 0


DATA_DESC = (
    "The real capture behind `bitstamp_btcusd`, fetched on demand into a cache (never "
    "shipped): fetch, status, clear; and a user's own market-by-order file as a named "
    "workload: import, remove.")
IMPORT_DESC = (
    "Bring your own file: a LOBSTER message file (with its orderbook file: the book before "
    "the file and a level-by-level check after every event), a NASDAQ TotalView-ITCH 5.0 file "
    "(one symbol) or a Databento DBN MBO file (one instrument) becomes the workload NAME for "
    "every command (`lob bench --workload NAME`, a study's `workload=NAME`, "
    "`lob.workload(NAME)`), stored in lob's cache with the file's sha256. Every execution "
    "becomes a taker filling exactly the reported order and every invented rule is counted "
    "(`lob workloads describe NAME`); a bad or truncated file gets one line naming the byte "
    "offset or row and the field.")


def add_parsers(subparsers) -> None:
    """Add the ``data`` command group (fetch / status / clear / import / remove) to the
    ``lob`` parser."""
    p = subparsers.add_parser("data", description=DATA_DESC,
                              help="real data fetched on demand (not shipped)")
    sub = p.add_subparsers(dest="data_cmd", required=True)
    s = sub.add_parser("fetch", help=f"download {OB_ANALYTICS.requirement}'s wheel into the "
                       f"cache (${ENV} or ~/.cache/lob), check its sha256")
    s.add_argument("--force", action="store_true", help="download again even if cached")
    s.set_defaults(func=_cmd_fetch)
    s = sub.add_parser("status", help="where the data is cached and whether it checks out")
    s.set_defaults(func=_cmd_status)
    s = sub.add_parser("clear", help="delete the cached wheel")
    s.set_defaults(func=_cmd_clear)
    s = sub.add_parser("import", description=IMPORT_DESC,
                       help="turn a LOBSTER / ITCH 5.0 / DBN MBO file into a named "
                            "workload (stored in lob's cache with the file's sha256)")
    s.add_argument("format", choices=["lobster", "itch", "dbn"])
    s.add_argument("file")
    s.add_argument("--name", required=True, help="the workload's name")
    s.add_argument("--symbol", help="the symbol to keep (ITCH: required; DBN: a mapped "
                   "symbol or an instrument id; LOBSTER: checked against the file name)")
    s.add_argument("--book", help="LOBSTER's orderbook file: the pre-load and a level-by-level "
                   "check of the rebuilt book")
    s.add_argument("--from", dest="t_from", help="window start, HH:MM[:SS] (events before it "
                   "build the book untimed)")
    s.add_argument("--to", dest="t_to", help="window end, HH:MM[:SS]")
    s.set_defaults(func=_cmd_import)
    s = sub.add_parser("remove", help="delete an imported workload")
    s.add_argument("name")
    s.set_defaults(func=_cmd_remove)
