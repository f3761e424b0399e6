"""The version of lob, in one place (read by ``lob.__version__`` and the run conditions)."""

__version__ = "0.1.0"
