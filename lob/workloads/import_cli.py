"""`lob data import FORMAT FILE --name NAME [--symbol S] [--book F] [--from T --to T]` and
`lob data remove NAME` (thin wrappers over :mod:`lob.workloads.imported`)."""

from __future__ import annotations

import sys
import time


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


def add_parsers(sub) -> None:
    """Add ``import`` and ``remove`` to the ``lob data`` group."""
    s = sub.add_parser("import", help="turn a LOBSTER / ITCH 5.0 / DBN MBO file into a named "
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
