"""Browser sessions: who looks at the studio, each with its own breakpoints and position.

Theory of operation: a browser session is named by a random id that the page's answer sets
in a cookie (HttpOnly, SameSite=Strict, named after the port, since cookies do not tell
ports apart). A page load without a known id opens a new session; a reload keeps its own.
What a session sees depends on whether the studio's `ThreadedDebugger` can be copied:

- A replay can (`ThreadedDebugger.copy`): every browser session steps, breaks and rewinds a replay
  of its own, which starts at step 0 with no breakpoints.
- A live run cannot, since its steps call the model and run tools, so browser sessions
  share it and one drives it at a time: the first to send a command that is carried out (one
  refused claims nothing). The others watch: their snapshots show the run without the
  driver's breakpoints and say `driven_elsewhere`, and their commands are refused
  (`AnotherDriver`, 409).

A session is in use while a request of its is in flight or its event stream is open (an
open page keeps one). One not in use for `idle` seconds has left: its replay is closed, or,
if it drove the live run, its breakpoints are deleted and the run waits for the next driver.
At most `limit` sessions are open; a new one takes the place of the longest unused, and
while every one is in use the page is refused (`TooManyBrowsers`, 503). A session keeps at
most `STREAMS` event streams open (`TooManyStreams`, 503): each holds a server thread.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from helikon.studio.session import StudioBusy, StudioError, ThreadedDebugger

IDLE = 60.0  # seconds a browser session may go unused before it has left
LIMIT = 16  # browser sessions open at once
# Event streams of one browser session open at once: a browser opens at most 6 to a host,
# but one a reload closed is noticed at the stream's next write (a keepalive, within 15 s).
STREAMS = 32


class AnotherDriver(StudioBusy):
    """Another browser session drives this live run; the server answers 409."""


class TooManyBrowsers(StudioError):
    """Every browser session the studio keeps is in use; the server answers 503."""


class TooManyStreams(StudioError):
    """A browser session has `STREAMS` event streams open already; the server answers 503."""


@dataclass
class BrowserSession:
    """One browser's view: the `ThreadedDebugger` it drives or watches; `id` is its
    cookie's value."""

    id: str
    session: ThreadedDebugger
    seen: float
    using: int = 0  # requests in flight and event streams open
    streams: int = 0  # event streams open


class BrowserSessions:
    """The browser sessions of one studio; see the module docstring. Thread-safe.

    Args:
        first: the studio's session: the shared live run, or the first browser's replay
            (the others get copies).
        idle: seconds unused after which a browser session has left.
        limit: how many browser sessions may be open at once.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        first: ThreadedDebugger,
        *,
        idle: float = IDLE,
        limit: int = LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first = first
        self.shared = not first.copyable
        self.idle = idle
        self.limit = limit
        self._clock = clock
        self._open: dict[str, BrowserSession] = {}
        self._driver: str | None = None
        self._first_given = False
        self._lock = threading.Lock()

    def open(self) -> BrowserSession:
        """A new browser session, for a page load without a known cookie.

        Raises:
            TooManyBrowsers: `limit` sessions are open and every one is in use.
        """
        with self._lock:
            left = self._leave_unused()
            if len(self._open) >= self.limit:
                unused = [b for b in self._open.values() if not b.using]
                if not unused:
                    raise TooManyBrowsers(
                        f"{self.limit} studio pages are open, the most there may be: close one"
                    )
                left.append(self._open.pop(min(unused, key=lambda b: b.seen).id))
            session = self.first
            if not self.shared and self._first_given:
                session = self.first.copy()
            self._first_given = True
            browser = BrowserSession(secrets.token_urlsafe(32), session, self._clock())
            self._open[browser.id] = browser
        self._close(left)
        return browser

    @contextmanager
    def use(self, browser_id: str | None) -> Iterator[BrowserSession | None]:
        """The browser session `browser_id` names (None when there is none), kept in use
        until the block ends."""
        with self._lock:
            browser = None if browser_id is None else self._open.get(browser_id)
            if browser is not None:
                browser.using += 1
        try:
            yield browser
        finally:
            if browser is not None:
                with self._lock:
                    browser.using -= 1
                    browser.seen = self._clock()

    @contextmanager
    def streaming(self, browser: BrowserSession) -> Iterator[None]:
        """Counts an event stream of `browser` as open for the block: each holds a thread of
        the server while it is open.

        Raises:
            TooManyStreams: `STREAMS` of them are open already.
        """
        with self._lock:
            if browser.streams >= STREAMS:
                raise TooManyStreams(
                    f"{STREAMS} event streams of this page are open, the most there may be"
                )
            browser.streams += 1
        try:
            yield
        finally:
            with self._lock:
                browser.streams -= 1

    @contextmanager
    def driving(self, browser: BrowserSession) -> Iterator[ThreadedDebugger]:
        """The session `browser` may command, for the block that commands it; a shared run
        becomes `browser`'s to drive, unless the block's command is refused (it raises a
        `StudioError`: nothing was done), when the run waits for its driver again.

        Raises:
            AnotherDriver: another browser session drives the shared run.
        """
        if not self.shared:
            yield browser.session
            return
        with self._lock:
            left = self._leave_unused()
        self._close(left)
        with self._lock:
            claimed = self._driver is None
            if claimed:
                self._driver = browser.id
            driver = self._driver
        if driver != browser.id:
            raise AnotherDriver("another browser session drives this run")
        try:
            yield browser.session
        except StudioError:
            if claimed:
                with self._lock:
                    if self._driver == browser.id:
                        self._driver = None
            raise

    def switch(self, browser: BrowserSession, session: ThreadedDebugger) -> None:
        """`browser` replays `session` from now on (a run store's run it picked); the
        replay it had is closed, unless other browser sessions are given copies of it.

        Raises:
            StudioError: the studio's run is shared (live): a browser cannot leave it.
        """
        if self.shared:
            session.close()
            raise StudioError("this studio drives one live run: it opens no other")
        with self._lock:
            old, browser.session = browser.session, session
        if old is not self.first:
            old.close()

    def view(self, browser: BrowserSession, data: dict[str, Any]) -> dict[str, Any]:
        """A snapshot as `browser` sees it: a watcher is not shown the driver's breakpoints;
        `driving` says this browser session drives the shared run, `browsers` how many
        browser sessions are open."""
        elsewhere = self.shared and self._driver not in (None, browser.id)
        with self._lock:
            watching = len(self._open)
        seen = {"driving": self.shared and self._driver == browser.id, "browsers": watching}
        if elsewhere:
            return {**data, **seen, "breakpoints": [], "driven_elsewhere": True}
        return {**data, **seen, "driven_elsewhere": False}

    def sessions(self) -> list[ThreadedDebugger]:
        """Every session a browser session sees, and the first."""
        with self._lock:
            found = {id(b.session): b.session for b in self._open.values()}
        found[id(self.first)] = self.first
        return list(found.values())

    def close(self) -> None:
        """Close every session; the studio is stopping."""
        for session in self.sessions():
            session.close()

    def _leave_unused(self) -> list[BrowserSession]:
        """Drop the sessions unused for `idle` seconds; the caller holds the lock and then
        calls `_close` on what this returns, without it."""
        now = self._clock()
        left = [b for b in self._open.values() if not b.using and now - b.seen > self.idle]
        for browser in left:
            del self._open[browser.id]
        return left

    def _close(self, left: list[BrowserSession]) -> None:
        for browser in left:
            if not self.shared:
                browser.session.close()
            elif browser.id == self._driver:
                browser.session.clear_breakpoints()  # before the next driver can set one
                with self._lock:
                    self._driver = None
