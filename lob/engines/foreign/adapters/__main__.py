"""``python -m lob.engines.foreign.adapters [NAME ...] [--force]``: build adapters."""

import sys

from lob.engines.foreign.adapters import main

sys.exit(main())
