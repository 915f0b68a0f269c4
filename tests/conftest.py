"""Suite-wide setup: values are immutable at run time under test (see helikon.core.values)."""

import os

# Fixtures: a throwaway PostgreSQL cluster, and each run store backend in turn.
from postgres_support import postgres_url  # noqa: F401
from store_support import backend, store  # noqa: F401

os.environ.setdefault("HELIKON_STRICT_VALUES", "1")
