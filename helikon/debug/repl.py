"""`helikon debug`: a terminal prompt over a `Debugger`, live or replaying a trace.

Theory of operation: `DebugShell` is a `cmd.Cmd` whose commands each call the debugger once
and print what changed; every coroutine runs on one event loop the shell owns, on a thread
of its own (`helikon.debug.loop.LoopThread`): a model client made on the first step is still
usable on the last, and what a command leaves in flight runs on between commands.
On a terminal the prompt has readline history and completion and output is coloured
(`helikon.export.console`'s rules: NO_COLOR turns it off); whatever the run or its trace
holds is printed escaped (`safe_text`). Driven through a pipe there is no prompt;
each command read is echoed as `(hdb) command`, output is flushed after each command, and
EOF ends the session with status 0, so a transcript reads like a terminal session.

`step in` before a live step whose action starts a nested run steps into it as it runs
(`Debugger.step_in_live`); the prompt then names the nested run, and leaving the session
cancels the run in flight (`Debugger.abandon`) before the loop closes.

A mistaken command prints one `error:` line and the session goes on. `helikon debug` itself
fails with one line and status 2 (a missing or corrupt trace, a chart that cannot be loaded).
"""

from __future__ import annotations

import cmd
import inspect
import shlex
import sys
from collections.abc import Coroutine, Sequence
from typing import Any, TextIO, cast

from helikon.core.errors import HelikonError
from helikon.core.transition import Match
from helikon.debug.completion import ALIASES, BREAK_KINDS, COMMANDS, ShellCompletion
from helikon.debug.debugger import BreakKind, Debugger, Step, Stop
from helikon.debug.fork import fork_request
from helikon.debug.loop import LoopThread
from helikon.debug.view import (
    Paint,
    conversation_lines,
    event_types,
    match_lines,
    state_lines,
    step_line,
    step_report,
    stop_lines,
    where_lines,
)
from helikon.export.console import EventPrinter, safe_text, use_colour

PROMPT = "(hdb) "


class ShellError(Exception):
    """A command that cannot be carried out as typed: printed as one `error:` line."""


