"""The science of lob: one module per experiment (procedure, tables, sentences and plots over
plain data, unit-tested), the seeds' claims and their verdicts, the git bisection, and the
shared table and plot helpers. Notebooks are views over these modules; the notebook runner
lives in :mod:`lob.experiments`. Nothing here is imported by engines, workloads, measure or
pipeline (the package order is tested)."""
