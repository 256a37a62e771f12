"""``python -m pytest_ragmetrics``: the same as the ``ragmetrics`` command."""

import sys

from .cli import main

sys.exit(main())
