"""Diverged seeds: found on the device once per interval, reported by seed and sweep point.

An entry of the batch has diverged when its state (parameters, optimiser moments, buffers,
normalisers) holds a NaN or an infinity, when a training metric is infinite, or when its
evaluation is not finite. NaN in a training metric alone means "did not happen" (no episode
ended, an update skipped: algorithms/trainer.py, `when`), so only infinities count there; a NaN
loss reaches the parameters at the next update and is caught there.

The check is one reduction per interval inside the compiled interval; the host reads one bool
per entry. Diverged entries go on training (their NaNs stay theirs: entries share no
arithmetic), unless the run was asked to stop at the first divergence.
"""

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from canter.common.run.batch import Batch
from jaxtyping import Array, Bool


def finite(state: Any, metrics: dict[str, dict[str, Array]]) -> Bool[Array, ""]:
    """True while `state` and `metrics` of one entry show no divergence (see the module doc)."""
    checks = [jnp.all(jnp.isfinite(x)) for x in _floats(state)]
    checks += [jnp.all(~jnp.isinf(x)) for x in _floats(metrics["train"])]
    checks += [jnp.all(jnp.isfinite(x)) for x in _floats(metrics["eval"])]
    return jnp.all(jnp.stack(checks))


def _floats(tree: Any) -> list[Array]:
    return [
        x
        for x in jax.tree.leaves(tree)
        if isinstance(x, jax.Array | jax.ShapeDtypeStruct) and jnp.issubdtype(x.dtype, jnp.inexact)
    ]


@dataclasses.dataclass
class Divergence:
    """The first interval (1-based) at which each entry diverged, or None."""

    batch: Batch
    first: list[int | None]

    @classmethod
    def none(cls, batch: Batch) -> "Divergence":
        return cls(batch, [None] * batch.size)

    def update(self, interval: int, ok: Any) -> list[int]:
        """Record interval `interval` (1-based); the entries that diverged in it."""
        new = [b for b in range(self.batch.size) if not ok[b] and self.first[b] is None]
        for b in new:
            self.first[b] = interval
        return new

    def describe(self, b: int) -> str:
        """`seed 3` or `seed 3 at learning_rate=0.1` for entry b."""
        point = self.batch.points[b // len(self.batch.seeds)]
        seed = self.batch.seeds[b % len(self.batch.seeds)]
        where = ", ".join(f"{k}={v:g}" for k, v in point.items())
        return f"seed {seed}" + (f" at {where}" if where else "")

    def records(self, env_steps: Any) -> list[dict[str, Any]]:
        """summary.json's `diverged`: seed, sweep point, interval and env steps, per entry."""
        return [
            {
                "seed": self.batch.seeds[b % len(self.batch.seeds)],
                "point": self.batch.points[b // len(self.batch.seeds)],
                "interval": at,
                "env_steps": env_steps(at - 1),
            }
            for b, at in enumerate(self.first)
            if at is not None
        ]
