"""Engines the studies take by name that may not run everything: a third-party engine behind
the C ABI (``orderly_chaos``) declares a subset of lob's semantics and is built on demand.

The studies use these helpers so such an engine takes part where it can and is named where it
cannot, in one line, never a failure inside a replay:

* :func:`built_only` -- drop the adapters not built on this machine (no C++ compiler, no
  package index), printing the one line that says so;
* :func:`refusal` -- why an engine cannot run a workload (its declared capabilities, from
  :mod:`lob.engines.capabilities`), or None;
* :func:`stp_none_copy` -- the workload with its STP mode set to one the engine declares (the
  same commands: :func:`lob.studies.engines_beside.declared_workload`), and the
  change in words, so rows measured on it are labelled;
* :func:`lineage` -- the engines of lob's own lineage (with toggles) among ``engines``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["built_only", "refusal", "stp_none_copy", "lineage", "declared_workload",
           "shim_cost"]


def _measure_module():
    """The adapters' measurement module (:mod:`lob.studies.engines_beside`)."""
    from lob.studies import engines_beside

    return engines_beside


def declared_workload(engine: str, wl):
    """``(wl, None)`` or ``(STP-changed copy, note)``: the adapters' ``declared_workload``."""
    return _measure_module().declared_workload(engine, wl)


def shim_cost(*args, **kwargs) -> dict:
    """The adapters' ``shim_cost`` (the shim against the engine driven natively)."""
    return _measure_module().shim_cost(*args, **kwargs)


def built_only(engines: Sequence[str], *, say=print) -> list[str]:
    """``engines`` without the adapters not built on this machine; for each one dropped,
    ``say`` gets one line (the build command, and that the study runs without it)."""
    from lob.engines.foreign.adapters import not_built_hint

    out = []
    for e in engines:
        hint = not_built_hint(e)
        if hint:
            say(f"{hint}; this run goes on without it")
        else:
            out.append(e)
    return out


def refusal(engine: str, wl) -> str | None:
    """One line saying why ``engine`` cannot run ``wl`` (config or commands outside its
    declared capabilities), or None when it can."""
    from lob.engines.registry import engine_capabilities

    caps = engine_capabilities(engine)
    return caps.config_refusal(engine, wl.config) or \
        caps.commands_refusal(engine, wl.commands, wl.config)


def stp_none_copy(engines: Sequence[str], wl):
    """``(wl, None)`` when every engine runs ``wl``; else the copy whose STP mode the first
    refusing engine declares, and the note naming the change (raises
    :class:`~lob.engines.capabilities.Unsupported` when no STP mode helps)."""
    for e in engines:
        if refusal(e, wl):
            return declared_workload(e, wl)
    return wl, None


def lineage(engines: Sequence[str]) -> list[str]:
    """The engines of lob's lineage (registered with toggles), in order."""
    from lob.engines.registry import engine_spec

    return [e for e in engines if engine_spec(e).toggles]
