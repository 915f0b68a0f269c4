"""Headless Chromium driven over the DevTools protocol on a pipe, for the studio's page tests.

`--remote-debugging-pipe` makes Chromium read protocol commands from its fd 3 and write
replies and events to its fd 4, each a JSON message ended by a NUL byte. That needs no
package beyond the standard library (no websockets client, no Playwright), and no port.
A reader thread collects every message; commands wait for their reply, bounded in time.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)
TIMEOUT = 15.0
STARTUP = 60.0
"""How long a new Chromium may take to answer its first command: on a loaded machine a
fresh profile takes far longer than any later command."""
# Moves two inherited pipe ends onto the fds Chromium reads and writes (3 and 4), then
# becomes Chromium: a trampoline, since a shell takes only one-digit fds.
ONTO_3_AND_4 = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)


_NAVIGATING = (
    "Inspected target navigated or closed",
    "Execution context was destroyed",
    "Cannot find context with specified id",
)
"""What Chromium answers an evaluation that a navigation of the page cut off."""


class BrowserError(Exception):
    """Chromium answered a command with an error, or did not answer in time."""


class Browser:
    """One headless Chromium process; `page(url)` opens a tab."""

    def __init__(self, user_data_dir: Path) -> None:
        """Start Chromium; one that does not answer its first command within `STARTUP`
        (it died at start, or hangs) is stopped and started once more."""
        try:
            self._start(user_data_dir)
        except BrowserError:
            self._stop()
            self._start(user_data_dir)

    def _start(self, user_data_dir: Path) -> None:
        assert CHROMIUM is not None
        commands_read, self._commands = map(_above_4, os.pipe())
        self._replies, replies_write = map(_above_4, os.pipe())
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                ONTO_3_AND_4,
                str(commands_read),
                str(replies_write),
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={user_data_dir}",
            ],
            pass_fds=(commands_read, replies_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(replies_write)
        self.messages: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._ids = iter(range(1, 1_000_000))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self.send("Browser.getVersion", timeout=STARTUP)
        except BrowserError as exc:
            code = self.process.poll()
            raise BrowserError(f"Chromium did not start ({exc}; exit status {code})") from None

    def _read(self) -> None:
        pending = b""
        while True:
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                break
            pending += chunk
            *whole, pending = pending.split(b"\0")
            with self._arrived:
                self.messages.extend(json.loads(message) for message in whole)
                self._arrived.notify_all()
        os.close(self._replies)

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float = TIMEOUT,
        **where: Any,
    ) -> Any:
        """Send a command (to a page with `sessionId=`) and return its result."""
        number = next(self._ids)
        message = {"id": number, "method": method, "params": params or {}, **where}
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        reply = self.wait_message(lambda m: m.get("id") == number, timeout)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_message(self, match: Any, timeout: float = TIMEOUT) -> dict[str, Any]:
        with self._arrived:
            found: list[dict[str, Any]] = []

            def seen() -> bool:
                found[:] = [m for m in self.messages if match(m)]
                return bool(found)

            if not self._arrived.wait_for(seen, timeout):
                raise BrowserError(f"no message matched within {timeout} s")
            return found[0]

    def received(self) -> list[dict[str, Any]]:
        """Every message so far (replies and events), in order."""
        with self._arrived:
            return list(self.messages)

    def page(
        self, url: str, *, width: int = 1440, height: int = 1000, isolated: bool = False
    ) -> Page:
        """A tab showing `url`; `isolated` opens it in a browser context of its own (its own
        cookies, as another browser would have)."""
        params: dict[str, Any] = {"url": "about:blank"}
        if isolated:
            params["browserContextId"] = self.send("Target.createBrowserContext")[
                "browserContextId"
            ]
        target = self.send("Target.createTarget", params)["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = Page(self, attached["sessionId"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        page.send("Page.navigate", {"url": url})
        self.wait_message(
            lambda m: (
                m.get("method") == "Page.loadEventFired" and m.get("sessionId") == page.session
            )
        )
        return page

    def _stop(self) -> None:
        """Kill a Chromium that did not start, and let go of its pipes."""
        self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self._commands)
        self._reader.join(TIMEOUT)

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        self._reader.join(TIMEOUT)


def _above_4(fd: int) -> int:
    """`fd` moved above 4, so moving the pipe ends onto 3 and 4 cannot clobber one another."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Page:
    """One tab: evaluate script, click like a person, wait for a condition, take screenshots."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.browser.send(method, params, sessionId=self.session)

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = TIMEOUT) -> Any:
        """The value of `expression` once it is truthy, polled for at most `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except BrowserError as exc:  # the page is navigating (a click that opens a URL):
                if not any(why in str(exc) for why in _NAVIGATING):  # not yet, ask again
                    raise
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"still false after {timeout} s: {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A mouse click at the middle of the element, as a person would click it: once the
        element stands still (the same box two animation frames apart) and nothing else is
        on top of its middle, as Playwright waits before it clicks."""
        box = self.wait_for(
            f"(async () => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const a = e.getBoundingClientRect();"
            " for (let i = 0; i < 2; i++) await new Promise(requestAnimationFrame);"
            " const r = e.getBoundingClientRect();"
            " if (r.x !== a.x || r.y !== a.y || r.width !== a.width || r.height !== a.height)"
            " return null;"
            " const x = r.x + r.width / 2, y = r.y + r.height / 2;"
            " const hit = document.elementFromPoint(x, y);"
            " return hit && e.contains(hit) ? {x: x, y: y} : null; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1},
            )

    def press(self, key: str) -> None:
        """A key pressed and released on the page, as a person types it (one character)."""
        code = f"Key{key.upper()}" if key.isalpha() else ""
        for kind in ("keyDown", "keyUp"):
            event = {
                "type": kind,
                "key": key,
                "code": code,
                "text": key if kind == "keyDown" else "",
            }
            self.send("Input.dispatchKeyEvent", event)

    def select(self, selector: str, value: str) -> None:
        """Choose `value` in a `<select>` and tell the page it changed."""
        self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            f" e.value = {json.dumps(value)}; e.dispatchEvent(new Event('change')); }})()"
        )

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (CSP violations...)."""
        mine = self.session
        errors = [
            json.dumps(m["params"])
            for m in self.browser.received()
            if m.get("sessionId") == mine
            and (
                m.get("method") == "Runtime.exceptionThrown"
                or (
                    m.get("method") == "Runtime.consoleAPICalled"
                    and m["params"]["type"] in ("error", "assert")
                )
                or (
                    m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] == "error"
                )
            )
        ]
        return errors

    def reload(self) -> None:
        """Load the page again, as the reload button does, and wait until it has loaded."""
        old = {id(message) for message in self.browser.received()}
        self.send("Page.reload")
        self.browser.wait_message(
            lambda m: (
                id(m) not in old
                and m.get("method") == "Page.loadEventFired"
                and m.get("sessionId") == self.session
            )
        )

    def cookies(self) -> dict[str, str]:
        """The cookies the page's browser context holds for its URL, by name."""
        found = self.send("Network.getCookies")["cookies"]
        return {cookie["name"]: cookie["value"] for cookie in found}

    def requested_urls(self) -> list[str]:
        return [
            m["params"]["request"]["url"]
            for m in self.browser.received()
            if m.get("sessionId") == self.session and m.get("method") == "Network.requestWillBeSent"
        ]
