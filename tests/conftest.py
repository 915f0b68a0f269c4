"""Suite-wide setup: values are immutable at run time under test (see helikon.core.values),
and `helikon run` keeps no run unless a test names a store (the CLI's default store is a
file under the current directory, which is the repository in these tests)."""

import os

os.environ.setdefault("HELIKON_STRICT_VALUES", "1")
os.environ.setdefault("HELIKON_STORE", "none")
