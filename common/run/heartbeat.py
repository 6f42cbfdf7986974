"""A run is never silent for long: a line while it compiles, and one while a long interval
computes.

Compiling (`compiling`): after `COMPILE_NOTICE_S` on a terminal, a line that counts the seconds
in place (`compiling ... 23 s`), erased when the compile ends and the runner says how long it
took; piped, one line at that point and nothing more.

Training (`Heartbeat`): the runner prints a line per interval, and an interval can last
minutes (a Craftax run whose `--eval-every` spans it). While the main thread waits for the
interval in flight, it calls the heartbeat, which shows a line every `period_s`
(`HEARTBEAT_S`, or $CANTER_HEARTBEAT_S): how long the interval has computed, the env steps
reached as estimated from the pace of the intervals done (not measured: nothing comes back from
a compiled program until it returns), the speed measured so far and the last training return,
with the interval it is from. A device-side counter would need a host callback in the program,
and JAX writes no program with a host callback to its persistent compilation cache
(jax/_src/compiler.py, `_cache_write`), so every run would compile again (Craftax: minutes);
the heartbeat changes nothing that is compiled, and no number.
"""

import contextlib
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

COMPILE_NOTICE_S = 10.0
HEARTBEAT_S = 30.0


def heartbeat_s() -> float:
    """Seconds between heartbeat lines: $CANTER_HEARTBEAT_S where it is a positive number,
    else `HEARTBEAT_S`."""
    try:
        period = float(os.environ.get("CANTER_HEARTBEAT_S") or HEARTBEAT_S)
    except ValueError:
        return HEARTBEAT_S
    return period if period > 0 else HEARTBEAT_S


@contextlib.contextmanager
def compiling(
    say: Callable[..., None] | None, after_s: float = COMPILE_NOTICE_S, tty: bool | None = None
) -> Iterator[None]:
    """Says that the body (a compile, on the main thread's watch) is still compiling once it has
    taken `after_s`: counting in place on a terminal (`tty`, default: whether stdout is one),
    else in one line. Nothing with `say` None."""
    if say is None:
        yield
        return
    tty = sys.stdout.isatty() if tty is None else tty
    done = threading.Event()
    shown = threading.Event()

    def tick() -> None:
        tic = time.perf_counter()
        if done.wait(after_s):
            return
        shown.set()
        if not tty:
            say(
                f"compiling ... ({after_s:.0f} s so far; the next line says how long it took)",
                flush=True,  # piped stdout is block-buffered: the line is for now
            )
            return
        while not done.is_set():
            say(f"\rcompiling ... {time.perf_counter() - tic:.0f} s", end="", flush=True)
            done.wait(1.0)

    thread = threading.Thread(target=tick, name="canter-compile-notice", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if tty and shown.is_set():
            say("\r\033[K", end="", flush=True)  # the counting line, erased


@dataclasses.dataclass
class Heartbeat:
    """Called often while an interval computes (`__call__`: cheap until a line is due), told
    of each interval done (`done`); shows a line through `show` once `period_s` has passed
    without one. `train` gives the env steps of interval i (`env_steps(i)`, one seed's),
    `size` the batch's entries, `first` the first interval this process computes."""

    train: Any
    size: int
    first: int
    show: Callable[[str], None]
    period_s: float = dataclasses.field(default_factory=heartbeat_s)
    tic: float = dataclasses.field(default_factory=time.perf_counter)
    done_at: float | None = None  # when the last interval's results came back
    intervals: int = 0  # intervals done, in all (`first` before any)
    statistic: str = ""  # the last training return, and the interval it is from
    last_line: float = 0.0

    def __post_init__(self) -> None:
        self.intervals = self.first
        self.last_line = self.tic

    def done(self, intervals: int, at: float, statistic: str) -> None:
        """`intervals` are done (in all), their results back at `at`, the progress line shown."""
        self.intervals, self.done_at, self.last_line = intervals, at, at
        self.statistic = f"return {statistic} (interval {intervals})"

    def __call__(self) -> None:
        now = time.perf_counter()
        if now - self.last_line >= self.period_s:
            self.last_line = now
            self.show(self.line(now))

    def line(self, now: float) -> str:
        """How the interval in flight goes: time in it, then what is known of the run."""
        started = self.done_at if self.done_at is not None else self.tic
        interval = self.intervals + 1
        where = f"interval {interval} computing for {now - started:.0f} s"
        if self.done_at is None:
            return f"{where}: env steps, speed and return are known when it ends"
        steps = self.train.env_steps
        before = steps(self.first - 1) if self.first else 0
        reached = steps(self.intervals - 1)
        run_s = max(self.done_at - self.tic, 1e-9)
        per_interval_s = run_s / (self.intervals - self.first)
        part = min((now - started) / per_interval_s, 1.0)
        estimate = reached + part * (steps(self.intervals) - reached)
        sps = (reached - before) * self.size / run_s
        return (
            f"env steps ~{estimate:>10,.0f}  SPS {sps:>10,.0f}  {self.statistic}  ({where}; "
            "env steps estimated at the pace so far)"
        )
