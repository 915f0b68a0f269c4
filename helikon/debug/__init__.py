"""The debugger: step, break, rewind, replay and fork runs; its terminal prompt."""
