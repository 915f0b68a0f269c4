"""The compiled table as JSON: the data exporters, traces and the debugger agree on."""

from __future__ import annotations

import json

from helikon.core.table import TransitionTable


def to_json(table: TransitionTable) -> str:
    """`table.as_data()` plus its `digest`, indented, keys sorted, ending in a newline.

    The digest is over the data without the `digest` key, so a reader can check it.
    """
    data = {**table.as_data(), "digest": table.digest}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
