"""Preemption: SIGTERM (what SLURM and cloud schedulers send) and SIGINT (Ctrl-C) end a run
cleanly, between intervals.

The first signal only sets `Preemption.signal`; the runner finishes the call in flight (one
interval, or the few that fill about half a second: common/run/cadence.py), checkpoints it and
stops (exit code 75 from the command line). The first signal also puts the
default action back, so a second one ends the process at once (exit 143 or 130): checkpoints are
written by rename (common/run/files.py), so the previous one stays whole. During training the
first signal says so at once on stderr, in one line.

Python runs signal handlers in the main thread only, between bytecodes: `Pending` runs an
interval on a helper thread while the main thread works or waits in short joins, so a signal is
seen within milliseconds during a long interval. Compilation, which Python cannot interrupt
either, runs the same way (`interruptible`): a signal while compiling raises `Interrupted` at
once, and the command line exits 75 in one line, as nothing was trained or saved.
"""

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import jax

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Preemption:
    """`with Preemption() as p:` ... `p.signal` is the name of the first signal, or None.

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """

    def __init__(self, notice: str | None = None) -> None:
        self.signal: str | None = None
        self.notice = notice  # printed to stderr on the first signal, after its name
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "Preemption":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        self.signal = signal.Signals(number).name
        for s in SIGNALS:  # a second signal: the default action, at once
            signal.signal(s, signal.SIG_DFL)
        if self.notice:  # os.write: no buffered stream is re-entered from a handler
            os.write(sys.stderr.fileno(), f"{self.signal}: {self.notice}\n".encode())


class Pending:
    """`fn(*args)` computing on a helper thread from now on; `result()` waits for it in short
    joins, so that a signal is handled during a long XLA call or compilation (which can block
    the calling thread until it ends, on the CPU), and the main thread is free meanwhile (the
    runner does the previous interval's host work while the next one computes)."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "canter-interval") -> None:
        self._done: dict[str, Any] = {}
        self.seconds = 0.0  # how long fn took, once it has ended
        self._worker = threading.Thread(target=self._target, args=(fn, args), name=name)
        self._worker.daemon = True
        self._worker.start()

    def _target(self, fn: Callable[..., Any], args: tuple) -> None:
        tic = time.perf_counter()
        try:
            self._done["out"] = jax.block_until_ready(fn(*args))
        except BaseException as error:  # handed to the caller by result()
            self._done["error"] = error
        self.seconds = time.perf_counter() - tic

    def result(self, poll_s: float = 0.01, tick: Callable[[], None] = lambda: None) -> Any:
        """The result (or the error raised), `tick()` called after every join meanwhile (the
        runner's heartbeat: common/run/heartbeat.py)."""
        self.wait(poll_s, tick=tick)
        if "error" in self._done:
            raise self._done["error"]
        return self._done["out"]

    def wait(
        self,
        poll_s: float = 0.01,
        until: Callable[[], bool] = lambda: False,
        tick: Callable[[], None] = lambda: None,
    ) -> None:
        """Until the computation ends (or `until()` holds); its result, or error, stays unread
        (a discarded interval)."""
        while self._worker.is_alive() and not until():
            self._worker.join(poll_s)
            tick()


class Interrupted(Exception):
    """SIGTERM or SIGINT arrived while a run was compiling: nothing was trained or saved.
    `signal` is its name. The compilation may still be going on, on a helper thread."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"stopped ({signal_name}) while compiling: nothing trained, nothing saved")
        self.signal = signal_name


def interruptible(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` (compiling, which Python cannot interrupt) as a `Pending`; SIGTERM or SIGINT
    meanwhile raises `Interrupted` at once (the thread is left to finish on its own: the caller
    is expected to exit)."""
    with Preemption() as preemption:
        compiling = Pending(fn, *args, name="canter-compile")
        compiling.wait(until=lambda: preemption.signal is not None)
        if preemption.signal:
            raise Interrupted(preemption.signal)
    return compiling.result()
