"""`helikon.debug.loop.LoopThread`: the prompt's event loop runs on between commands, ^C
stops the command in flight (and only it), and what a command raises reaches the prompt."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

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


def test_ctrl_c_cancels_the_command_and_waits_until_it_stopped() -> None:
    loop = LoopThread()
    began, stopped = threading.Event(), threading.Event()

    async def forever() -> None:
        began.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    def press_ctrl_c() -> None:
        began.wait()
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(forever())
        assert stopped.is_set()  # stopped before the prompt got KeyboardInterrupt
        assert loop.run(asyncio.sleep(0, "still usable")) == "still usable"
    finally:
        presser.join()
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
