"""Suite-wide setup: values are immutable at run time under test (see helikon.core.values)."""

import os

os.environ.setdefault("HELIKON_STRICT_VALUES", "1")
