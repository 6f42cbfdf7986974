"""When the host runner acts: how many intervals one call computes, and when it checkpoints.

Each call of a compiled program costs a few milliseconds on XLA:CPU whatever it computes
(docs/speed.md, the runner's cost), so a call computes as many intervals as the host has nothing
to do between (`Pace`). A checkpoint costs about 5 ms of host work for a small state, more with
a replay buffer, so the default cadence is one a minute of run time, whatever an interval lasts
(`Checkpoints`); `checkpoint_every` adds one every that many intervals. The numbers of a run are
the same however it is cut into calls and wherever it is checkpointed.
"""

import dataclasses
import time
from typing import ClassVar

import jax
import numpy as np


@dataclasses.dataclass
class Pace:
    """How many intervals the next call computes: up to `most`, as many as fill about
    `target_s` at the speed of the last call, never past the next checkpoint due by count
    (`every` intervals; 0: none). The first call computes one interval, and measures."""

    most: int
    every: int
    target_s: ClassVar[float] = 0.5
    per_interval_s: float | None = None

    def count(self, i: int, end: int) -> int:
        """Intervals to compute from interval i (of `end`)."""
        room = end - i
        if self.every:
            room = min(room, self.every - i % self.every)
        if self.per_interval_s is None:
            return 1
        fits = int(self.target_s / max(self.per_interval_s, 1e-6))
        return max(1, min(room, self.most, fits))

    def took(self, seconds: float, count: int) -> None:
        self.per_interval_s = seconds / count


@dataclasses.dataclass
class Checkpoints:
    """Whether a checkpoint is due after a call: every `every` intervals (0: not by count), or
    once `minutes` of run time have passed since the last one (0: not by time). Under
    multi-host, process 0's clock decides for every process (the checkpoint is a collective)."""

    every: int
    minutes: float
    last: float = dataclasses.field(default_factory=lambda: time.perf_counter())

    def due(self, done: int) -> bool:
        """After `done` intervals in all."""
        by_count = bool(self.every) and done % self.every == 0
        by_time = bool(self.minutes) and time.perf_counter() - self.last >= 60 * self.minutes
        if jax.process_count() > 1 and self.minutes:
            from jax.experimental import multihost_utils

            by_time = bool(multihost_utils.broadcast_one_to_all(np.bool_(by_time)))
        return by_count or by_time

    def saved(self) -> None:
        self.last = time.perf_counter()
