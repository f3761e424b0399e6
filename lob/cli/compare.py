"""``lob compare``: two result sets metric by metric, with bootstrap intervals
(:func:`lob.measure.compare.compare`)."""

from __future__ import annotations

from pathlib import Path

from lob.measure.compare import METRICS, compare


def _cmd_compare(args) -> int:
    c = compare(args.a, args.b, metrics=args.metric or None, allow_mixed=args.allow_mixed,
                allow_different=args.allow_different, threshold=args.threshold / 100,
                confidence=args.confidence)
    text = c.markdown()
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text + "\n")
        c.plot(out / "compare.png")
        print(f"wrote {out / 'compare.md'} and {out / 'compare.png'}")
    if not len(c.rows):
        print("nothing to compare: no (engine, workload, metric) on both sides")
        return 1
    if args.fail_above is not None:
        blind = c.unseen + [f"{f} ({why})" for side in (c.a, c.b) for f, why in side.unreadable]
        if blind:  # a gate passes only on what it saw
            print(f"FAIL: the gate could not see {len(blind)}: " + "; ".join(blind))
            return 1
        single = c.over(args.fail_above, ("inconclusive",))
        if len(single):
            print(f"not gated (inconclusive: no interval clears the noise): {len(single)} "
                  f"comparisons above x{args.fail_above}: "
                  + ", ".join(f"{r.engine}/{r.workload}/{METRICS[r.metric]} x{r.ratio:.3f}"
                              for r in single.itertuples()))
        bad = c.over(args.fail_above)
        if len(bad):
            print(f"FAIL: {len(bad)} comparisons worse than x{args.fail_above}: "
                  + ", ".join(f"{r.engine}/{r.workload}/{METRICS[r.metric]} x{r.ratio:.3f}"
                              for r in bad.itertuples()))
            return 1
    return 0


COMPARE_DESC = (
    "Two result sets metric by metric: ratio, bootstrap interval, the change call (pyperf "
    "compare_to style). Refuses results from different machines, workload parameters or "
    "schema versions unless told, and always refuses results whose replays disagree (checksum "
    "or counters: an engine that does less is not faster).")


def add_parsers(sub) -> None:
    """Register ``lob compare`` on the ``lob`` CLI's subparsers."""
    s = sub.add_parser("compare", description=COMPARE_DESC,
                       help="compare two result sets metric by metric, with "
                            "bootstrap intervals (pyperf compare_to style)")
    s.add_argument("a", help="before: result JSON, run folder or experiment run id")
    s.add_argument("b", help="after: result JSON, run folder or experiment run id")
    s.add_argument("--metric", action="append", default=[],
                   help="ns/op | p50 | p99 | p99.9 | allocs/op (repeatable; default all)")
    s.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="call a change only beyond this many percent (default 5: an "
                        "interval inside 0.95-1.05 is within noise)")
    s.add_argument("--confidence", type=float, default=0.95, help="interval level")
    s.add_argument("--allow-mixed", action="store_true",
                   help="compare results from different machines anyway")
    s.add_argument("--allow-different", action="store_true",
                   help="compare results of different workload parameters (scale, seed, ...)"
                        " or schema versions anyway (the differences are listed)")
    s.add_argument("--out", default=None, help="folder for compare.md and compare.png")
    s.add_argument("--fail-above", type=float, default=None, metavar="RATIO",
                   help="exit 1 when a comparison is slower than RATIO (B/A) beyond noise, "
                        "or when a pair or metric is on one side only or a result file is "
                        "unreadable (values without an interval are listed, not gated)")
    s.set_defaults(func=_cmd_compare)
