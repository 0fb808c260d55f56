"""``python -m terrain_analysis``: the same as the ``terrain-analysis`` command."""

import sys

from terrain_analysis.cli import main

sys.exit(main())
