"""`scan`: `jax.lax.scan`, unrolled in programs compiled for a GPU or TPU only.

On a GPU each trip of a loop is its own few kernels, launched one after another: a GAE step is
4 small elementwise kernels, a MinAtar rollout step about 45. Unrolling k steps per trip lets
XLA fuse across the steps and drop the copies of the loop's carried state each trip makes.
Compiled for an H100 (`benchmarks/gpu/gpu_kernels.py`), GAE's 128 steps take 40 kernels unrolled
16 per trip against 512 rolled, PPO's MinAtar rollout 30 kernels per step unrolled 4 per trip
against 45, and DQN's MinAtar env step with its update 75 against 126 (the trainer's loop over
iterations, `Train.unroll`). On XLA:CPU the same unrolling only costs: a MinAtar rollout
unrolled 4 per trip did not compile in 15 minutes, one unrolled 2 per trip ran no faster, and
GAE unrolled 16 per trip took 57 us against 15 us (benchmarks/README.md). So a program compiled
for the CPU keeps one step per trip. The platform the program is compiled for decides
(`lax.platform_dependent`, as in `layers.Conv2d`), not the process's default backend.
Unrolling changes no algorithm: the same ops run on the same values (fused differently, a GPU
may round differently at float precision).
"""

from collections.abc import Callable
from typing import Any

import jax


def scan(
    f: Callable,
    init: Any,
    xs: Any = None,
    length: int | None = None,
    *,
    reverse: bool = False,
    unroll: int = 1,
) -> tuple[Any, Any]:
    """`jax.lax.scan(f, init, xs, length, reverse=reverse)`, `unroll` steps per loop trip where
    the program is not compiled for the CPU (`f` is traced twice then: once per form)."""
    if unroll == 1:
        return jax.lax.scan(f, init, xs, length, reverse=reverse)

    def steps_per_trip(k: int) -> Callable:
        return lambda init, xs: jax.lax.scan(f, init, xs, length, reverse=reverse, unroll=k)

    return jax.lax.platform_dependent(
        init, xs, cpu=steps_per_trip(1), default=steps_per_trip(unroll)
    )
