"""``python -m elical``: the command line (also ``accelerate launch -m elical ...``)."""

import sys

from elical.cli import main

sys.exit(main())
