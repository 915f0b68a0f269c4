"""The pure core: values, the loop's states, inputs, events and errors, the chart and
`transition`. It does no IO: it imports only the standard library, pydantic and
python-statemachine (`tests/test_layers.py` and the import contracts keep it so)."""
