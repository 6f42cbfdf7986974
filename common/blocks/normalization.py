"""Running mean and variance of observations or returns, and normalisation by them.

A number-affecting building block shared by the algorithms that normalise (ppo_continuous.py
today; the MuJoCo algorithms next): the statistics are an `eqx.Module` kept in the TrainState,
so they are vmapped, checkpointed, and frozen at evaluation. Tested against NumPy.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


class RunningStats(eqx.Module):
    """Running mean and variance of a stream of batches (count starts at 1e-4, as in gym)."""

    mean: Float[Array, "*shape"]
    var: Float[Array, "*shape"]
    count: Float[Array, ""]

    @staticmethod
    def create(shape: tuple[int, ...]) -> "RunningStats":
        """Mean 0, variance 1, count 1e-4 (gym's NormalizeObservation starts there too)."""
        return RunningStats(jnp.zeros(shape), jnp.ones(shape), jnp.float32(1e-4))


def update_stats(stats: RunningStats, batch: Float[Array, "samples ..."]) -> RunningStats:
    """Merge a batch's moments into running statistics (Chan et al. parallel variance)."""
    n, delta = batch.shape[0], batch.mean(0) - stats.mean
    count = stats.count + n
    m2 = stats.var * stats.count + batch.var(0) * n + delta**2 * stats.count * n / count
    return RunningStats(stats.mean + delta * n / count, m2 / count, count)


def normalize(x: Float[Array, "*batch obs_dim"], stats: RunningStats) -> Float[Array, "..."]:
    """Standardise with running statistics and clip to +-10 (gym's NormalizeObservation)."""
    return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + 1e-8), -10.0, 10.0)
