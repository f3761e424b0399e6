"""`lob fuzz --engines A,B --workload W` and `lob replay --commands FILE` (thin wrappers over
:mod:`lob.engines.shrink`): find where two engines disagree on a stream, shrink it to a
minimal reproducer, print it as a table, write it as a file that `lob replay` and a pytest
regression test load."""

from __future__ import annotations

import sys
import time


def _engines(text: str) -> tuple[str, str]:
    from lob.engines import engine_names

    names = [e.strip() for e in text.split(",") if e.strip()]
    if len(names) != 2:
        raise ValueError(f"--engines takes two engines, A,B (got {text!r})")
    for e in names:
        if e not in engine_names():
            raise ValueError(f"unknown engine {e!r}; engines: {', '.join(engine_names())}")
    return names[0], names[1]


def _fits(engines, config, cmds) -> None:
    """Refuse a stream an engine does not declare (one line naming what it lacks)."""
    from lob.engines.registry import engine_capabilities

    for e in engines:
        caps = engine_capabilities(e)
        why = caps.config_refusal(e, config) or caps.commands_refusal(e, cmds, config)
        if why:
            raise ValueError(why)


def _profile_stream(a: str, b: str, args):
    """The fuzz stream of ``--profile`` drawn inside the engines' declarations: the first STP
    slot's case whose stream makes them diverge (else the last one tried)."""
    from lob.engines.registry import engine_capabilities
    from lob.engines.shrink import divergence
    from lob.workloads import fuzz as fz

    if args.profile not in fz.PROFILES:
        raise ValueError(f"unknown fuzz profile {args.profile!r}; profiles: "
                         f"{', '.join(fz.PROFILES)}")
    ca, cb = engine_capabilities(a), engine_capabilities(b)
    if ca.complete or cb.complete or ca == cb:
        caps = cb if ca.complete else ca
    else:
        raise ValueError(f"{a} and {b} both declare part of lob's semantics, differently: "
                         "fuzz each against reference, or give --workload")
    for slot in range(fz.STP_SLOTS):
        c = fz.case(args.profile, slot, args.seed, caps)
        cmds = c.commands(args.commands)
        if divergence(a, b, c.config, cmds) is not None:
            break
    return cmds, c.config, f"fuzz case {c.name} ({args.profile}, fitted to the engines)"


def _check_args(args) -> None:
    """Every flag checked before any stream is drawn or replayed (one line each)."""
    import math
    from pathlib import Path

    if args.commands < 1:
        raise ValueError(f"--commands must be at least 1, got {args.commands} (agreeing on "
                         "no command proves nothing)")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    if not (args.time_limit > 0 and math.isfinite(args.time_limit)):
        raise ValueError(f"--time-limit must be a number of seconds > 0, got "
                         f"{args.time_limit}")
    out = Path(args.out)
    if out.is_dir() or not out.parent.is_dir():
        raise ValueError(f"--out {args.out}: the reproducer's file name, in a folder that "
                         "exists")


def _cmd_fuzz(args) -> int:
    from lob.engines.shrink import divergence, save_reproducer, shrink, table
    from lob.workloads import build

    a, b = _engines(args.engines)
    _check_args(args)
    if args.profile:
        cmds, config, source = _profile_stream(a, b, args)
    else:
        wl = build(args.workload, scale=args.scale, seed=args.seed)
        cmds, config = wl.commands, wl.config
        source = f"workload {wl.name} at scale {args.scale:g}"
    _fits((a, b), config, cmds)
    t0 = time.perf_counter()
    first = divergence(a, b, config, cmds)
    found = time.perf_counter() - t0
    if first is None:
        print(f"{a} and {b} agree on {source}: {len(cmds):,} commands (outcomes, fills, "
              f"final book), {found:.1f} s")
        return 0
    print(f"{a} and {b} diverge on {source} ({len(cmds):,} commands, found in {found:.1f} s):"
          f"\n  {first}")
    s = shrink(a, b, config, cmds, first=first, time_limit=args.time_limit,
               log=lambda m: print("  " + m, file=sys.stderr))
    print(f"shrunk to {len(s.commands)} commands in {s.seconds:.1f} s ({s.tests} replays of "
          f"both engines); config {config}; the same divergence:\n  {s.divergence}\n")
    print(table(s.commands, (a, b), config))
    out = save_reproducer(args.out, s, (a, b), config)
    print(f"\nwrote {out}: `lob replay --commands {out}` replays it; in a test: "
          "lob.engines.shrink.load_reproducer")
    return 1


def _cmd_replay(args) -> int:
    from lob.engines.shrink import divergence, load_reproducer, table

    engines, config, cmds, doc = load_reproducer(args.commands)
    if args.engines:
        engines = list(_engines(args.engines))
    print(f"{len(cmds)} commands, config {config}" + (f"; recorded: {doc['divergence']}"
                                                       if doc.get("divergence") else ""))
    print(table(cmds, tuple(engines), config))
    if len(engines) == 2:
        d = divergence(engines[0], engines[1], config, cmds)
        print(f"{engines[0]} vs {engines[1]}: " + (f"diverge: {d}" if d else "agree"))
        return 1 if d else 0
    return 0


FUZZ_DESC = (
    "Where two engines (any: lob's, numba, foreign) disagree on a stream, shrunk to a minimal "
    "reproducer (commands after the divergence dropped, delta debugging over commands, then "
    "simpler field values, the same kind of divergence kept). Prints it as a table beside "
    "both engines' outcomes and writes it as JSON (exit 1 when they diverge). --profile P: "
    "lob's fuzz streams (lob.workloads.fuzz) drawn inside the engines' declared capabilities, "
    "each STP slot in turn.")
REPLAY_DESC = (
    "A reproducer replayed: its table, and whether the engines still diverge (exit 1) or "
    "agree. lob.engines.shrink.load_reproducer(FILE) loads it in a pytest regression test.")


def add_parsers(subparsers) -> None:
    """Add ``fuzz`` and ``replay`` to the ``lob`` parser."""
    s = subparsers.add_parser("fuzz", description=FUZZ_DESC,
                              help="find where two engines disagree on a stream and "
                                   "shrink it to a minimal reproducer (table + file)")
    s.add_argument("--engines", required=True, help="two engines, A,B")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--workload", help="a workload's stream (any registered or imported one)")
    g.add_argument("--profile", help="a fuzz profile (lob.workloads.fuzz: narrow, wide, ...), "
                   "drawn inside the engines' declared capabilities, each STP slot in turn")
    s.add_argument("--scale", type=float, default=1.0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--commands", type=int, default=100_000, help="fuzz stream length")
    s.add_argument("--time-limit", type=float, default=60.0,
                   help="seconds the shrinking may take (then smaller, not minimal)")
    s.add_argument("--out", default="reproducer.json", help="where the reproducer goes")
    s.set_defaults(func=_cmd_fuzz)
    s = subparsers.add_parser("replay", description=REPLAY_DESC,
                              help="replay a reproducer file on its engines (or "
                                   "--engines A,B): its table and whether they diverge")
    s.add_argument("--commands", required=True, help="a reproducer written by `lob fuzz`")
    s.add_argument("--engines", help="two engines, A,B (default: the file's)")
    s.set_defaults(func=_cmd_replay)
