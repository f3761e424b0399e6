"""``python -m lob.cli``: the ``lob`` command."""

import sys

from lob.cli import main

sys.exit(main())
