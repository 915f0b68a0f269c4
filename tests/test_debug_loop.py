"""`helikon.debug.loop.LoopThread`: the prompt's event loop runs on between commands, ^C
stops the command in flight (and only it), and what a command raises reaches the prompt."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

import pytest

from helikon.debug.loop import LoopThread


def test_a_task_a_command_left_runs_on_between_commands() -> None:
    loop = LoopThread()
    go, finished = threading.Event(), threading.Event()

    async def left_in_flight() -> None:
        await asyncio.to_thread(go.wait)
        finished.set()

    async def start() -> asyncio.Task[None]:
        return asyncio.create_task(left_in_flight())

    try:
        task = loop.run(start())
        go.set()  # no command runs now: the task goes on by itself
        assert finished.wait(30)  # a guard against a hang, not a timing
        loop.run(task)
        assert task.done() and task.exception() is None
    finally:
        loop.close()


async def forever(began: threading.Event, stopped: threading.Event) -> None:
    """A command that runs until cancelled: `began` once it runs, `stopped` once it ends."""
    began.set()
    try:
        await asyncio.Event().wait()
    finally:
        stopped.set()


def test_ctrl_c_cancels_the_command_and_waits_until_it_stopped() -> None:
    loop = LoopThread()
    began, stopped = threading.Event(), threading.Event()

    def press_ctrl_c() -> None:
        began.wait()
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(forever(began, stopped))
        assert stopped.is_set()  # stopped before the prompt got KeyboardInterrupt
        assert loop.run(asyncio.sleep(0, "still usable")) == "still usable"
    finally:
        presser.join()
        loop.close()


def test_ctrl_c_as_soon_as_the_command_is_scheduled_still_stops_it() -> None:
    """^C that lands the moment the command is scheduled, before the prompt waits for it
    (a loaded machine makes that window real): the command is still cancelled and waited
    for. Before, the ^C left it running on the loop."""
    loop = LoopThread()
    began, stopped = threading.Event(), threading.Event()

    schedule = loop.loop.call_soon_threadsafe
    pressed: list[bool] = []

    def scheduled_then_ctrl_c(callback: Any, *args: Any) -> Any:
        handle = schedule(callback, *args)
        if not pressed:
            pressed.append(True)
            assert began.wait(30)  # a guard against a hang, not a timing
            os.kill(os.getpid(), signal.SIGINT)  # lands here, in this thread, at once
        return handle

    loop.loop.call_soon_threadsafe = scheduled_then_ctrl_c  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(forever(began, stopped))
        assert stopped.is_set()
    finally:
        loop.loop.call_soon_threadsafe = schedule  # type: ignore[method-assign]
        loop.close()


def test_what_a_command_raises_reaches_the_prompt_and_the_loop_goes_on() -> None:
    loop = LoopThread()

    async def interrupted() -> None:
        raise KeyboardInterrupt

    async def failing() -> None:
        raise ValueError("no such step")

    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(interrupted())
        with pytest.raises(ValueError, match="no such step"):
            loop.run(failing())
        assert loop.run(asyncio.sleep(0, 7)) == 7
    finally:
        loop.close()
    loop.close()  # twice is harmless