class DebugShell(ShellCompletion, cmd.Cmd):
    """An interactive prompt over `debugger` (see the module docstring).

    Args:
        debugger: the debugger to drive; `fork` replaces it, `unfork` restores it.
        script: the chart's scripted model turns when the session is offline; a fork's later
            model calls take the turns that follow those already used.
        title: what the session is, for the banner.
        stdin, stdout: where commands come from and output goes (default: the process's).
        colour: force colour on or off (default: `helikon.export.console.use_colour(stdout)`).
    """

    def __init__(
        self,
        debugger: Debugger,
        *,
        script: Sequence[Any] | None = None,
        title: str = "",
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        colour: bool | None = None,
    ) -> None:
        out = stdout or sys.stdout
        super().__init__(stdin=stdin, stdout=out)
        self.debugger = debugger
        self.script = None if script is None else list(script)
        self.title = title
        self.origins: list[Debugger] = []
        self.outer: list[tuple[Debugger, list[Debugger]]] = []  # `step in`: the runs outside
        self.interactive = self.stdin.isatty()
        self.use_rawinput = self.interactive
        self.prompt = PROMPT if self.interactive else ""
        self.colour = use_colour(out) if colour is None else colour
        self.paint: Paint = EventPrinter(out, self.colour).paint
        self._loop = LoopThread()

    # ------------------------------------------------------------ the session

    def run(self) -> int:
        """Print the banner and read commands until `quit` or EOF; the exit status (0)."""
        self.banner()
        while True:
            try:
                self.cmdloop()
                return 0
            except KeyboardInterrupt:  # ^C at the prompt: a fresh prompt, as in a shell
                self._say("")

    def banner(self) -> None:
        run = self.debugger.run
        table = run.ctx.table
        self._say(self.paint(f"helikon debug: {self.title or run.agent.name}", "bold"))
        self._say(
            self.paint(f"agent {run.agent.name}, chart {table.name} {table.digest[:12]}", "dim")
        )
        self._show_next()
        self._say(self.paint("`help` lists the commands; `quit` or EOF leaves", "dim"))
        self.stdout.flush()

    def close(self) -> None:
        """Cancel a run left in flight by a live `step in`, then close the event loop."""
        outermost = self.outer[0][0] if self.outer else self.debugger
        try:
            if outermost.in_flight:
                self._await(outermost.abandon())
        finally:
            self._loop.close()

    def __enter__(self) -> DebugShell:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ cmd.Cmd hooks

    def onecmd(self, line: str) -> bool:
        try:
            return bool(super().onecmd(line))
        except (ShellError, HelikonError, ValueError) as exc:
            self._error(str(exc))
        except (KeyboardInterrupt, Exception) as exc:  # a bug must not end the session
            # A step cut short may have applied its transition without recording it:
            # restore the last whole step (what its action did outside the run stays done).
            if not self.debugger.in_flight:
                self.debugger.rewind(self.debugger.position)
            at = f"back at step {self.debugger.position}"
            if isinstance(exc, KeyboardInterrupt):
                self._say(self.paint(f"interrupted: {at}", "yellow"))
            else:
                self._error(f"internal error, {at}: {type(exc).__name__}: {exc}")
        return False

    def precmd(self, line: str) -> str:
        if not self.interactive and line != "EOF":
            self._say(self.paint(PROMPT + line, "bold"))
        word, _, rest = line.strip().partition(" ")
        if word.startswith("#"):
            return ""
        return f"{ALIASES.get(word, word)} {rest}".strip()

    def postcmd(self, stop: bool, line: str) -> bool:
        self.stdout.flush()
        return stop

    def emptyline(self) -> bool:
        """On a terminal an empty line repeats `step` or `next`, as in pdb; else nothing."""
        if self.interactive and self.lastcmd.split()[:1] in (["step"], ["next"]):
            return self.onecmd(self.lastcmd)
        return False

    def default(self, line: str) -> None:
        raise ShellError(f"unknown command {line.split()[0]!r}; `help` lists the commands")

    # ------------------------------------------------------------ moving

    def do_step(self, arg: str) -> None:
        """s, step [live | in [RUN] | out]: apply one transition, then obtain the next input.

        An input already recorded (a replayed trace, or steps taken before `back`) is reused,
        so stepping again repeats no side effect; with `live` the effect is performed again
        (the model called, the tools run) and its result replaces the record.

        `step in` opens the run nested in the last step's effect (a handoff target, an agent
        called as a tool; RUN names one of several) and steps its transitions as recorded,
        with the breakpoints its chart has; `step out` (or `up`) returns to the outer run.
        In a live run, before a step whose action starts a nested run, `step in` takes that
        step and steps into the nested run as it runs: it is held before each transition
        while the step's other calls run on; `step out` lets it run to its end, and the
        outer run's step completes.
        """
        words = self._words(arg)
        if words[:1] == ["in"] and len(words) <= 2:
            return self._step_in(words[1] if len(words) == 2 else None)
        if words == ["out"]:
            return self.do_up("")
        live = self._flag(arg, "live", "step")
        step = self._await(self.debugger.step(live=live))
        if step is not None:
            self._show_step(step)
        self._show_next()

    def do_up(self, arg: str) -> None:
        """up: leave the nested run (`step in`) for the run it is nested in (a run stepped
        into live is let go to run to its end first, as `step out` does)."""
        self._flag(arg, None, "up")
        if not self.outer:
            raise ShellError("this is the outermost run: `step in` opens a nested one")
        self.debugger, self.origins = self.outer.pop()
        self._set_prompt()
        self._say(f"up to run {safe_text(self.debugger.run.run_id)}")
        if self.debugger.in_flight:  # its step waited on the nested run: it completes now
            step = self._await(self.debugger.step())
            if step is not None:
                self._show_step(step)
        self._show_next()

    def _step_in(self, run_id: str | None) -> None:
        outer = self.debugger
        ahead = outer.runs_ahead()
        live = bool(ahead) and (run_id is None or run_id in ahead)
        nested = self._await(outer.step_in_live(run_id)) if live else outer.step_in(run_id)
        self.outer.append((outer, self.origins))
        self.debugger, self.origins = nested, []
        self._set_prompt()
        runs = " > ".join(safe_text(d.run.run_id) for d, _ in self.outer)
        how = (
            "live, held before each transition; `step out` lets it run to its end and "
            f"returns to {runs}"
            if live
            else f"{len(nested.expected)} steps as recorded; `step out` returns to {runs}"
        )
        self._say(
            f"in nested run {safe_text(nested.run.run_id)} "
            f"({safe_text(nested.run.agent.name)}, {how})"
        )
        self._show_next()

    def _set_prompt(self) -> None:
        """On a terminal the prompt names the nested run stepped into, if any."""
        if self.interactive:
            inner = safe_text(self.debugger.run.run_id) if self.outer else ""
            self.prompt = f"(hdb {inner}) " if inner else PROMPT

    def do_next(self, arg: str) -> None:
        """n, next: step until the next model turn starts (or a breakpoint, or the end)."""
        self._flag(arg, None, "next")
        self._advance(self.debugger.next_turn())

    def do_continue(self, arg: str) -> None:
        """c, continue: step until a breakpoint is hit, a replay diverges, or the run ends."""
        self._flag(arg, None, "continue")
        self._advance(self.debugger.continue_())

    def do_back(self, arg: str) -> None:
        """back [N]: go back N steps (default 1); stepping again reuses the recorded inputs."""
        words = self._words(arg)
        self.debugger.back(_count(words[0]) if words else 1)
        self._show_next()

    def do_rewind(self, arg: str) -> None:
        """rewind K: go back to the run after K steps (0: before the first step)."""
        words = self._words(arg)
        if len(words) != 1:
            raise ShellError("usage: rewind K")
        self.debugger.rewind(_count(words[0]))
        self._show_next()

    # ------------------------------------------------------------ breakpoints

    def do_break(self, arg: str) -> None:
        """b, break [phase NAME | event TYPE | tool NAME | guard NAME]: set a breakpoint.

        `continue` and `next` stop after a step that enters phase NAME, emits an event of
        TYPE (tool_call_item, run_completed, ...), calls tool NAME, or finds guard NAME true.
        With no argument, list the breakpoints.
        """
        words = self._words(arg)
        if not words:
            return self._list_breakpoints()
        if len(words) != 2 or words[0] not in BREAK_KINDS:
            raise ShellError("usage: break phase NAME | event TYPE | tool NAME | guard NAME")
        kind, value = words
        if kind == "event" and value not in event_types():
            raise ShellError(f"no event type {value!r}; types: {', '.join(event_types())}")
        breakpoint = self.debugger.break_on(cast(BreakKind, kind), value)
        self._say(f"breakpoint {safe_text(breakpoint.describe())}")

    def do_delete(self, arg: str) -> None:
        """d, delete ID: delete breakpoint ID (`break` lists them)."""
        words = self._words(arg)
        if len(words) != 1:
            raise ShellError("usage: delete ID")
        number = _count(words[0].lstrip("#"))
        self.debugger.delete(number)
        self._say(f"deleted breakpoint #{number}")

    def _list_breakpoints(self) -> None:
        found = self.debugger.breakpoints
        for breakpoint in found:
            self._say(safe_text(breakpoint.describe()))
        if not found:
            self._say("no breakpoints")

    # ------------------------------------------------------------ looking

    def do_state(self, arg: str) -> None:
        """state: the loop state now (its phase, then every field)."""
        self._flag(arg, None, "state")
        self._say_all(state_lines(self.debugger.state, self.paint))

    def do_conversation(self, arg: str) -> None:
        """conv, conversation: the conversation so far, one numbered item a line."""
        self._flag(arg, None, "conversation")
        lines = conversation_lines(self.debugger.conversation)
        self._say_all(lines or [self.paint("(the conversation is empty)", "dim")])

    def do_row(self, arg: str) -> None:
        """row: the row the last step took with every guard's value, and the next step's."""
        self._flag(arg, None, "row")
        last = self.debugger.last
        if last is None:
            self._say(self.paint("no step taken yet", "dim"))
        else:
            self._say_match(f"#{last.seq} took", last.match)
        due = None if self.debugger.finished else self.debugger.peek()
        if due is None:
            self._say(self.paint("no step is due next", "dim"))
        else:
            self._say_match("next (peek)", due)

    def _say_match(self, heading: str, match: Match) -> None:
        first, *guards = match_lines(match, self.paint)
        self._say(f"{self.paint(heading, 'bold')} {first}")
        self._say_all(guards)

    def do_events(self, arg: str) -> None:
        """events [all]: the events of the last step, or of every step."""
        every = self._flag(arg, "all", "events")
        steps = self.debugger.history if every else self.debugger.history[-1:]
        if not steps:
            self._say(self.paint("no step taken yet", "dim"))
        for step in steps:
            self._show_step(step)

    def do_history(self, arg: str) -> None:
        """h, history: every step taken so far, one a line."""
        self._flag(arg, None, "history")
        debugger = self.debugger
        for step in debugger.history:
            self._say(step_line(step, self.paint))
        if debugger.expected and not debugger.followed:
            self._say(f"{debugger.position} of {len(debugger.expected)} recorded steps replayed")
        else:
            self._say(f"at step {debugger.position}")

    # ------------------------------------------------------------ forks and saving

    def do_fork(self, arg: str) -> None:
        """fork text | tool | effect | approve | reject ...: run on with another input.

            fork text "ANSWER" [then "TEXT" ...]
            fork tool CALL_ID "RESULT" [CALL_ID "RESULT" ...] [then "TEXT" ...]
            fork effect JSON [then "TEXT" ...]
            fork approve [CALL_ID ...] [then "TEXT" ...]
            fork reject [CALL_ID ...] [then "TEXT" ...]

        Fork the run here with another input for the next step: a model answer (`text`,
        when the run waits for the model), tool results (`tool`, when it waits for tools;
        calls not named keep their recorded results), an effect's result (`effect`, a JSON
        value, when it runs an effect) or approval decisions (when it waits for approval,
        or is suspended: `approve` approves the calls named and rejects the others,
        `reject` the reverse; naming none means all). The shell then debugs the fork, a
        new run that shares this one's history up to here; `unfork` returns to the
        original, unchanged. Breakpoints are carried over, with their numbers.

        The fork's later model calls are answered by the `then` texts when given; otherwise,
        offline, by the chart's scripted turns after those the run has used (counted by the
        model requests in its usage); with a real model, by the model.

        Example, stopped where the budget assistant's tools ran:
            fork tool call_budget "{\"left\": 100}" then "You are well within budget."
        """
        request = fork_request(self.debugger, self._words(arg), self.script)
        self._adopt(self.debugger.fork(request.next_input, turns=request.turns))

    def do_unfork(self, arg: str) -> None:
        """unfork: leave the fork and go back to the run it was forked from."""
        self._flag(arg, None, "unfork")
        if not self.origins:
            raise ShellError("this run is not a fork")
        self.debugger = self.origins.pop()
        self._say(f"back to run {safe_text(self.debugger.run.run_id)}")
        self._show_next()

    def do_save(self, arg: str) -> None:
        """save PATH: write the steps taken so far as a trace (`helikon debug --trace PATH`)."""
        words = self._words(arg)
        if len(words) != 1:
            raise ShellError("usage: save PATH")
        try:
            self.debugger.save_trace(words[0])
        except OSError as exc:
            raise ShellError(f"cannot write {words[0]}: {exc.strerror}") from None
        self._say(f"saved {self.debugger.position} steps to {words[0]}")

    def _adopt(self, forked: Debugger) -> None:
        origin = self.debugger  # `Debugger.fork` carries the breakpoints over, ids and all
        forked.header = origin.header
        self.origins.append(origin)
        self.debugger = forked
        self._say(
            f"forked at step {forked.position}: run {safe_text(forked.run.run_id)} "
            f"(`unfork` returns to {safe_text(origin.run.run_id)})"
        )
        if forked.breakpoints:
            shown = safe_text(", ".join(b.describe() for b in forked.breakpoints))
            self._say(f"breakpoints carried over: {shown}")
        self._show_next()

    # ------------------------------------------------------------ help, leaving

    def do_help(self, arg: str) -> None:
        """help [COMMAND]: list the commands, or explain one."""
        name = ALIASES.get(arg.strip(), arg.strip())
        if not name:
            for command in COMMANDS:
                self._say("  " + _doc(getattr(self, f"do_{command}")).splitlines()[0])
            return
        method = getattr(self, f"do_{name}", None)
        if method is None:
            raise ShellError(f"no command {name!r}; `help` lists the commands")
        self._say(_doc(method))

    def do_quit(self, arg: str) -> bool:
        """q, quit: leave the debugger (EOF does too)."""
        return True

    def do_EOF(self, arg: str) -> bool:
        if self.interactive:
            self._say("")
        return True

    # ------------------------------------------------------------ output

    def _show_step(self, step: Step) -> None:
        self._say_all(step_report(step, self.paint, self.colour))

    def _show_stop(self, stop: Stop) -> None:
        self._say_all(stop_lines(stop, self.debugger.position, self.paint))

    def _show_next(self) -> None:
        self._say_all(where_lines(self.debugger, self.paint))

    def _await(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self._loop.run(coroutine)

    def _advance(self, moving: Coroutine[Any, Any, Stop]) -> None:
        start = self.debugger.position
        stop: Stop = self._await(moving)
        for step in self.debugger.history[start:]:
            self._show_step(step)
        self._show_stop(stop)
        self._show_next()

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")

    def _say_all(self, lines: Any) -> None:
        for line in lines:
            self._say(line)

    def _error(self, message: str) -> None:
        self._say(self.paint(f"error: {message}", "red"))

    def _words(self, arg: str) -> list[str]:
        try:
            return shlex.split(arg)
        except ValueError as exc:
            raise ShellError(f"cannot read the arguments: {exc}") from None

    def _flag(self, arg: str, word: str | None, command: str) -> bool:
        """True when `arg` is `word`, False when empty; anything else is a usage error."""
        words = self._words(arg)
        if words and words != [word]:
            takes = f"takes only `{word}`" if word else "takes no argument"
            raise ShellError(f"{command} {takes}")
        return bool(words)


# ---------------------------------------------------------------- helpers


def _doc(method: Any) -> str:
    return inspect.cleandoc(method.__doc__ or "")


def _count(text: str) -> int:
    if not text.isdigit():
        raise ShellError(f"expected a number, got {text!r}")
    return int(text)
