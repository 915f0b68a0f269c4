"""The debugger: step, break, rewind, replay and fork runs; its terminal prompt.

`import helikon` does not import this package: a program that runs agents does not pay for
the debugger. `Debugger` (`debugger.py`) is the one entry point; `DebuggerError` what it
raises for a command it refuses.
"""

from __future__ import annotations

from helikon.debug.debugger import Debugger, DebuggerError

__all__ = ["Debugger", "DebuggerError"]
