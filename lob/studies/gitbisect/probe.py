"""The measuring program of ``lob bisect``, run as a script inside a revision's checkout.

``lob.studies.gitbisect`` runs this file (never imports it) in a fresh process of the current
interpreter, with the revision's checkout first on ``PYTHONPATH`` and as the working
directory, and one JSON argument: ``engine``, ``workload``, ``metric``, ``scale``, ``inner``,
``nonce``, ``hist``. It prints one line ``LOBPROBE {json}`` with ``status`` (``ok``,
``missing``: the engine or the workload does not exist at this revision, ``broken``: the
code does not import or fails) and, when ok, ``value``, ``hist`` (an encoded HDR histogram
of per-op latencies, or null), ``lob_file``, ``n`` and ``via`` (``registry`` or ``entry
point``).

It imports no lob module at its top: everything it uses of lob comes from the revision
measured, and only API that every revision has (``lob.workload``, ``lob.get_engine`` or a
``lob.engines`` entry point, ``engine.replay`` timed from outside, ``engine.execute`` one row
at a time for per-op latency), so the measuring method is the same at every revision and only
the engine's code changes.

``LOB_BISECT_NOISE`` (a sigma) multiplies the value by lognormal noise, reproducible per
(``LOB_BISECT_NOISE_SEED``, nonce): the tests' way to put noise on a real search.
"""

from __future__ import annotations

import json
import os
import sys
import time


def emit(status: str, **kw) -> None:
    """Print the one result line and end the process."""
    sys.stdout.write("LOBPROBE " + json.dumps({"status": status, **kw}) + "\n")
    sys.stdout.flush()
    sys.exit(0)


def why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:500]


def entry_point_factory(name: str):
    """An engine registered through the ``lob.engines`` entry point (an EngineSpec or a
    list): the entry point named like the engine first; others that fail to load are noted."""
    from importlib.metadata import entry_points

    eps = sorted(entry_points(group="lob.engines"), key=lambda ep: ep.name != name)
    notes = []
    for ep in eps:
        try:
            obj = ep.load()
        except Exception as e:
            if ep.name == name:
                raise
            notes.append(f"entry point {ep.name!r} does not load ({why(e)})")
            continue
        for spec in obj if isinstance(obj, (list, tuple)) else [obj]:
            if getattr(spec, "name", None) == name:
                return spec.factory, notes
    return None, notes


def histogram(d):
    import numpy as np
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(1, 1_000_000_000, 3)
    v, c = np.unique(np.clip(d, 1, 1_000_000_000), return_counts=True)
    for vi, ci in zip(v.tolist(), c.tolist(), strict=True):
        h.record_value(vi, ci)
    return h


def main(argv: list[str]) -> None:
    args = json.loads(argv[1])
    try:
        import numpy as np

        import lob
    except Exception as e:  # the revision does not import: skip it
        emit("broken", error="import lob: " + why(e))
    name = args["engine"]
    try:
        wl = lob.workload(args["workload"], scale=args["scale"])
        cmds = wl.commands
    except Exception as e:
        emit("missing", error=f"workload {args['workload']!r}: " + why(e))

    via = "registry"
    try:
        def make():
            return lob.get_engine(name, wl.config)

        make()
    except ValueError as e:  # not in this revision's registry: a foreign entry point?
        try:
            f, notes = entry_point_factory(name)
        except Exception as e2:
            emit("broken", error="entry point: " + why(e2))
        if f is None:
            emit("missing", error=f"engine {name!r}: " + why(e)
                 + "".join("; " + n for n in notes))

        def make():
            return f(wl.config)

        via = "entry point"
        try:
            make()
        except Exception as e2:
            emit("broken", error=f"engine {name!r}: " + why(e2))
    except Exception as e:
        emit("broken", error=f"engine {name!r}: " + why(e))

    clk = time.perf_counter_ns
    n = max(1, len(cmds))

    def per_op():
        # per-op service time of every timed command, timed here around engine.execute(row)
        ex = make().execute
        out = []
        for r, t in zip(list(cmds), cmds["timed"].tolist(), strict=True):
            if t:
                t0 = clk()
                ex(r)
                out.append(clk() - t0)
            else:
                ex(r)
        return np.asarray(out, dtype=np.int64)

    metric = args["metric"]
    try:
        warm = make().replay(cmds)  # warm-up: imports, caches, JIT; and what it did
        output = None
        if getattr(warm, "checksum", None) is not None:
            counters = getattr(warm, "counters", None)
            output = f"checksum {int(warm.checksum)}" + (
                "; " + ", ".join(f"{k}={int(v)}" for k, v in sorted(counters.items()))
                if isinstance(counters, dict) and counters else "")
        hist = None
        if metric == "ns_per_op":
            best = None
            for _ in range(args["inner"]):
                eng = make()
                t0 = clk()
                eng.replay(cmds)
                dt = clk() - t0
                best = dt if best is None else min(best, dt)
            value = best / n
            if args["hist"]:
                hist = histogram(per_op())
        elif metric in ("p50", "p99", "p99_9"):
            hist = histogram(np.concatenate([per_op() for _ in range(args["inner"])]))
            value = float(hist.get_value_at_percentile({"p50": 50.0, "p99": 99.0,
                                                        "p99_9": 99.9}[metric]))
        elif metric == "allocs_per_op":
            try:
                from lob.measure.alloc import count_allocations
            except ImportError as e:
                emit("missing", error="allocation counting: " + why(e))
            value = float(count_allocations(make(), cmds).allocs_per_op)
            if args["hist"]:
                hist = histogram(per_op())
        else:
            emit("broken", error=f"unknown metric {metric!r}")
    except Exception as e:
        emit("broken", error="measuring: " + why(e))
    sigma = float(os.environ.get("LOB_BISECT_NOISE") or 0)
    if sigma:  # injected noise (tests): multiplicative, reproducible per (seed, nonce)
        rng = np.random.default_rng([int(os.environ.get("LOB_BISECT_NOISE_SEED") or 0),
                                     int(args["nonce"])])
        value *= float(np.exp(rng.normal(0.0, sigma)))
    emit("ok", value=value, hist=hist.encode().decode("ascii") if hist is not None else None,
         lob_file=getattr(lob, "__file__", None), n=n, via=via, output=output)


if __name__ == "__main__":
    main(sys.argv)
