"""`python -m helikon.studio CHART ...`: the same as `helikon studio CHART ...`."""

import sys

from helikon.studio.cli import main

sys.exit(main())
