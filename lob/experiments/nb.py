"""Moved to :mod:`lob.studies.nb` (the notebooks' record of a run); kept importable until the
notebooks are all views over lob.studies."""

from lob.studies.nb import *  # noqa: F401,F403
from lob.studies.nb import run_dir, save_figure, write_summary  # noqa: F401
