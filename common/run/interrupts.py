"""Preemption: SIGTERM (what SLURM and cloud schedulers send) and SIGINT (Ctrl-C) end a run
cleanly, between intervals.

The first signal only sets `Preemption.signal`; the runner finishes the interval in flight,
checkpoints it and stops (exit code 75 from the command line). The first signal also puts the
default action back, so a second one ends the process at once (exit 143 or 130): checkpoints are
written by rename (common/run/files.py), so the previous one stays whole.

Python runs signal handlers in the main thread only, between bytecodes: `call` runs an interval
on a helper thread while the main thread waits in short joins, so a signal is seen within
milliseconds during a long interval.
"""

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import jax

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Preemption:
    """`with Preemption() as p:` ... `p.signal` is the name of the first signal, or None.

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """

    def __init__(self) -> None:
        self.signal: str | None = None
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


def call(fn: Callable[..., Any], *args: Any, poll_s: float = 0.01) -> Any:
    """`fn(*args)` with its results computed, run on a helper thread while the main thread
    waits in short joins, so that a signal is handled during a long XLA call (which can block
    the calling thread until it ends, on the CPU)."""
    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["out"] = jax.block_until_ready(fn(*args))
        except BaseException as error:  # handed to the caller below
            done["error"] = error

    worker = threading.Thread(target=target, name="canter-interval", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(poll_s)
    if "error" in done:
        raise done["error"]
    return done["out"]
