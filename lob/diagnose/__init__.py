"""Diagnosis of the machine and of the kernels, above the measurement primitives of
:mod:`lob.measure`: the machine's own pauses (:mod:`.hiccup`), yardsticks taken beside an
engine in the same rounds (:mod:`.probes`: the core's clock and issue width, the stream's
floor), the compiled lineage profiled step by step and engines side by side (:mod:`.profile`,
``lob profile``), and the kernels' counts and hot lines (:mod:`.callgrind`, :mod:`.hotspots`).
Nothing here is needed to measure an engine; it says why a figure is what it is.
"""
