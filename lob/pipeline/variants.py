"""The pipeline's vocabulary: transports, engine loops (modes), ring layouts, and the names
of the compiled variants, with the checks a session makes before it starts any process.

* transport (:data:`TRANSPORTS`): how commands cross between the processes
  (:mod:`lob.pipeline.transports`);
* mode (:data:`~lob.pipeline.run.MODES`): ``"chunk"`` runs each drained chunk in one call
  and publishes it together, ``"command"`` runs and publishes each command on its own;
* layout (:data:`LAYOUTS`): the ring's slots, ``"fields"`` (slot arrays published by
  ``head``) or ``"line"`` (a cache line per slot with its own sequence word, compiled only);
* a compiled variant is named ``"<mode>/<layout>"`` or ``"<mode>/<layout>/realtime"``
  (:func:`variant_options`).
"""

from __future__ import annotations

from lob.pipeline.run import MODES
from lob.pipeline.transports import TRANSPORTS, Transport, transport_class

__all__ = ["TRANSPORTS", "MODES", "LAYOUTS", "variant_options", "default_mode",
           "default_layout", "engine_backend", "runs_on", "resolve"]

LAYOUTS = ("fields", "line")  # the ring's slots: per-field arrays + head, or a line per slot


def variant_options(name: str) -> dict:
    """A compiled transport variant named ``"<mode>/<layout>"`` or
    ``"<mode>/<layout>/realtime"`` (e.g. ``"chunk/line/realtime"``) -> the
    :class:`~lob.pipeline.session.PipelineSession` keywords ``mode``, ``layout``, ``realtime``."""
    parts = str(name).split("/")
    if len(parts) not in (2, 3) or parts[0] not in MODES or parts[1] not in LAYOUTS \
            or parts[2:] not in ([], ["realtime"]):
        raise ValueError(f"a variant is '<mode>/<layout>' or '<mode>/<layout>/realtime' with "
                         f"mode in {MODES} and layout in {LAYOUTS}, got {name!r}")
    return {"mode": parts[0], "layout": parts[1], "realtime": len(parts) == 3}


def default_mode(transport: str) -> str:
    """The engine loop a transport runs when no ``mode`` is given: ``"chunk"`` for python (a
    Python call per command costs µs), ``"command"`` for compiled (each command published on
    its own, the definition behind seed 003's capacity)."""
    return transport_class(transport).default_mode


def default_layout(transport: str) -> str:
    """The ring layout a transport uses when no ``layout`` is given: ``"line"`` for compiled
    (a command crosses between the cores in one cache line), ``"fields"`` for python (its only
    one)."""
    return transport_class(transport).default_layout


def engine_backend(engine: str) -> str:
    """The backend of a registered engine (``"python"``, ``"numba"``, ...); unknown names
    raise ValueError listing the registered ones."""
    from lob.engines.registry import engine_spec

    return getattr(engine_spec(engine), "backend", "python")


def runs_on(engine: str, transport: str) -> bool:
    """Whether ``engine`` can run on ``transport`` (``compiled`` needs an @numba engine)."""
    return transport_class(transport).runs(engine_backend(engine))


def resolve(engine: str, transport: str, mode: str | None, layout: str | None
            ) -> tuple[type[Transport], str, str]:
    """The session's options checked and defaulted -> ``(transport class, mode, layout)``;
    ValueError naming the first bad one (an unknown transport, mode, layout or engine, a
    layout or engine the transport does not take)."""
    t = transport_class(transport)
    mode = t.default_mode if mode is None else mode
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    layout = t.default_layout if layout is None else layout
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    t.check(engine, engine_backend(engine), layout)
    return t, mode, layout
