"""``lob engines``: the registered engines and lineage versions; ``lob engines build`` builds
third-party engine adapters, ``lob engines warm`` lob's C++ engines and numba's kernels."""

from __future__ import annotations

import sys


def engines_table() -> list[str]:
    """One line per registered engine: name, backend, toggles, parent, widest band it
    accepts (``any`` when its memory does not grow with the band), source, description."""
    from lob.engines import toggles as tg
    from lob.engines.registry import engine_names, engine_spec, get_engine
    from lob.semantics import BookConfig

    lines = [f"{'name':<16} {'backend':<7} {'toggles':<34} {'parent':<14} {'band':<14} "
             "description"]
    for name in engine_names():
        s = engine_spec(name)
        tog = ",".join(s.toggles.get(k, "-") for k in tg.NAMES) if s.toggles else "-"
        if set(s.toggles) - set(tg.NAMES):  # another family's toggles: named, in its order
            tog = ",".join(f"{k}={v}" for k, v in s.toggles.items())
        src = "" if s.source == "lob" else f" [from {s.source}]"
        caps = None
        try:  # declared capabilities (foreign engines), else a one-tick book's attribute
            if hasattr(s.factory, "capabilities"):
                caps = s.factory.capabilities()
                w = caps.max_band_width
            else:
                w = getattr(get_engine(name, BookConfig(1, 1)), "max_band_width", None)
            band = "any" if w is None else f"<={w / 1e6:.1f}M ticks" if w >= 10**5 \
                else f"<={w:,} ticks"
            if caps is not None and (caps.min_price or caps.max_price):
                band = "{:,}..{:,}".format(*caps.price_range)
        except Exception as e:  # a plugin that cannot build: say so, keep listing
            band = "not built" if "not built" in str(e) else f"? ({type(e).__name__})"
        if caps is not None and not caps.complete:
            src += f" [{caps.summary()}]"
        lines.append(f"{name:<16} {s.backend:<7} {tog:<34} {s.parent or '-':<14} {band:<14} "
                     f"{s.description}{src}")
    from lob.engines.foreign.adapters import unbuilt

    if unbuilt():
        lines.append(f"not built yet (third-party engines behind a shim): {', '.join(unbuilt())}"
                     f"; build with `lob engines build NAME`")
    from lob.engines import native

    if native.unbuilt():
        lines.append(f"not built (lob's C++ engines): {', '.join(native.unbuilt())}: "
                     f"{native.unavailable()}")
    lines.append("band: the widest price band (max - min + 1) an engine accepts; engines whose "
                 "per-price arrays grow with the band refuse wider ones at creation "
                 "(limit: LOB_MAX_BAND_BYTES, default 1 GiB)")
    return lines


def _build_adapters(names: list[str], force: bool) -> int:
    """Build the named adapters (all when none): 0, 1 when one failed, 2 when one could not
    be built here (no compiler, no network)."""
    from lob.engines.foreign.adapters import ADAPTERS, BuildError, BuildUnavailable, build

    rc = 0
    for n in names or list(ADAPTERS):
        try:
            lib = build(n, force=force, log=lambda m, n=n: print(f"{n}: {m}", flush=True))
            print(f"{n}: ready ({lib})")
        except BuildUnavailable as e:
            print(f"{n}: skipped: {e}", file=sys.stderr)
            rc = rc or 2
        except (BuildError, ValueError) as e:
            print(f"{n}: {e}", file=sys.stderr)
            rc = 1
    return rc


def _cmd_engines(args) -> int:
    if args.action == "build":  # third-party engines behind a shim (lob.engines.foreign.adapters)
        return _build_adapters(args.names, args.force)
    if args.action == "warm":  # numba's kernels compiled (or loaded) before a batch or the tests
        import threading

        from lob.engines import native
        from lob.engines.compiled import warm

        # lob's C++ engines build in a thread beside numba's two processes (g++ fills the core
        # the shorter kernel leaves idle); each line printed once both are done
        built: dict = {}
        cpp = threading.Thread(target=_build_native, args=(native, built))
        cpp.start()
        try:
            took = warm()
        except RuntimeError as e:
            took = e
        cpp.join()
        if "error" in built:
            print(f"lob engines warm: {built['error']}", file=sys.stderr)
            return 1
        if "unavailable" in built:
            print(f"lob's C++ engines not built: {built['unavailable']}", file=sys.stderr)
        else:
            print(f"lob's C++ engines ready: {', '.join(built['names'])}")
        if isinstance(took, RuntimeError):
            print(f"lob engines warm: {took}", file=sys.stderr)
            return 1
        print("numba kernels ready (two processes, side by side): "
              + "; ".join(f"{', '.join(g)} {t:.0f} s" for g, t in took.items()))
        return 0
    print("\n".join(engines_table()))
    from lob.engines.toggles import NAMES, VALUES

    print(f"toggles are {','.join(NAMES)}; each backend registers only the versions it "
          "implements:")
    for backend, have in VALUES.items():
        print(f"  {backend}: " + "; ".join(f"{k}={'|'.join(v)}" for k, v in have.items()))
    return 0


def _build_native(native, into: dict) -> None:
    """``native.build_all()`` into ``into``: ``names``, or ``unavailable`` (no compiler) or
    ``error`` (a failed compile), each a one-line reason (run in a thread by ``warm``)."""
    try:
        into["names"] = list(native.build_all())
    except native.BuildUnavailable as e:
        into["unavailable"] = str(e)
    except native.BuildError as e:
        into["error"] = str(e)
    except Exception as e:  # anything else: one line, not a traceback from the thread
        into["error"] = f"building lob's C++ engines: {type(e).__name__}: {e}"


ENGINES_DESC = (
    "Registered engines with backend, toggles, parent, widest band and what each lacks. `lob "
    "engines build [NAME ...]` builds the third-party engines behind a shim (fetched by pip, "
    "compiled into lob's cache). `lob engines warm` builds lob's C++ engines and compiles (or "
    "loads) numba's kernels in two processes side by side, so that no later worker "
    "compiles a kernel or races another to numba's cache (`make test` and `make run` do it "
    "first).")


def add_parsers(sub) -> None:
    """Register ``lob engines`` on the ``lob`` CLI's subparsers."""
    s = sub.add_parser("engines", description=ENGINES_DESC,
                       help="list registered engines and lineage versions; "
                            "`lob engines build [NAME ...]` builds third-party engine adapters; "
                            "`lob engines warm` builds lob's C++ engines and compiles (or loads) "
                            "numba's kernels in parallel")
    s.add_argument("action", nargs="?", choices=["build", "warm"],
                   help="build adapters (fetch + compile), or build lob's C++ engines and warm "
                        "numba's kernels")
    s.add_argument("names", nargs="*", help="adapters to build (default: all)")
    s.add_argument("--force", action="store_true", help="rebuild even if built")
    s.set_defaults(func=_cmd_engines)
